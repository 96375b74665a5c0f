package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/httpapi"
	"github.com/switchboard/switchboard/ratelimit"
	"github.com/switchboard/switchboard/sqlstore"
)

// limits is the node's rate limiter and what /readyz and /metrics tell of
// it.
type limits struct {
	ratelimit.Limiter
	// backend names the limiter when there is no fallback.
	backend  string
	fallback *ratelimit.Fallback // with Redis
	pg       *ratelimit.Postgres // on PostgreSQL
	redis    *redis.Client
}

// newLimits chooses the rate limiter: on PostgreSQL the shared table, on
// SQLite (one node) memory; with Redis, Redis in front of either, which
// takes over within fo.Timeout (ratelimit.DefaultPrimaryTimeout) when Redis
// fails.
func newLimits(db *sqlstore.DB, redisOpt *redis.Options, fo ratelimit.FallbackOptions, log *slog.Logger) *limits {
	l := &limits{}
	var local ratelimit.Limiter
	if db.Dialect() == sqlstore.Postgres {
		l.pg = ratelimit.NewPostgres(db)
		local, l.backend = l.pg, "postgres"
	} else {
		local, l.backend = ratelimit.NewMemory(nil), "memory"
	}
	l.Limiter = local
	if redisOpt != nil {
		// A request never waits longer for Redis than the fallback's
		// timeout: no retries, and every wait of the client below it.
		fo.Timeout = cmp.Or(fo.Timeout, ratelimit.DefaultPrimaryTimeout)
		fo.Log = log
		ratelimit.FailFast(redisOpt, fo.Timeout)
		// The client's logger is the package's, for the whole process:
		// with several servers in one process (tests), the last one's
		// log gets the lines.
		redis.SetLogger(redisLog{log})
		l.redis = redis.NewClient(redisOpt)
		rl := ratelimit.NewRedis(l.redis)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := rl.Load(ctx); err != nil {
			log.Warn("rate limits: redis does not answer at start-up; requests will be limited by "+l.backend+" until it does", "err", err)
		}
		cancel()
		l.fallback = ratelimit.NewFallback(rl, "redis", local, l.backend, fo)
		l.Limiter = l.fallback
	}
	return l
}

// redisLog carries the Redis client's own log lines (a connection it could
// not close, a failed re-authentication, a handshake it fell back from),
// which it would otherwise print on stderr in a format of its own, into
// the node's JSON log, at WARN.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn("redis client", "detail", strings.TrimPrefix(strings.TrimSpace(fmt.Sprintf(format, v...)), "redis: "))
}

func (l *limits) close() {
	if l.redis != nil {
		l.redis.Close()
	}
}

// sweep forgets the full buckets of the PostgreSQL limiter every minute.
func (l *limits) sweep(ctx context.Context, log *slog.Logger) {
	if l.pg == nil {
		return
	}
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := l.pg.Sweep(ctx); err != nil && ctx.Err() == nil {
			log.Warn("rate limits: sweeping full buckets failed", "err", err)
		}
	}
}

// check is the rate limits' line of /readyz.
func (l *limits) check() httpapi.Check {
	if l.fallback == nil {
		return httpapi.Check{Status: httpapi.CheckOK, Detail: l.backend}
	}
	if l.fallback.Degraded() {
		p, s := l.fallback.Backends()
		return httpapi.Check{Status: httpapi.CheckDegraded, Detail: p + " unreachable; deciding with " + s}
	}
	return httpapi.Check{Status: httpapi.CheckOK, Detail: l.fallback.Backend()}
}

