// Package ratelimit enforces Switchboard's per-key request limits.
//
// Each key is limited to a number of requests per rolling period (one minute
// in the API) using the generic cell rate algorithm (GCRA): the
// emission interval is T = period/limit, a full bucket admits exactly limit
// requests at once, and after that one request becomes available every T.
// The only state kept per key is its theoretical arrival time (TAT), the
// instant at which the key's bucket will be full again.
//
// Three implementations of [Limiter] are provided. [Memory] keeps the state
// in process and is meant for a single node. [Postgres] keeps it in a table
// of the service's PostgreSQL database, one UPSERT per decision, and [Redis]
// in Redis, evaluating the algorithm in a Lua script; both read the clock
// from their server, so that several nodes serving one tenant share one
// budget even if their clocks disagree. [Fallback] puts Redis in front of
// one of the others and decides with that one, within a bounded time, while
// Redis fails.
//
// A [Decision] carries everything needed to build the X-RateLimit-Limit,
// X-RateLimit-Remaining, X-RateLimit-Reset and Retry-After response headers;
// see [Decision.ResetSeconds] and [Decision.RetryAfterSeconds].
//
// This package is not HTTP middleware: it does not write headers, choose the
// key or the limit for a request, or know about plans. Keys without a limit
// (such as some Scale plan keys) are handled by the caller simply not calling
// the limiter. Apart from [Fallback], it does not decide what happens when
// a backend fails; the error is returned to the caller, who chooses whether
// to fail open or closed. It is not a quota or billing counter either: it only smooths
// traffic over a rolling period.
package ratelimit
