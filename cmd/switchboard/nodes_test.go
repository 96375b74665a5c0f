package main

// Several nodes on one PostgreSQL database (docs/scale-out.md): rate
// limits shared with and without Redis, Redis going away and coming back,
// the pool's cap answering 503 DATABASE_UNAVAILABLE, and what /readyz
// reports meanwhile.

import (
	"context"
	"database/sql"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/tcpproxy"
)

// redisAddr returns the test Redis server's address, skipping the test when
// SWITCHBOARD_TEST_REDIS is unset.
func redisAddr(t testing.TB) string {
	addr := os.Getenv("SWITCHBOARD_TEST_REDIS")
	if addr == "" {
		t.Skip("SWITCHBOARD_TEST_REDIS is not set: skipping the Redis run (set it to e.g. 127.0.0.1:6379)")
	}
	return addr
}

// burst sends n requests with key, alternating between the nodes, and
// returns how many were allowed; every other answer must be 429.
func burst(t *testing.T, nodes []*server, key string, n int) (allowed int) {
	t.Helper()
	for i := range n {
		r := nodes[i%len(nodes)].do(t, "GET", "/v1/api-keys", key, nil)
		switch r.Status {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
			wantError(t, "a request over the limit", r, http.StatusTooManyRequests, "RATE_LIMIT_EXCEEDED")
			if headerInt(t, r, "Retry-After") < 1 {
				t.Errorf("429 with Retry-After %q", r.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("request %d: %d %s", i, r.Status, r.Raw)
		}
	}
	return allowed
}

// limitsPlans: 5 requests a minute per key, 8 per tenant. The bursts of a
// test take far less than the 7.5 s the tenant's bucket needs to gain one
// back.
const limitsPlans = `{"trial": {"rate_limit": 5, "tenant_rate_limit": 8}}`

// TestSharedRateLimitsTwoNodes: two nodes on one PostgreSQL database, with
// no Redis (the limiter's table) and with Redis, enforce each key's limit
// and the tenant's total once between them, not once each.
func TestSharedRateLimitsTwoNodes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"postgres", "redis"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			db := postgresURL(t)
			args := []string{"--plans", tempPlansFile(t, limitsPlans)}
			if mode == "redis" {
				// Redis decides alone: a slow answer on a loaded machine is
				// waited for, not decided by the fallback (TestRedisGoesAway
				// covers that).
				args = append(args, "--redis-url", "redis://"+redisAddr(t), "--redis-timeout", "5s")
			}
			nodes := []*server{startServer(t, db, args...), startServer(t, db, args...)}
			tn := newTenant(t, db)
			second := apiCreateKey(t, nodes[1], tn.Live, map[string]any{"name": "second"})["key"].(string) // tenant: 1 of 8

			if got := burst(t, nodes, tn.Test, 12); got != 5 {
				t.Errorf("%s: the key's 5 a minute allowed %d of 12 across two nodes", mode, got)
			}
			// The tenant has 2 of its 8 left; the second key's own 5 do not
			// matter.
			if got := burst(t, nodes, second, 12); got != 2 {
				t.Errorf("%s: the tenant's 8 a minute (6 used) allowed %d of 12 more across two nodes", mode, got)
			}
			for _, s := range nodes {
				r := s.do(t, "GET", "/readyz", "", nil)
				if r.Status != http.StatusOK || r.Data()["status"] != "ready" {
					t.Errorf("/readyz: %d %s", r.Status, r.Raw)
				}
				if m := metric(scrape(t, s), `switchboard_ratelimit_backend{backend="`+mode+`"}`); m != 1 {
					t.Errorf("switchboard_ratelimit_backend{backend=%q} = %v, want 1", mode, m)
				}
			}
		})
	}
}

