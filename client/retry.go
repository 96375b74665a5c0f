package client

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy says which answers are tried again and how long to wait
// before each retry. DefaultRetryPolicy is the API's own guidance (the
// retries of docs/api.md); the zero RetryPolicy never retries.
//
// Whatever the policy, a request is tried again only when repeating it
// cannot do something twice: every answer but 429, 500 and 503 (so every
// other 4xx) is returned at once, and a send is retried only with its
// Idempotency-Key, which SendMessage always sets.
type RetryPolicy struct {
	// RateLimitRetries is how many times a 429 answer that carries a
	// Retry-After header is tried again, each time after waiting the
	// Retry-After it gave. A 429 without Retry-After is not retried.
	RateLimitRetries int
	// MaxRetryAfter is the longest Retry-After the client waits for; a 429
	// asking for longer (QUOTA_EXCEEDED waits for the next month,
	// NEW_CONTACT_LIMIT for the next UTC day) is returned at once, with
	// Error.RetryAfter set.
	MaxRetryAfter time.Duration
	// ServerErrorDelays are the waits before the retries of a 500 answer:
	// one retry per entry.
	ServerErrorDelays []time.Duration
	// UnavailableDelays are the waits before the retries of a 503 answer:
	// one retry per entry, each at least the answer's Retry-After when it
	// has one. NO_PHONE_AVAILABLE without Retry-After is not retried: the
	// server sends none when waiting cannot help (no phone of the tenant
	// can send the message, or each was switched off).
	UnavailableDelays []time.Duration
	// NetworkErrorDelays are the waits before the retries of a request that
	// got no answer at all (connection refused or reset, timeout), one retry
	// per entry. Only requests that are safe to repeat are retried: GET,
	// PATCH, DELETE and sends (which carry an Idempotency-Key).
	NetworkErrorDelays []time.Duration
	// WaitBudget bounds the time one call spends waiting between its
	// attempts: a retry whose wait would take the call's waits past it is
	// not made, and the call returns the last answer at once (its
	// Error.RetryAfter says how long the server asked to wait). Zero means
	// no bound.
	WaitBudget time.Duration
}

// DefaultRetryPolicy returns the retries the API asks of clients (docs/api.md):
//
//   - 429: wait Retry-After seconds, then retry; at most 3 retries, and only
//     when Retry-After is at most a minute;
//   - 500: exponential back-off 1 s, 2 s, 4 s: at most 3 retries;
//   - 503: exponential back-off 2 s, 4 s, 8 s, 16 s, 32 s, each at least
//     the answer's Retry-After: at most 5 retries; NO_PHONE_AVAILABLE
//     without Retry-After: no retry;
//   - no answer at all: 1 s, 2 s, 4 s, for requests safe to repeat;
//   - any other status: no retry;
//   - at most 30 s of waits in all (WaitBudget): a wait that would go past
//     it is not started, so a 503 is retried 4 times (2+4+8+16 s), and
//     NO_PHONE_AVAILABLE with a Retry-After of a minute (a phone offline)
//     or until midnight (daily limits) returns at once.
//
// "At most 3 attempts" and "at most 5 attempts" of the API's rules are read
// as retries, so that each back-off step the table lists (1, 2 and 4 s for
// a 500) is used; the 503 sequence goes on doubling to its fifth retry.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		RateLimitRetries:   3,
		MaxRetryAfter:      time.Minute,
		ServerErrorDelays:  []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second},
		UnavailableDelays:  []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second},
		NetworkErrorDelays: []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second},
		WaitBudget:         DefaultWaitBudget,
	}
}

// DefaultWaitBudget is DefaultRetryPolicy's WaitBudget.
const DefaultWaitBudget = 30 * time.Second

// Clock is the time source of retries: Now decides whether a wait would
// outlast the context's deadline, and Sleep waits. Tests inject one to run
// retries without waiting; the default is the real time.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends, and returns ctx.Err() in the latter
	// case.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryState counts the retries of one call, per kind of failure, and the
// time it has waited.
type retryState struct {
	rateLimited, serverError, unavailable, network int
	waited                                         time.Duration
}

// delay returns how long to wait before retrying after apiErr (an answer) or
// netErr (no answer), and false when the call must not be retried: the
// policy says no, or the wait would take the call past its WaitBudget.
func (p *RetryPolicy) delay(st *retryState, r *request, apiErr *Error, netErr error) (time.Duration, bool) {
	d, ok := p.nextDelay(st, r, apiErr, netErr)
	if !ok || (p.WaitBudget > 0 && st.waited+d > p.WaitBudget) {
		return 0, false
	}
	st.waited += d
	return d, true
}

// nextDelay is delay without the budget.
func (p *RetryPolicy) nextDelay(st *retryState, r *request, apiErr *Error, netErr error) (time.Duration, bool) {
	if r.isSend && r.idempotencyKey == "" {
		// Only the Idempotency-Key makes a repeated send safe.
		return 0, false
	}
	next := func(delays []time.Duration, n *int) (time.Duration, bool) {
		if *n >= len(delays) {
			return 0, false
		}
		d := delays[*n]
		*n++
		return d, true
	}
	if netErr != nil {
		if !r.safeToRepeat() {
			return 0, false
		}
		return next(p.NetworkErrorDelays, &st.network)
	}
	switch apiErr.StatusCode {
	case http.StatusTooManyRequests:
		if apiErr.RetryAfter <= 0 || apiErr.RetryAfter > p.MaxRetryAfter || st.rateLimited >= p.RateLimitRetries {
			return 0, false
		}
		st.rateLimited++
		return apiErr.RetryAfter, true
	case http.StatusInternalServerError:
		return next(p.ServerErrorDelays, &st.serverError)
	case http.StatusServiceUnavailable:
		if apiErr.Code == CodeNoPhoneAvailable && apiErr.RetryAfter <= 0 {
			return 0, false
		}
		d, ok := next(p.UnavailableDelays, &st.unavailable)
		return max(d, apiErr.RetryAfter), ok
	}
	return 0, false
}

// parseRetryAfter reads a Retry-After value: whole seconds, or an HTTP date
// (RFC 9110 section 10.2.3). It returns 0 when the value is absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 || n > 1<<31 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
