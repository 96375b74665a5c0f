package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a manually advanced clock, safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// len returns the number of keys m stores, including expired keys that have
// not been swept yet.
func (m *Memory) len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.tats)
		s.mu.Unlock()
	}
	return n
}

func TestMemory(t *testing.T) {
	testLimiter(t, harness{
		newLimiter: func(t *testing.T) (Limiter, func(string) string, func(time.Duration)) {
			clock := newFakeClock()
			return NewMemory(clock.Now), func(k string) string { return k }, clock.Advance
		},
	})
}

func TestMemoryClockBackwards(t *testing.T) {
	clock := newFakeClock()
	m := NewMemory(clock.Now)
	ctx := context.Background()
	clock.Advance(-time.Hour) // before the Memory was created
	for i := range 2 {
		d, err := m.Allow(ctx, "a", 2, time.Minute)
		if err != nil || !d.Allowed || d.Remaining != 1-i {
			t.Fatalf("call %d: Allow = %+v, %v; want allowed with %d remaining", i, d, err, 1-i)
		}
	}
	if d, _ := m.Allow(ctx, "a", 2, time.Minute); d.Allowed || d.RetryAfter != 30*time.Second {
		t.Fatalf("third call: Allow = %+v, want denied with RetryAfter 30s", d)
	}
}

func TestMemorySweepByTime(t *testing.T) {
	clock := newFakeClock()
	m := NewMemory(clock.Now)
	ctx := context.Background()
	const n = 10_000
	for i := range n {
		if _, err := m.Allow(ctx, fmt.Sprint("key-", i), 10, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.len(); got != n {
		t.Fatalf("stored %d keys, want %d", got, n)
	}

	// Every TAT is 6s ahead; after the sweep interval they are all in the
	// past, and the next call to each shard sweeps it.
	clock.Advance(sweepInterval)
	now := int64(clock.Now().Sub(m.base))
	allSwept := func() bool {
		for i := range m.shards {
			s := &m.shards[i]
			s.mu.Lock()
			swept := s.lastSweep == now
			s.mu.Unlock()
			if !swept {
				return false
			}
		}
		return true
	}
	probes := 0
	for ; !allSwept(); probes++ {
		if probes > 100*numShards {
			t.Fatal("some shards were never swept")
		}
		if _, err := m.Allow(ctx, fmt.Sprint("probe-", probes), 10, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// Only the probes, which are not expired, remain.
	if got := m.len(); got != probes {
		t.Fatalf("after sweeping, %d keys remain, want the %d probes", got, probes)
	}
	for i := range m.shards {
		s := &m.shards[i]
		if s.peak >= shrinkMinPeak {
			t.Errorf("shard %d: peak %d was not reset by rebuilding the map", i, s.peak)
		}
	}

	// A swept key starts again from a full bucket.
	d, err := m.Allow(ctx, "key-1", 10, time.Minute)
	if err != nil || !d.Allowed || d.Remaining != 9 {
		t.Fatalf("Allow after sweep = %+v, %v; want allowed with 9 remaining", d, err)
	}
}

func TestMemorySweepByTraffic(t *testing.T) {
	clock := newFakeClock()
	m := NewMemory(clock.Now)
	ctx := context.Background()
	const n = 5_000
	for i := range n {
		if _, err := m.Allow(ctx, fmt.Sprint("key-", i), 10, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// Let every TAT pass, but stay well inside the sweep interval, so that
	// only traffic can trigger a sweep.
	clock.Advance(10 * time.Second)
	hot := "hot"
	s := &m.shards[m.shardIndex(hot)]
	s.mu.Lock()
	before := len(s.tats)
	s.mu.Unlock()
	for range 2 * sweepMinOps {
		if _, err := m.Allow(ctx, hot, 1_000_000, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	after := len(s.tats)
	s.mu.Unlock()
	if before < 10 || after != 1 {
		t.Fatalf("hot key's shard held %d keys before and %d after heavy traffic; want many, then only the hot key", before, after)
	}
}

func TestMemoryConcurrentManyKeys(t *testing.T) {
	clock := newFakeClock()
	m := NewMemory(clock.Now)
	const keys, limit, goroutines = 50, 7, 8
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				k := r.IntN(keys)
				d, err := m.Allow(context.Background(), fmt.Sprint("k", k), limit, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range allowed {
		if got := allowed[k].Load(); got != limit {
			t.Errorf("key %d: %d allowed, want %d", k, got, limit)
		}
	}
}

// shardIndex returns the index of the shard that holds key.
func (m *Memory) shardIndex(key string) int {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		_, ok := s.tats[key]
		s.mu.Unlock()
		if ok {
			return i
		}
	}
	// Not stored yet: insert it to find out, with a limit that leaves the
	// rest of the test unaffected.
	if _, err := m.Allow(context.Background(), key, 1_000_000, time.Hour); err != nil {
		panic(err)
	}
	return m.shardIndex(key)
}

func TestMemoryAllowDoesNotAllocate(t *testing.T) {
	m := NewMemory(nil)
	ctx := context.Background()
	if _, err := m.Allow(ctx, "key", 1_000_000, time.Minute); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		_, _ = m.Allow(ctx, "key", 1_000_000, time.Minute)
	})
	if allocs != 0 {
		t.Errorf("Allow on a known key allocates %v times per call, want 0", allocs)
	}
}

// BenchmarkMemoryAllow measures Allow under parallel load with the real
// clock, for a single hot key and for many keys.
func BenchmarkMemoryAllow(b *testing.B) {
	for _, nkeys := range []int{1, 10_000} {
		b.Run(fmt.Sprint("keys=", nkeys), func(b *testing.B) {
			m := NewMemory(nil)
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("sk_live_%08d", i)
			}
			var seed atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(7919)) % nkeys
				ctx := context.Background()
				for pb.Next() {
					if _, err := m.Allow(ctx, keys[i], 600_000, time.Minute); err != nil {
						b.Error(err)
						return
					}
					if i++; i == nkeys {
						i = 0
					}
				}
			})
		})
	}
}