// TestRedisGoesAway: two nodes share limits through Redis, reached through
// a proxy the test controls. When Redis stops answering, every request is
// still answered promptly, the limits are still shared (through PostgreSQL),
// /readyz says degraded, /metrics shows the fallback and each node logs it
// once; when Redis is back, Redis decides again.
func TestRedisGoesAway(t *testing.T) {
	t.Parallel()
	for _, how := range []struct {
		name string
		mode tcpproxy.Mode
	}{{"dropped", tcpproxy.Drop}, {"not answering", tcpproxy.Blackhole}} {
		t.Run(how.name, func(t *testing.T) {
			t.Parallel()
			db := postgresURL(t)
			proxy := tcpproxy.New(t, redisAddr(t))
			// A decision waits at most 500 ms for Redis (75 ms by default,
			// which a loaded machine's Redis answer can exceed now and then:
			// the fallback then decides that one request, by design, and
			// the test could not tell which limiter decided).
			const redisTimeout = 500 * time.Millisecond
			args := []string{"--plans", tempPlansFile(t, limitsPlans), "--redis-url", "redis://" + proxy.Addr(),
				"--redis-timeout", redisTimeout.String()}
			nodes := []*server{startServer(t, db, args...), startServer(t, db, args...)}
			fallbacks := func(s *server) float64 { return metric(scrape(t, s), "switchboard_ratelimit_fallbacks_total") }

			// The first key uses its 5 in Redis. Should Redis be slower
			// than the timeout even so, the burst is made again with a new
			// tenant: it must be Redis's alone.
			var tn, other tenant
			for try := 0; ; try++ {
				tn, other = newTenant(t, db), newTenant(t, db)
				f0, f1 := fallbacks(nodes[0]), fallbacks(nodes[1])
				got := burst(t, nodes, tn.Test, 7)
				if fallbacks(nodes[0]) != f0 || fallbacks(nodes[1]) != f1 {
					if try == 2 {
						t.Fatalf("with Redis: the fallback decided part of every burst of three")
					}
					continue
				}
				if got != 5 {
					t.Fatalf("with Redis: %d of 7 allowed, want 5", got)
				}
				break
			}

			proxy.SetMode(how.mode)
			// The other tenant's key, fresh in PostgreSQL as in Redis: the
			// nodes share its 5 through PostgreSQL. Each answer comes
			// promptly: the fallback takes over within the timeout (1.5 s
			// more leaves room for a loaded machine; go-redis's own read
			// timeout is 3 s, and waiting on Redis took 1.7 s and more
			// before the fallback).
			var slowest time.Duration
			allowed := 0
			for i := range 12 {
				start := time.Now()
				r := nodes[i%2].do(t, "GET", "/v1/api-keys", other.Test, nil)
				slowest = max(slowest, time.Since(start))
				switch r.Status {
				case http.StatusOK:
					allowed++
				case http.StatusTooManyRequests:
					if headerInt(t, r, "Retry-After") < 1 {
						t.Errorf("429 with Retry-After %q", r.Header.Get("Retry-After"))
					}
				default:
					t.Fatalf("request %d with Redis %s: %d %s", i, how.name, r.Status, r.Raw)
				}
			}
			if allowed != 5 {
				t.Errorf("with Redis %s: %d of 12 allowed across two nodes, want 5", how.name, allowed)
			}
			if slowest > redisTimeout+1500*time.Millisecond {
				t.Errorf("with Redis %s the slowest answer took %v", how.name, slowest)
			}
			for i, s := range nodes {
				r := s.do(t, "GET", "/readyz", "", nil)
				checks, _ := r.Data()["checks"].(map[string]any)
				rl, _ := checks["rate_limits"].(map[string]any)
				if r.Status != http.StatusOK || r.Data()["status"] != "degraded" || rl["status"] != "degraded" {
					t.Errorf("node %d: /readyz with Redis %s: %d %s", i, how.name, r.Status, r.Raw)
				}
				text := scrape(t, s)
				if m := metric(text, `switchboard_ratelimit_backend{backend="postgres"}`); m != 1 {
					t.Errorf("node %d: switchboard_ratelimit_backend{backend=\"postgres\"} = %v, want 1", i, m)
				}
				if m := metric(text, `switchboard_ratelimit_backend{backend="redis"}`); m != 0 {
					t.Errorf("node %d: switchboard_ratelimit_backend{backend=\"redis\"} = %v, want 0", i, m)
				}
				if m := metric(text, "switchboard_ratelimit_fallbacks_total"); m < 1 {
					t.Errorf("node %d: switchboard_ratelimit_fallbacks_total = %v", i, m)
				}
				if n := strings.Count(s.logs.String(), "rate limits: redis failed"); n != 1 {
					t.Errorf("node %d logged the fallback %d times, want once:\n%s", i, n, s.logs.String())
				}
			}

			// Redis comes back: within a cooldown (1 s) each node's next
			// request tries it again, and Redis, which remembers that the
			// first key used its 5, decides again.
			proxy.SetMode(tcpproxy.Forward)
			for i, s := range nodes {
				eventually(t, 30*time.Second, "Redis deciding again", func() bool {
					s.do(t, "GET", "/v1/api-keys", other.Live, nil) // any answer: it goes through the limiter
					return metric(scrape(t, s), `switchboard_ratelimit_backend{backend="redis"}`) == 1
				})
				// A request the fallback decided (Redis slower than the
				// timeout) says nothing about Redis: it is asked again.
				eventually(t, 30*time.Second, "a decision by Redis on the first key", func() bool {
					before := fallbacks(s)
					r := s.do(t, "GET", "/v1/api-keys", tn.Test, nil)
					if fallbacks(s) != before {
						return false
					}
					wantError(t, "the first key after Redis came back", r, http.StatusTooManyRequests, "RATE_LIMIT_EXCEEDED")
					return true
				})
				if r := s.do(t, "GET", "/readyz", "", nil); r.Status != http.StatusOK || r.Data()["status"] != "ready" {
					t.Errorf("node %d: /readyz after Redis came back: %d %s", i, r.Status, r.Raw)
				}
				if n := strings.Count(s.logs.String(), "rate limits: redis answers again"); n != 1 {
					t.Errorf("node %d logged the recovery %d times, want once", i, n)
				}
			}
		})
	}
}