// databaseCheck is the database's line of /readyz: down when it cannot be
// reached, degraded while every connection of the pool is busy.
func databaseCheck(ctx context.Context, db *sqlstore.DB) httpapi.Check {
	err := db.Ping(ctx)
	if err == nil {
		return httpapi.Check{Status: httpapi.CheckOK}
	}
	var ue *sqlstore.UnavailableError
	if errors.As(err, &ue) && ue.Reason == "unreachable" {
		return httpapi.Check{Status: httpapi.CheckDown, Detail: "unreachable", Code: sb.CodeDatabaseUnavailable}
	}
	if ps, ok := db.PoolStats(); ok && ps.InUse >= ps.MaxConns {
		return httpapi.Check{Status: httpapi.CheckDegraded, Detail: fmt.Sprintf("saturated: all %d connections busy", ps.MaxConns)}
	}
	if ctx.Err() != nil {
		return httpapi.Check{Status: httpapi.CheckDegraded, Detail: "slow: no answer to SELECT 1 in time"}
	}
	return httpapi.Check{Status: httpapi.CheckDown, Detail: "failing", Code: sb.CodeDatabaseUnavailable}
}

// nodeCollector exposes, at each scrape, the node's rate-limit backend, its
// PostgreSQL pool and its HTTP connections.
type nodeCollector struct {
	db    *sqlstore.DB
	lim   *limits
	conns *connLimiter
	max   int

	backend, fallbacks, redisErrors                             *prometheus.Desc
	poolConns, poolMax, poolWaits, poolWaitSeconds, unavailable *prometheus.Desc
	writers, commits, commitWrites, keptReads, staleReads       *prometheus.Desc
	httpOpen, httpMax, httpWaits                                *prometheus.Desc
	httpReclaimed, httpRefused, httpStreamsRefused              *prometheus.Desc
}

