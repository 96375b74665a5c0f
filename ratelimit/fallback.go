package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPrimaryTimeout is how long [Fallback] waits for its primary by
// default before it decides with the secondary instead.
const DefaultPrimaryTimeout = 75 * time.Millisecond

// DefaultFailures is how many calls in a row must fail before [Fallback]
// leaves its primary alone for a while: one slow answer on a busy machine is
// no outage.
const DefaultFailures = 3

// DefaultCooldown is how long [Fallback] leaves its primary alone by
// default after a failure before it tries it again.
const DefaultCooldown = time.Second

// Fallback is a [Limiter] that decides with a primary limiter (Redis) and,
// when the primary fails or does not answer within Timeout, with a
// secondary one (PostgreSQL, or Memory on a single node) instead, so that a
// request never waits long for, nor fails because of, an unreachable Redis.
//
// After Failures calls in a row failed, the primary is degraded: for
// Cooldown every decision is the secondary's without trying the primary;
// then one request at a time tries it again (the others still go to the
// secondary) until one succeeds. Degrading is logged once at warn level and recovering once at
// info level. The two limiters keep separate state: a key that used its
// budget on one starts afresh on the other, once per switch.
type Fallback struct {
	primary, secondary         Limiter
	primaryName, secondaryName string
	timeout, cooldown          time.Duration
	threshold                  int64
	log                        *slog.Logger
	now                        func() time.Time

	degraded  atomic.Bool
	probing   atomic.Bool
	mu        sync.Mutex
	retryAt   time.Time // while degraded: when the primary may be tried again
	fallbacks atomic.Int64
	failures  atomic.Int64
	inARow    atomic.Int64 // calls to the primary that failed since its last success
}

// FallbackOptions tunes a Fallback. Zero values take the defaults.
type FallbackOptions struct {
	// Timeout bounds each call to the primary (DefaultPrimaryTimeout).
	Timeout time.Duration
	// Failures is how many calls in a row must fail before the primary
	// is left alone (DefaultFailures).
	Failures int
	// Cooldown is how long the primary is then left alone
	// (DefaultCooldown).
	Cooldown time.Duration
	// Log receives the changes of backend (default slog.Default()).
	Log *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// NewFallback returns a Fallback from primary to secondary; the names
// ("redis", "postgres", "memory") appear in the log and in Backend.
func NewFallback(primary Limiter, primaryName string, secondary Limiter, secondaryName string, opt FallbackOptions) *Fallback {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultPrimaryTimeout
	}
	if opt.Cooldown <= 0 {
		opt.Cooldown = DefaultCooldown
	}
	if opt.Failures <= 0 {
		opt.Failures = DefaultFailures
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Fallback{primary: primary, primaryName: primaryName, secondary: secondary, secondaryName: secondaryName,
		timeout: opt.Timeout, cooldown: opt.Cooldown, threshold: int64(opt.Failures), log: opt.Log, now: opt.Now}
}

var _ Limiter = (*Fallback)(nil)

// Allow implements [Limiter]. It returns the secondary's errors, never the
// primary's, except an invalid limit.
func (f *Fallback) Allow(ctx context.Context, key string, limit int, period time.Duration) (Decision, error) {
	if f.degraded.Load() {
		if !f.tryProbe() {
			return f.fallback(ctx, key, limit, period)
		}
		defer f.probing.Store(false)
	}
	pctx, cancel := context.WithTimeout(ctx, f.timeout)
	d, err := f.primary.Allow(pctx, key, limit, period)
	cancel()
	if err == nil {
		f.inARow.Store(0)
		if f.degraded.Load() {
			f.recover()
		}
		return d, nil
	}
	if errors.Is(err, ErrInvalidLimit) {
		return d, err
	}
	if ctx.Err() != nil { // the caller gave up: no fault of the primary
		return Decision{}, ctx.Err()
	}
	f.fail(err)
	return f.fallback(ctx, key, limit, period)
}

func (f *Fallback) fallback(ctx context.Context, key string, limit int, period time.Duration) (Decision, error) {
	f.fallbacks.Add(1)
	return f.secondary.Allow(ctx, key, limit, period)
}

// tryProbe reports whether this call, while degraded, is the one that tries
// the primary again: the cooldown has passed and no other call is trying.
func (f *Fallback) tryProbe() bool {
	f.mu.Lock()
	due := !f.now().Before(f.retryAt)
	f.mu.Unlock()
	return due && f.probing.CompareAndSwap(false, true)
}

// fail records a failure of the primary: after enough in a row, or one
// while degraded, it is left alone for the cooldown.
func (f *Fallback) fail(err error) {
	f.failures.Add(1)
	if f.inARow.Add(1) < f.threshold && !f.degraded.Load() {
		return
	}
	f.mu.Lock()
	f.retryAt = f.now().Add(f.cooldown)
	f.mu.Unlock()
	if f.degraded.CompareAndSwap(false, true) {
		f.log.Warn("rate limits: "+f.primaryName+" failed; deciding with "+f.secondaryName+" until it answers again",
			"backend", f.secondaryName, "err", err, "retry_every", f.cooldown.String())
	}
}

// recover records that the primary answered again.
func (f *Fallback) recover() {
	if f.degraded.CompareAndSwap(true, false) {
		f.log.Info("rate limits: "+f.primaryName+" answers again; deciding with it", "backend", f.primaryName)
	}
}

// Backend names the limiter deciding now: the primary's name, or the
// secondary's while degraded.
func (f *Fallback) Backend() string {
	if f.degraded.Load() {
		return f.secondaryName
	}
	return f.primaryName
}

// Backends names the primary and the secondary.
func (f *Fallback) Backends() (primary, secondary string) { return f.primaryName, f.secondaryName }

// Degraded reports whether the secondary is deciding.
func (f *Fallback) Degraded() bool { return f.degraded.Load() }

// Fallbacks counts the decisions the secondary made; Failures the calls to
// the primary that failed or timed out.
func (f *Fallback) Fallbacks() int64 { return f.fallbacks.Load() }

// Failures counts the calls to the primary that failed or timed out.
func (f *Fallback) Failures() int64 { return f.failures.Load() }
