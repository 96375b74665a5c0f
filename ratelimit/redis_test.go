package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisEnv names the environment variable holding the address of the Redis
// server the tests use, such as "127.0.0.1:6379".
const redisEnv = "SWITCHBOARD_TEST_REDIS"

// newTestRedis connects to the server named by redisEnv, skipping the test
// when it is unset, and returns the client and a key prefix unique to this
// test. Keys under that prefix are deleted when the test ends.
func newTestRedis(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	addr := os.Getenv(redisEnv)
	if addr == "" {
		tb.Skip(redisEnv + " not set: skipping Redis limiter tests")
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	ctx := context.Background()
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		tb.Fatalf("%s=%s: %v", redisEnv, addr, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "test-" + hex.EncodeToString(b[:]) + ":"
	tb.Cleanup(func() {
		defer client.Close()
		var keys []string
		iter := client.Scan(ctx, 0, KeyPrefix+prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			tb.Errorf("listing test keys: %v", err)
			return
		}
		if len(keys) > 0 {
			if err := client.Del(ctx, keys...).Err(); err != nil {
				tb.Errorf("deleting test keys: %v", err)
			}
		}
	})
	return client, prefix
}

func TestRedis(t *testing.T) {
	newTestRedis(t) // skip early when Redis is not configured
	testLimiter(t, harness{
		newLimiter: func(t *testing.T) (Limiter, func(string) string, func(time.Duration)) {
			client, prefix := newTestRedis(t)
			return NewRedis(client), func(k string) string { return prefix + k }, nil
		},
		// Redis time cannot be faked; durations shrink by the time the
		// test takes between calls.
		slack: time.Second,
	})
}

func TestRedisKeyAndExpiry(t *testing.T) {
	client, prefix := newTestRedis(t)
	lim := NewRedis(client)
	ctx := context.Background()
	for i := range 5 {
		d, err := lim.Allow(ctx, prefix+"a", 5, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Remaining != 4-i {
			t.Fatalf("call %d: %+v, want allowed with %d remaining", i, d, 4-i)
		}
	}
	d, err := lim.Allow(ctx, prefix+"a", 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Remaining != 0 || d.RetryAfter <= 11*time.Second || d.RetryAfter > 12*time.Second {
		t.Fatalf("sixth call: %+v, want denied with RetryAfter in (11s, 12s]", d)
	}
	if got := d.RetryAfterSeconds(); got != 12 {
		t.Errorf("RetryAfterSeconds() = %d, want 12", got)
	}

	// The key is stored under KeyPrefix and expires when the bucket is full
	// again, that is about one period after the burst.
	key := KeyPrefix + prefix + "a"
	pttl, err := client.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= 59*time.Second || pttl > time.Minute {
		t.Errorf("PTTL(%s) = %v, want in (59s, 60s]", key, pttl)
	}
	tat, err := client.Get(ctx, key).Int64()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	if srv := client.Time(ctx).Val(); time.Duration(tat-srv.UnixMicro())*time.Microsecond > time.Minute {
		t.Errorf("stored TAT %d is more than a minute after server time %v", tat, srv)
	}
}

func TestRedisErrors(t *testing.T) {
	client, prefix := newTestRedis(t)
	lim := NewRedis(client)

	// A key of the wrong type is reported, not misread.
	if err := client.HSet(context.Background(), KeyPrefix+prefix+"hash", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(context.Background(), prefix+"hash", 5, time.Minute); err == nil {
		t.Errorf("Allow on a hash key = %+v, nil; want an error", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := lim.Allow(ctx, prefix+"a", 5, time.Minute); err == nil {
		t.Errorf("Allow with a canceled context = %+v, nil; want an error", d)
	}
}

// BenchmarkRedisAllow measures round trips to the Redis limiter.
func BenchmarkRedisAllow(b *testing.B) {
	client, prefix := newTestRedis(b)
	lim := NewRedis(client)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := lim.Allow(ctx, prefix+"bench", 1_000_000, time.Minute); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
