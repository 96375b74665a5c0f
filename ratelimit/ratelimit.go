package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Decision is the outcome of one call to [Limiter.Allow].
type Decision struct {
	// Allowed reports whether the request may proceed. A denied request
	// consumes nothing.
	Allowed bool
	// Limit is the number of requests allowed per period, as passed to Allow.
	Limit int
	// Remaining is how many more requests would be allowed right now, after
	// this one. It is 0 when the request was denied.
	Remaining int
	// ResetAfter is the time until the key's bucket is full again, that is
	// until Limit requests could be made at once.
	ResetAfter time.Duration
	// RetryAfter is 0 when the request was allowed; otherwise it is the time
	// after which this request would be allowed.
	RetryAfter time.Duration
}

// ResetSeconds returns ResetAfter in whole seconds, rounded up, for the
// X-RateLimit-Reset header. It is never negative.
func (d Decision) ResetSeconds() int {
	return ceilSeconds(d.ResetAfter)
}

// RetryAfterSeconds returns RetryAfter in whole seconds, rounded up, for the
// Retry-After header. It is 0 when the request was allowed and at least 1
// when it was denied, so that a client waiting that long will succeed.
func (d Decision) RetryAfterSeconds() int {
	if d.Allowed {
		return 0
	}
	return max(ceilSeconds(d.RetryAfter), 1)
}

// ceilSeconds rounds d up to whole seconds, treating negative values as 0.
func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

// Limiter decides whether a request for a key may proceed.
//
// Allow applies GCRA with an emission interval of period/limit (truncated to
// whole microseconds) and a burst of limit: from a full bucket exactly limit
// requests are allowed at once, then one more every period/limit. Only
// allowed requests consume capacity.
//
// The limit and period may change between calls for the same key. The state
// is stored as time rather than as a count, so a key that has used some
// fraction of its budget has used the same fraction of the new budget (all of
// it at most, if the period shrinks), and regains capacity at the new rate.
// In particular a key that exhausted its old limit is still exhausted under a
// lower one, and ResetAfter never exceeds the current period.
//
// Allow returns an error wrapping [ErrInvalidLimit] if limit is less than 1,
// if period is not positive, or if period/limit is less than one microsecond.
// Implementations backed by a remote store also return its errors; the
// Decision is then meaningless and the caller chooses whether to fail open
// or closed.
type Limiter interface {
	Allow(ctx context.Context, key string, limit int, period time.Duration) (Decision, error)
}

// ErrInvalidLimit is wrapped by the error Allow returns for a limit or period
// that cannot be enforced.
var ErrInvalidLimit = errors.New("ratelimit: invalid limit")

// resolution is the granularity of the emission interval. Intervals are
// truncated to it so that [Memory] and [Redis], whose server clock counts
// microseconds, make the same decisions.
const resolution = time.Microsecond

// params validates limit and period and returns the emission interval T and
// the burst window limit*T, which is at most period.
func params(limit int, period time.Duration) (interval, window time.Duration, err error) {
	if limit < 1 {
		return 0, 0, fmt.Errorf("%w: limit %d is less than 1", ErrInvalidLimit, limit)
	}
	if period <= 0 {
		return 0, 0, fmt.Errorf("%w: period %v is not positive", ErrInvalidLimit, period)
	}
	interval = (period / time.Duration(limit)).Truncate(resolution)
	if interval <= 0 {
		return 0, 0, fmt.Errorf("%w: %d requests per %v is more than one per %v", ErrInvalidLimit, limit, period, resolution)
	}
	return interval, interval * time.Duration(limit), nil
}

// gcra applies one GCRA step at time now to a key whose theoretical arrival
// time is tat (a value at or before now means a full bucket). All times are
// nanoseconds on the same scale. It returns the decision and, when the
// request is allowed, the new TAT to store. The Lua script in redis.go
// mirrors this function and must be kept in step with it.
func gcra(now, tat int64, interval, window time.Duration, limit int) (d Decision, newTAT int64) {
	iv, w := int64(interval), int64(window)
	tat = min(max(tat, now), now+w) // cap the backlog at one full window
	newTAT = tat + iv
	diff := newTAT - now
	if diff > w {
		return Decision{
			Limit:      limit,
			ResetAfter: time.Duration(tat - now),
			RetryAfter: time.Duration(diff - w),
		}, tat
	}
	return Decision{
		Allowed:    true,
		Limit:      limit,
		Remaining:  int((w - diff) / iv),
		ResetAfter: time.Duration(diff),
	}, newTAT
}
