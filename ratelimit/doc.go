// Package ratelimit enforces Switchboard's per-key request limits.
//
// Each key is limited to a number of requests per rolling period (one minute
// in the public contract) using the generic cell rate algorithm (GCRA): the
// emission interval is T = period/limit, a full bucket admits exactly limit
// requests at once, and after that one request becomes available every T.
// The only state kept per key is its theoretical arrival time (TAT), the
// instant at which the key's bucket will be full again.
//
// Two implementations of [Limiter] are provided. [Memory] keeps the state in
// process and is meant for a single node. [Redis] keeps the state in Redis,
// evaluates the algorithm in a Lua script and reads the clock from the Redis
// server, so that several nodes serving one tenant share one budget even if
// their clocks disagree.
//
// A [Decision] carries everything needed to build the X-RateLimit-Limit,
// X-RateLimit-Remaining, X-RateLimit-Reset and Retry-After response headers;
// see [Decision.ResetSeconds] and [Decision.RetryAfterSeconds].
//
// This package is not HTTP middleware: it does not write headers, choose the
// key or the limit for a request, or know about plans. Keys without a limit
// (such as some Scale plan keys) are handled by the caller simply not calling
// the limiter. It also does not decide what happens when a backend fails; a
// [Redis] error is returned to the caller, who chooses whether to fail open
// or closed. It is not a quota or billing counter either: it only smooths
// traffic over a rolling period.
package ratelimit