func newNodeCollector(db *sqlstore.DB, lim *limits, conns *connLimiter, max int) *nodeCollector {
	return &nodeCollector{db: db, lim: lim, conns: conns, max: max,
		backend: prometheus.NewDesc("switchboard_ratelimit_backend",
			"1 for the rate-limit backend deciding now (redis, postgres or memory), 0 for the configured one that is not.",
			[]string{"backend"}, nil),
		fallbacks: prometheus.NewDesc("switchboard_ratelimit_fallbacks_total",
			"Rate-limit decisions made by the fallback (postgres or memory) because Redis failed or was being left alone after a failure.", nil, nil),
		redisErrors: prometheus.NewDesc("switchboard_ratelimit_redis_errors_total",
			"Calls to Redis for a rate-limit decision that failed or timed out.", nil, nil),
		poolConns: prometheus.NewDesc("switchboard_db_connections",
			"Open connections of the node's PostgreSQL pool, by state (in_use, idle).", []string{"state"}, nil),
		poolMax: prometheus.NewDesc("switchboard_db_connections_max",
			"The cap of the node's PostgreSQL pool (--db-max-conns).", nil, nil),
		poolWaits: prometheus.NewDesc("switchboard_db_waits_total",
			"Times a caller had to wait for a connection of the PostgreSQL pool.", nil, nil),
		poolWaitSeconds: prometheus.NewDesc("switchboard_db_wait_seconds_total",
			"Time callers spent waiting for a connection of the PostgreSQL pool.", nil, nil),
		unavailable: prometheus.NewDesc("switchboard_db_unavailable_total",
			"Callers turned away (503 DATABASE_UNAVAILABLE for requests), by reason: pool_exhausted (no connection within --db-wait), "+
				"unreachable (none could be opened, or the server refused or dropped it).", []string{"reason"}, nil),
		writers: prometheus.NewDesc("switchboard_db_writers",
			"Group-commit writers of the node taking work now: each batches concurrent writes into one transaction "+
				"(--db-writers; by default 2 while the node is the only live one, 1 while other nodes share the database).", nil, nil),
		commits: prometheus.NewDesc("switchboard_db_commits_total",
			"Transactions the node's group-commit writers committed (or tried to): one commit, one fsync, for a batch of writes.", nil, nil),
		commitWrites: prometheus.NewDesc("switchboard_db_commit_writes_total",
			"Writes (an accepted send, a batch of hand-offs or outcomes, a claim) run in those transactions; "+
				"over switchboard_db_commits_total, the writes one commit serves.", nil, nil),
		keptReads: prometheus.NewDesc("switchboard_db_kept_reads_total",
			"Reads of the send path (a recipient, a tenant's phones' version) that batches took from what the node kept instead of "+
				"reading them, each checked in the transaction's next round trip (PostgreSQL).", nil, nil),
		staleReads: prometheus.NewDesc("switchboard_db_stale_reads_total",
			"Transactions whose check found a kept read changed by another node: the batch ran again, reading afresh (PostgreSQL).", nil, nil),
		httpOpen: prometheus.NewDesc("switchboard_http_connections_open",
			"HTTP connections open now (keep-alives and event streams included).", nil, nil),
		httpMax: prometheus.NewDesc("switchboard_http_connections_max",
			"The cap of open HTTP connections (--max-conns).", nil, nil),
		httpWaits: prometheus.NewDesc("switchboard_http_connections_cap_waits_total",
			"Times a new connection had to wait to be accepted because --max-conns were open and none was idle.", nil, nil),
		httpReclaimed: prometheus.NewDesc("switchboard_http_connections_reclaimed_total",
			"Idle keep-alive connections closed to make room for a new one, at --max-conns or at its address's --max-conns-per-addr.", nil, nil),
		httpRefused: prometheus.NewDesc("switchboard_http_connections_refused_total",
			"Connections closed as soon as accepted: their client address (an IPv6 client by its /64) held --max-conns-per-addr, none idle.", nil, nil),
		httpStreamsRefused: prometheus.NewDesc("switchboard_http_streams_refused_total",
			"HTTP/2 requests answered 429 because --max-conns or their address's --max-conns-per-addr was reached (each counts as a connection).", nil, nil),
	}
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.backend, c.fallbacks, c.redisErrors, c.poolConns, c.poolMax, c.poolWaits,
		c.poolWaitSeconds, c.unavailable, c.writers, c.commits, c.commitWrites, c.keptReads, c.staleReads, c.httpOpen, c.httpMax, c.httpWaits,
		c.httpReclaimed, c.httpRefused, c.httpStreamsRefused} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	if f := c.lim.fallback; f != nil {
		p, s := f.Backends()
		active := f.Backend()
		gauge(c.backend, b2f(active == p), p)
		gauge(c.backend, b2f(active == s), s)
		counter(c.fallbacks, float64(f.Fallbacks()))
		counter(c.redisErrors, float64(f.Failures()))
	} else {
		gauge(c.backend, 1, c.lim.backend)
		counter(c.fallbacks, 0)
	}
	if ps, ok := c.db.PoolStats(); ok {
		gauge(c.poolConns, float64(ps.InUse), "in_use")
		gauge(c.poolConns, float64(ps.Idle), "idle")
		gauge(c.poolMax, float64(ps.MaxConns))
		counter(c.poolWaits, float64(ps.WaitCount))
		counter(c.poolWaitSeconds, ps.WaitDuration.Seconds())
		counter(c.unavailable, float64(ps.Exhausted), "pool_exhausted")
		counter(c.unavailable, float64(ps.Unreachable), "unreachable")
	}
	gauge(c.writers, float64(c.db.Writers()))
	commits, writes := c.db.BatchStats()
	counter(c.commits, float64(commits))
	counter(c.commitWrites, float64(writes))
	kept, stale := c.db.KeptReadStats()
	counter(c.keptReads, float64(kept))
	counter(c.staleReads, float64(stale))
	if c.conns != nil {
		gauge(c.httpOpen, float64(c.conns.open.Load()))
		gauge(c.httpMax, float64(c.max))
		counter(c.httpWaits, float64(c.conns.waits.Load()))
		counter(c.httpReclaimed, float64(c.conns.reclaimed.Load()))
		counter(c.httpRefused, float64(c.conns.refused.Load()))
		counter(c.httpStreamsRefused, float64(c.conns.streamsRefused.Load()))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
