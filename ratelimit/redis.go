package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyPrefix is prepended to every key the [Redis] limiter stores.
const KeyPrefix = "switchboard:rl:"

// gcraScript is the Redis side of [gcra], evaluated atomically per key.
//
// KEYS[1] is the bucket key; ARGV[1] is the emission interval in
// microseconds and ARGV[2] the limit. The TAT is stored as microseconds since
// the Unix epoch according to the Redis server clock (such values stay exact
// in Lua's double-precision numbers), and the key expires when the bucket is
// full again, since an absent key means the same thing. The reply is
// {allowed (0 or 1), remaining, reset after µs, retry after µs}.
var gcraScript = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local interval = tonumber(ARGV[1])
local window = interval * tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
if tat > now + window then tat = now + window end
local newtat = tat + interval
local diff = newtat - now
if diff > window then
  return {0, 0, tat - now, diff - window}
end
redis.call('SET', KEYS[1], string.format('%d', newtat), 'PX', math.ceil(diff / 1000))
return {1, math.floor((window - diff) / interval), diff, 0}
`)

// FailFast sets opt so that no call waits longer than timeout for Redis:
// no retries, and dial, read, write and pool waits of at most timeout (a
// shorter one already set is kept), with the caller's context deadline
// honoured. [Fallback] relies on it to decide with its secondary in time.
func FailFast(opt *redis.Options, timeout time.Duration) {
	opt.MaxRetries = -1
	opt.ContextTimeoutEnabled = true
	for _, d := range []*time.Duration{&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, &opt.PoolTimeout} {
		if *d <= 0 || *d > timeout {
			*d = timeout
		}
	}
}

// Redis is a [Limiter] whose state is shared through Redis, for several nodes
// serving the same keys.
//
// Each call runs one Lua script (with EVALSHA, falling back to EVAL when the
// server does not have it cached) on a single key named [KeyPrefix] + key,
// so it works with Redis Cluster. Time is read from the Redis server, so
// nodes with skewed clocks agree, and the server clock's microsecond
// resolution is why emission intervals are truncated to whole microseconds.
// Keys expire when their bucket is full again.
type Redis struct {
	client redis.UniversalClient
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a Redis limiter that uses client, which may be a single
// node, failover or cluster client. The caller keeps ownership of client.
func NewRedis(client redis.UniversalClient) *Redis {
	return &Redis{client: client}
}

// Load loads the limiter's script into Redis, so that the first decisions
// need one round trip, not two (EVALSHA, then EVAL when the script is
// missing).
func (r *Redis) Load(ctx context.Context) error {
	return gcraScript.Load(ctx, r.client).Err()
}

// Allow implements [Limiter]. Besides invalid arguments it returns any error
// from Redis, including ctx's; the Decision is then the zero value and the
// caller decides whether to fail open or closed.
func (r *Redis) Allow(ctx context.Context, key string, limit int, period time.Duration) (Decision, error) {
	interval, _, err := params(limit, period)
	if err != nil {
		return Decision{}, err
	}
	res, err := gcraScript.Run(ctx, r.client, []string{KeyPrefix + key}, interval.Microseconds(), limit).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: redis: %w", err)
	}
	if len(res) != 4 {
		return Decision{}, fmt.Errorf("ratelimit: redis: unexpected script reply %v", res)
	}
	d := Decision{
		Allowed:    res[0] == 1,
		Limit:      limit,
		Remaining:  int(res[1]),
		ResetAfter: time.Duration(res[2]) * time.Microsecond,
		RetryAfter: time.Duration(res[3]) * time.Microsecond,
	}
	return d, nil
}
