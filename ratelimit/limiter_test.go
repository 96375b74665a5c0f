package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// harness adapts one Limiter implementation to the shared tests.
type harness struct {
	// newLimiter returns a limiter for one subtest, a function that makes a
	// key unique to that subtest, and a function that advances the
	// limiter's clock, which is nil if the clock cannot be controlled.
	newLimiter func(t *testing.T) (lim Limiter, key func(string) string, advance func(time.Duration))
	// slack is how much shorter than expected a duration may be because
	// real time passed between the calls.
	slack time.Duration
}

// call is one step of a table test: optionally advance the clock, then call
// Allow and compare the decision.
type call struct {
	advance time.Duration
	key     string
	limit   int
	period  time.Duration
	want    Decision
}

// allowed returns the expected decision for an allowed request.
func allowed(limit, remaining int, reset time.Duration) Decision {
	return Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

// denied returns the expected decision for a denied request.
func denied(limit int, reset, retry time.Duration) Decision {
	return Decision{Limit: limit, ResetAfter: reset, RetryAfter: retry}
}

// burst returns the calls that drain a full bucket for key: exactly limit
// requests are allowed with Remaining counting down to 0, and ResetAfter
// growing by one emission interval each time.
func burst(key string, limit int, period time.Duration) []call {
	interval, _, err := params(limit, period)
	if err != nil {
		panic(err)
	}
	calls := make([]call, limit)
	for i := range calls {
		calls[i] = call{key: key, limit: limit, period: period,
			want: allowed(limit, limit-1-i, time.Duration(i+1)*interval)}
	}
	return calls
}

// seq concatenates groups of calls.
func seq(groups ...[]call) []call {
	var out []call
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// one wraps calls in a group.
func one(calls ...call) []call { return calls }

var limiterCases = []struct {
	name       string
	needsClock bool
	calls      []call
}{
	{
		name: "full bucket allows exactly limit then denies",
		calls: seq(
			burst("a", 5, time.Minute),
			one(
				call{key: "a", limit: 5, period: time.Minute, want: denied(5, time.Minute, 12*time.Second)},
				call{key: "a", limit: 5, period: time.Minute, want: denied(5, time.Minute, 12*time.Second)},
			),
		),
	},
	{
		name:       "one more request per emission interval",
		needsClock: true,
		calls: seq(
			burst("a", 5, time.Minute),
			one(
				call{key: "a", limit: 5, period: time.Minute, want: denied(5, time.Minute, 12*time.Second)},
				call{advance: 5 * time.Second, key: "a", limit: 5, period: time.Minute, want: denied(5, 55*time.Second, 7*time.Second)},
				call{advance: 7*time.Second - time.Nanosecond, key: "a", limit: 5, period: time.Minute, want: denied(5, 48*time.Second+time.Nanosecond, time.Nanosecond)},
				call{advance: time.Nanosecond, key: "a", limit: 5, period: time.Minute, want: allowed(5, 0, time.Minute)},
				call{key: "a", limit: 5, period: time.Minute, want: denied(5, time.Minute, 12*time.Second)},
				call{advance: 24 * time.Second, key: "a", limit: 5, period: time.Minute, want: allowed(5, 1, 48*time.Second)},
				call{key: "a", limit: 5, period: time.Minute, want: allowed(5, 0, time.Minute)},
			),
		),
	},
	{
		name:       "bucket refills after the period",
		needsClock: true,
		calls: seq(
			burst("a", 3, time.Minute),
			one(call{advance: 30 * time.Second, key: "a", limit: 3, period: time.Minute, want: allowed(3, 0, 50*time.Second)}),
			one(call{advance: 50 * time.Second, key: "a", limit: 3, period: time.Minute, want: allowed(3, 2, 20*time.Second)}),
			one(call{advance: time.Hour}),
			burst("a", 3, time.Minute),
		),
	},
	{
		name: "keys are independent",
		calls: seq(
			burst("a", 2, time.Minute),
			one(call{key: "a", limit: 2, period: time.Minute, want: denied(2, time.Minute, 30*time.Second)}),
			burst("b", 2, time.Minute),
			one(call{key: "b", limit: 2, period: time.Minute, want: denied(2, time.Minute, 30*time.Second)}),
			burst("c", 4, time.Minute),
		),
	},
	{
		name: "lowered limit keeps the backlog",
		calls: seq(
			burst("a", 10, time.Minute)[:5], // TAT is now+30s
			one(
				// At 2/min (T=30s) the backlog leaves room for one more.
				call{key: "a", limit: 2, period: time.Minute, want: allowed(2, 0, time.Minute)},
				call{key: "a", limit: 2, period: time.Minute, want: denied(2, time.Minute, 30*time.Second)},
			),
		),
	},
	{
		name: "lowered limit after exhaustion denies",
		calls: seq(
			burst("a", 10, time.Minute),
			one(
				call{key: "a", limit: 1, period: time.Minute, want: denied(1, time.Minute, time.Minute)},
				call{key: "a", limit: 10, period: time.Minute, want: denied(10, time.Minute, 6*time.Second)},
			),
		),
	},
	{
		name:       "lowered limit then time passes",
		needsClock: true,
		calls: seq(
			burst("a", 10, time.Minute),
			one(
				call{key: "a", limit: 1, period: time.Minute, want: denied(1, time.Minute, time.Minute)},
				call{advance: time.Minute, key: "a", limit: 1, period: time.Minute, want: allowed(1, 0, time.Minute)},
			),
		),
	},
	{
		name: "raised limit regains capacity at the new rate",
		calls: seq(
			burst("a", 2, time.Minute),
			one(
				call{key: "a", limit: 4, period: time.Minute, want: denied(4, time.Minute, 15*time.Second)},
			),
		),
	},
	{
		name: "shorter period caps the backlog at one period",
		calls: seq(
			burst("a", 60, time.Hour), // TAT is now+1h
			one(
				call{key: "a", limit: 10, period: time.Minute, want: denied(10, time.Minute, 6*time.Second)},
			),
		),
	},
	{
		name: "limit of one",
		calls: one(
			call{key: "a", limit: 1, period: time.Minute, want: allowed(1, 0, time.Minute)},
			call{key: "a", limit: 1, period: time.Minute, want: denied(1, time.Minute, time.Minute)},
		),
	},
	{
		name: "interval truncated to whole microseconds",
		calls: seq(
			// 7/min: T = 8.571428s, the burst window is 7T < 1 min.
			burst("a", 7, time.Minute),
			one(call{key: "a", limit: 7, period: time.Minute,
				want: denied(7, 7*8571428*time.Microsecond, 8571428*time.Microsecond)}),
		),
	},
}

// testLimiter runs the shared table and the other shared tests against h.
func testLimiter(t *testing.T, h harness) {
	for _, tc := range limiterCases {
		t.Run(tc.name, func(t *testing.T) {
			lim, key, advance := h.newLimiter(t)
			if tc.needsClock && advance == nil {
				t.Skip("needs a controllable clock")
			}
			ctx := context.Background()
			for i, c := range tc.calls {
				if c.advance > 0 {
					advance(c.advance)
				}
				if c.key == "" {
					continue
				}
				got, err := lim.Allow(ctx, key(c.key), c.limit, c.period)
				if err != nil {
					t.Fatalf("call %d: Allow(%q, %d, %v): %v", i, c.key, c.limit, c.period, err)
				}
				if !decisionMatches(got, c.want, h.slack) {
					t.Fatalf("call %d: Allow(%q, %d, %v) = %+v, want %+v (durations up to %v shorter)",
						i, c.key, c.limit, c.period, got, c.want, h.slack)
				}
			}
		})
	}

	t.Run("invalid limits", func(t *testing.T) {
		lim, key, _ := h.newLimiter(t)
		for _, c := range []struct {
			limit  int
			period time.Duration
		}{
			{0, time.Minute},
			{-1, time.Minute},
			{5, 0},
			{5, -time.Minute},
			{2_000_000, time.Second}, // below 1µs per request
		} {
			d, err := lim.Allow(context.Background(), key("a"), c.limit, c.period)
			if !errors.Is(err, ErrInvalidLimit) {
				t.Errorf("Allow(limit=%d, period=%v) = %+v, %v; want ErrInvalidLimit", c.limit, c.period, d, err)
			}
		}
	})

	t.Run("concurrent calls on one key", func(t *testing.T) {
		lim, key, _ := h.newLimiter(t)
		// With the Redis clock running, T = 18s keeps the bucket from
		// refilling during the test.
		const limit, goroutines, perGoroutine = 200, 16, 40
		var (
			nAllowed, nDenied atomic.Int64
			wg                sync.WaitGroup
			errOnce           sync.Once
			firstErr          error
		)
		k := key("hot")
		for range goroutines {
			wg.Go(func() {
				for range perGoroutine {
					d, err := lim.Allow(context.Background(), k, limit, time.Hour)
					if err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
					if d.Allowed {
						nAllowed.Add(1)
					} else {
						nDenied.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			t.Fatal(firstErr)
		}
		if got := nAllowed.Load(); got != limit {
			t.Errorf("allowed %d requests, want exactly %d", got, limit)
		}
		if got, want := nDenied.Load(), int64(goroutines*perGoroutine-limit); got != want {
			t.Errorf("denied %d requests, want %d", got, want)
		}
	})
}

// decisionMatches reports whether got equals want, except that got's
// durations may be up to slack shorter than want's.
func decisionMatches(got, want Decision, slack time.Duration) bool {
	within := func(g, w time.Duration) bool { return g <= w && g >= w-slack }
	return got.Allowed == want.Allowed &&
		got.Limit == want.Limit &&
		got.Remaining == want.Remaining &&
		within(got.ResetAfter, want.ResetAfter) &&
		within(got.RetryAfter, want.RetryAfter)
}

func TestDecisionSeconds(t *testing.T) {
	for _, c := range []struct {
		d                 Decision
		reset, retryAfter int
	}{
		{Decision{Allowed: true, ResetAfter: 12 * time.Second}, 12, 0},
		{Decision{Allowed: true, ResetAfter: 12*time.Second + time.Nanosecond}, 13, 0},
		{Decision{Allowed: true, ResetAfter: time.Nanosecond}, 1, 0},
		{Decision{Allowed: true}, 0, 0},
		{Decision{Allowed: true, ResetAfter: -time.Second}, 0, 0},
		{Decision{ResetAfter: time.Minute, RetryAfter: 12 * time.Second}, 60, 12},
		{Decision{ResetAfter: time.Minute, RetryAfter: 11*time.Second + 500*time.Millisecond}, 60, 12},
		{Decision{ResetAfter: time.Minute, RetryAfter: time.Millisecond}, 60, 1},
		{Decision{ResetAfter: time.Minute}, 60, 1},
	} {
		if got := c.d.ResetSeconds(); got != c.reset {
			t.Errorf("%+v.ResetSeconds() = %d, want %d", c.d, got, c.reset)
		}
		if got := c.d.RetryAfterSeconds(); got != c.retryAfter {
			t.Errorf("%+v.RetryAfterSeconds() = %d, want %d", c.d, got, c.retryAfter)
		}
	}
}

// ExampleDecision shows how a caller turns a Decision into headers.
func ExampleDecision() {
	lim := NewMemory(nil)
	for range 3 {
		d, err := lim.Allow(context.Background(), "key_123", 2, time.Minute)
		if err != nil {
			panic(err)
		}
		fmt.Println("X-RateLimit-Limit:", d.Limit)
		fmt.Println("X-RateLimit-Remaining:", d.Remaining)
		fmt.Println("X-RateLimit-Reset:", d.ResetSeconds())
		if !d.Allowed {
			fmt.Println("429 Retry-After:", d.RetryAfterSeconds())
		}
	}
	// Output:
	// X-RateLimit-Limit: 2
	// X-RateLimit-Remaining: 1
	// X-RateLimit-Reset: 30
	// X-RateLimit-Limit: 2
	// X-RateLimit-Remaining: 0
	// X-RateLimit-Reset: 60
	// X-RateLimit-Limit: 2
	// X-RateLimit-Remaining: 0
	// X-RateLimit-Reset: 60
	// 429 Retry-After: 30
}
