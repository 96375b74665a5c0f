package ratelimit

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard/switchboard/internal/tcpproxy"
)

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// testTimeout bounds the tests' waits for Redis instead of
// DefaultPrimaryTimeout: a healthy Redis on a loaded machine answers later
// than 75 ms now and then, and the fallback would then decide a call the
// test means Redis to decide. (server/TestRedisFallbackOptions checks that
// a configured timeout is the one applied, cmd/switchboard's config test
// that 75 ms is the default.)
const testTimeout = 400 * time.Millisecond

// newProxiedRedis returns a fail-fast Redis limiter reaching the test
// server through a proxy the test controls, and a key prefix of its own.
func newProxiedRedis(t *testing.T) (*Redis, *tcpproxy.Proxy, string) {
	_, prefix := newTestRedis(t)
	proxy := tcpproxy.New(t, os.Getenv(redisEnv))
	opt := &redis.Options{Addr: proxy.Addr()}
	FailFast(opt, testTimeout)
	client := redis.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	return NewRedis(client), proxy, prefix
}

func TestFallback(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode tcpproxy.Mode
	}{{"redis gone", tcpproxy.Drop}, {"redis not answering", tcpproxy.Blackhole}} {
		t.Run(mode.name, func(t *testing.T) {
			primary, proxy, prefix := newProxiedRedis(t)
			clock := newFakeClock()
			var logs syncBuffer
			f := NewFallback(primary, "redis", NewMemory(nil), "memory",
				FallbackOptions{Timeout: testTimeout, Cooldown: time.Minute, Now: clock.Now, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
			ctx := context.Background()
			key := prefix + "k"
			allow := func() Decision {
				t.Helper()
				d, err := f.Allow(ctx, key, 5, time.Hour)
				if err != nil {
					t.Fatalf("Allow: %v", err)
				}
				return d
			}

			// Redis decides: two of the key's five.
			for i := range 2 {
				if d := allow(); !d.Allowed || d.Remaining != 4-i || f.Backend() != "redis" {
					t.Fatalf("call %d with redis up: %+v on %s", i, d, f.Backend())
				}
			}

			// Redis goes away: the fallback decides each call, at once,
			// with its own (fresh) state, and the limit still holds there.
			// After DefaultFailures calls in a row, Redis is left alone.
			proxy.SetMode(mode.mode)
			for i := range DefaultFailures {
				start := time.Now()
				d := allow()
				if took := time.Since(start); took > testTimeout+time.Second { // 1 s leaves room for a loaded machine
					t.Errorf("decision %d after Redis went away took %v", i, took)
				}
				if !d.Allowed || d.Remaining != 4-i || f.Degraded() != (i == DefaultFailures-1) {
					t.Fatalf("call %d with redis down: %+v, degraded %v, backend %s", i, d, f.Degraded(), f.Backend())
				}
			}
			if f.Backend() != "memory" {
				t.Fatalf("backend %s after %d failures", f.Backend(), DefaultFailures)
			}
			dialed := proxy.Accepted()
			for range 5 - DefaultFailures {
				allow()
			}
			if d := allow(); d.Allowed || d.RetryAfterSeconds() < 1 {
				t.Fatalf("sixth call on the fallback: %+v, want denied with Retry-After >= 1", d)
			}
			// During the cooldown Redis is left alone: no new connection.
			if n := proxy.Accepted(); n != dialed {
				t.Errorf("Redis was dialed %d more times during the cooldown", n-dialed)
			}
			if got := f.Fallbacks(); got != 6 {
				t.Errorf("Fallbacks() = %d, want 6", got)
			}
			if n := logs.count(`"level":"WARN"`); n != 1 {
				t.Errorf("%d warnings after degrading, want 1:\n%s", n, logs.b.String())
			}

			// After the cooldown, still down: one call tries Redis again,
			// fails, and the fallback answers; no second warning.
			clock.Advance(time.Minute)
			allow()
			if proxy.Accepted() == dialed {
				t.Error("Redis was not tried again after the cooldown")
			}
			if n := logs.count(`"level":"WARN"`); n != 1 {
				t.Errorf("%d warnings after a failed retry, want 1", n)
			}

			// Redis comes back: after the next cooldown Redis decides
			// again, where the key still has 3 of 5.
			// (A try that took longer than testTimeout on a loaded machine
			// was the fallback's to decide, and a later try is made.)
			proxy.SetMode(tcpproxy.Forward)
			for try := 0; ; try++ {
				clock.Advance(time.Minute)
				before := f.Fallbacks()
				d := allow()
				if f.Fallbacks() != before && try < 3 {
					continue
				}
				if !d.Allowed || d.Remaining != 2 || f.Degraded() || f.Backend() != "redis" {
					t.Fatalf("after recovery: %+v, degraded %v, backend %s", d, f.Degraded(), f.Backend())
				}
				break
			}
			if n := logs.count(`"level":"INFO"`); n != 1 {
				t.Errorf("%d info lines after recovering, want 1:\n%s", n, logs.b.String())
			}
		})
	}
}

// TestFallbackInvalidLimit: an invalid limit is the caller's error, not a
// failure of Redis.
func TestFallbackInvalidLimit(t *testing.T) {
	primary, _, prefix := newProxiedRedis(t)
	f := NewFallback(primary, "redis", NewMemory(nil), "memory", FallbackOptions{Timeout: testTimeout})
	if _, err := f.Allow(context.Background(), prefix+"k", 0, time.Minute); err == nil || f.Degraded() {
		t.Fatalf("Allow(limit 0) = %v, degraded %v; want ErrInvalidLimit and not degraded", err, f.Degraded())
	}
}

// TestFallbackDefaults: options left zero take the defaults, and the
// default wait for Redis keeps a decision within the 100 ms promised when
// Redis is unreachable (docs/scale-out.md).
func TestFallbackDefaults(t *testing.T) {
	f := NewFallback(NewMemory(nil), "redis", NewMemory(nil), "memory", FallbackOptions{})
	if f.timeout != 75*time.Millisecond || f.cooldown != time.Second || f.threshold != 3 {
		t.Fatalf("defaults: timeout %v, cooldown %v, failures %d; want 75ms, 1s, 3", f.timeout, f.cooldown, f.threshold)
	}
}