// TestPoolExhausted: a node with one database connection whose connection
// is held (its rate-limit statement waits on a lock the test holds) answers
// other requests 503 DATABASE_UNAVAILABLE, in the envelope with
// Retry-After, after --db-wait; /readyz says the pool is saturated; once
// the lock goes, everything is answered again.
func TestPoolExhausted(t *testing.T) {
	t.Parallel()
	db := postgresURL(t)
	// 2 s: the node's background work shares the one connection, and on a
	// loaded machine a holder can keep it for longer than a short wait.
	s := startServer(t, db, "--db-max-conns", "1", "--db-wait", "2s")
	tn := newTenant(t, db)
	apiListKeys(t, s, tn.Test) // the key is known and cached

	locker, err := sql.Open("pgx", db)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()
	tx, err := locker.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE rate_limits IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// A request that takes the node's one connection and waits on the lock.
	var wg sync.WaitGroup
	held := make(chan int, 1)
	wg.Go(func() {
		req, _ := http.NewRequest("GET", s.URL+"/v1/api-keys", nil)
		req.Header.Set("Authorization", "Bearer "+tn.Test)
		res, err := httpClient.Do(req)
		if err != nil {
			held <- 0
			return
		}
		res.Body.Close()
		held <- res.StatusCode
	})
	defer wg.Wait()
	eventually(t, 30*time.Second, "the node's connection to wait on the lock", func() bool {
		var n int
		locker.QueryRow(`SELECT COUNT(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE NOT l.granted AND c.relname = 'rate_limits' AND c.relnamespace = $1::regnamespace`, schemaOf(t, db)).Scan(&n)
		return n > 0
	})

	for _, path := range []string{"/v1/api-keys", "/v1/messages"} {
		r := s.do(t, "GET", path, tn.Test, nil)
		wantError(t, "GET "+path+" with the pool exhausted", r, http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE")
		if ra := headerInt(t, r, "Retry-After"); ra < 1 {
			t.Errorf("503 with Retry-After %d", ra)
		}
	}
	r := s.do(t, "GET", "/readyz", "", nil)
	checks, _ := r.Data()["checks"].(map[string]any)
	dbc, _ := checks["database"].(map[string]any)
	if r.Status != http.StatusOK || r.Data()["status"] != "degraded" || dbc["status"] != "degraded" {
		t.Errorf("/readyz with the pool exhausted: %d %s", r.Status, r.Raw)
	}
	if m := metric(scrape(t, s), `switchboard_db_unavailable_total{reason="pool_exhausted"}`); m < 2 {
		t.Errorf(`switchboard_db_unavailable_total{reason="pool_exhausted"} = %v, want at least 2`, m)
	}

	tx.Rollback()
	if got := <-held; got != http.StatusOK {
		t.Errorf("the request that held the connection answered %d, want 200 once the lock went", got)
	}
	apiListKeys(t, s, tn.Test)
	if r := s.do(t, "GET", "/readyz", "", nil); r.Status != http.StatusOK || r.Data()["status"] != "ready" {
		t.Errorf("/readyz after the lock went: %d %s", r.Status, r.Raw)
	}
	logs := s.logs.String()
	if strings.Count(logs, "requests are turned away") != 1 || strings.Count(logs, "connections are available again") != 1 {
		t.Errorf("want one line when the pool ran out and one when it recovered:\n%s", logs)
	}
}

// TestDatabaseUnreachable: a node whose database goes away answers 503
// DATABASE_UNAVAILABLE (never 500), and /readyz answers 503 with the same
// code and its checks; when the database is back, so is the node.
func TestDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	db := postgresURL(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, u.Host)
	u.Host = proxy.Addr()
	s := startServer(t, u.String(), "--db-wait", "300ms")
	tn := newTenant(t, db)
	apiListKeys(t, s, tn.Test)

	proxy.SetMode(tcpproxy.Drop)
	for range 3 { // a connection that broke, then none to be had
		r := s.do(t, "GET", "/v1/messages", tn.Test, nil)
		wantError(t, "a request with the database gone", r, http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE")
	}
	r := s.do(t, "GET", "/readyz", "", nil)
	wantError(t, "/readyz with the database gone", r, http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE")
	details, _ := r.Body["details"].(map[string]any)
	checks, _ := details["checks"].(map[string]any)
	if dbc, _ := checks["database"].(map[string]any); dbc["status"] != "down" {
		t.Errorf("/readyz details with the database gone: %s", r.Raw)
	}
	if r := s.do(t, "GET", "/healthz", "", nil); r.Status != http.StatusOK {
		t.Errorf("/healthz (liveness) with the database gone: %d", r.Status)
	}

	proxy.SetMode(tcpproxy.Forward)
	eventually(t, 30*time.Second, "the node to serve again", func() bool {
		return s.do(t, "GET", "/v1/messages", tn.Test, nil).Status == http.StatusOK
	})
	if r := s.do(t, "GET", "/readyz", "", nil); r.Status != http.StatusOK {
		t.Errorf("/readyz with the database back: %d %s", r.Status, r.Raw)
	}
}

// schemaOf returns the schema of a test database URL (its search_path).
func schemaOf(t testing.TB, db string) string {
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("search_path")
}

// TestReadyzSQLite: a single node on SQLite is ready, its limits in memory.
func TestReadyzSQLite(t *testing.T) {
	t.Parallel()
	s := startServer(t, sqliteURL(t))
	r := s.do(t, "GET", "/readyz", "", nil)
	checks, _ := r.Data()["checks"].(map[string]any)
	rl, _ := checks["rate_limits"].(map[string]any)
	dbc, _ := checks["database"].(map[string]any)
	if r.Status != http.StatusOK || r.Data()["status"] != "ready" || rl["detail"] != "memory" || dbc["status"] != "ok" {
		t.Errorf("/readyz on SQLite: %d %s", r.Status, r.Raw)
	}
	if m := metric(scrape(t, s), `switchboard_ratelimit_backend{backend="memory"}`); m != 1 {
		t.Errorf(`switchboard_ratelimit_backend{backend="memory"} = %v, want 1`, m)
	}
}
