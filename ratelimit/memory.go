package ratelimit

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

const (
	// numShards is the number of independently locked shards in a Memory.
	// It must be a power of two.
	numShards = 64
	// sweepMinOps is the minimum number of calls a shard serves between two
	// sweeps triggered by traffic alone.
	sweepMinOps = 1024
	// sweepInterval is the clock time after which a shard is swept on its
	// next call regardless of traffic.
	sweepInterval = time.Minute
	// shrinkMinPeak is the smallest shard high-water mark for which the map
	// is rebuilt after most of its keys have expired.
	shrinkMinPeak = 1024
)

// Memory is an in-process [Limiter] for a single node.
//
// It stores one TAT per key in 64 shards, each with its own mutex, so that
// concurrent calls for different keys rarely contend. Allow does not
// allocate except when it sees a new key. Keys whose bucket is full again
// are dropped by sweeps that run opportunistically inside Allow, so a Memory
// starts no goroutines and needs no Close.
//
// Time is measured with the clock given to [NewMemory]; with time.Now the
// monotonic clock is used, so wall clock adjustments do not affect limits.
// The zero value is not usable; create a Memory with NewMemory.
type Memory struct {
	clock  func() time.Time
	base   time.Time
	seed   maphash.Seed
	shards [numShards]shard
}

// shard is one independently locked part of a Memory's key space.
type shard struct {
	mu sync.Mutex
	// tats maps a key to its TAT in nanoseconds since Memory.base.
	tats map[string]int64
	// ops counts calls since the last sweep.
	ops int
	// lastSweep is the time of the last sweep in nanoseconds since
	// Memory.base.
	lastSweep int64
	// peak is the largest size of tats since it was last allocated.
	peak int
	// Padding keeps shards on separate cache lines.
	_ [64]byte
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns an empty Memory that reads the time from clock. A nil
// clock means time.Now; tests may pass a fake clock instead.
func NewMemory(clock func() time.Time) *Memory {
	if clock == nil {
		clock = time.Now
	}
	m := &Memory{clock: clock, base: clock(), seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].tats = make(map[string]int64)
	}
	return m
}

// Allow implements [Limiter]. The context is not used, and the error is
// non-nil only for an invalid limit or period.
func (m *Memory) Allow(_ context.Context, key string, limit int, period time.Duration) (Decision, error) {
	interval, window, err := params(limit, period)
	if err != nil {
		return Decision{}, err
	}
	now := int64(m.clock().Sub(m.base))
	s := &m.shards[maphash.String(m.seed, key)&(numShards-1)]

	s.mu.Lock()
	tat, known := s.tats[key]
	if !known {
		tat = now
	}
	d, newTAT := gcra(now, tat, interval, window, limit)
	if d.Allowed {
		if !known {
			// Copy the key so that the map does not pin a larger buffer
			// the caller may have sliced it from.
			key = strings.Clone(key)
			s.tats[key] = newTAT
			s.peak = max(s.peak, len(s.tats))
		} else {
			s.tats[key] = newTAT
		}
	}
	s.ops++
	if s.ops >= max(len(s.tats), sweepMinOps) || now-s.lastSweep >= int64(sweepInterval) {
		s.sweep(now)
	}
	s.mu.Unlock()
	return d, nil
}

// sweep drops the keys whose bucket is full again at time now, which is
// equivalent to forgetting them, and rebuilds the map if it has shrunk to a
// small fraction of its peak size. Sweeping costs time proportional to the
// number of keys in the shard and happens at most once per that many calls
// or once per sweepInterval, so its amortized cost per call is constant.
// The caller must hold s.mu.
func (s *shard) sweep(now int64) {
	s.ops = 0
	s.lastSweep = now
	for k, tat := range s.tats {
		if tat <= now {
			delete(s.tats, k)
		}
	}
	if s.peak >= shrinkMinPeak && len(s.tats) < s.peak/4 {
		// Go maps do not release memory when keys are deleted.
		tats := make(map[string]int64, 2*len(s.tats))
		for k, tat := range s.tats {
			tats[k] = tat
		}
		s.tats = tats
		s.peak = len(tats)
	}
}

// Refund gives back one request of key that Allow allowed with the same
// limit and period (a pairing attempt that succeeded, say): the key's TAT
// moves back by one emission interval. A key whose bucket is full again
// since has nothing to give back.
func (m *Memory) Refund(_ context.Context, key string, limit int, period time.Duration) error {
	interval, _, err := params(limit, period)
	if err != nil {
		return err
	}
	now := int64(m.clock().Sub(m.base))
	s := &m.shards[maphash.String(m.seed, key)&(numShards-1)]
	s.mu.Lock()
	defer s.mu.Unlock()
	tat, known := s.tats[key]
	if !known {
		return nil
	}
	if tat -= int64(interval); tat <= now {
		delete(s.tats, key)
	} else {
		s.tats[key] = tat
	}
	return nil
}
