package ratelimit

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/dbtest"
)

// newTestPostgres returns a database on an empty schema of the test's own,
// with the rate_limits table of the store's migration.
func newTestPostgres(t testing.TB) (*sql.DB, string) {
	t.Helper()
	url := dbtest.EmptyPostgres(t)
	db := openPool(t, url)
	ddl, err := os.ReadFile("../sqlstore/migrations/0014_rate_limits.postgres.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(string(ddl)); err != nil {
		t.Fatal(err)
	}
	return db, url
}

func openPool(t testing.TB, url string) *sql.DB {
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestPostgres(t *testing.T) {
	newTestPostgres(t) // skip early when PostgreSQL is not configured
	testLimiter(t, harness{
		newLimiter: func(t *testing.T) (Limiter, func(string) string, func(time.Duration)) {
			db, _ := newTestPostgres(t)
			return NewPostgres(SQLDB{db}), func(k string) string { return k }, nil
		},
		// The database's clock cannot be faked; durations shrink by the
		// time the test takes between calls.
		slack: time.Second,
	})
}

// TestPostgresSharedBetweenPools: two pools (as two nodes) on one table
// share each key's budget: a burst from both allows exactly the limit.
func TestPostgresSharedBetweenPools(t *testing.T) {
	db, url := newTestPostgres(t)
	nodes := []*Postgres{NewPostgres(SQLDB{db}), NewPostgres(SQLDB{openPool(t, url)})}
	const limit = 30
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 10 {
				d, err := nodes[i%2].Allow(context.Background(), "shared", limit, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != limit {
		t.Errorf("allowed %d of 80, want exactly %d", got, limit)
	}
}

func TestPostgresSweep(t *testing.T) {
	db, _ := newTestPostgres(t)
	lim := NewPostgres(SQLDB{db})
	ctx := context.Background()
	for _, k := range []string{"a", "b"} {
		if _, err := lim.Allow(ctx, k, 1000, time.Millisecond*1000); err != nil { // full again after 1 ms
			t.Fatal(err)
		}
	}
	if _, err := lim.Allow(ctx, "busy", 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Wait (polling) until the short buckets are full again by the
	// database's clock, then sweep: only "busy" stays.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := lim.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var left int
		db.QueryRow(`SELECT COUNT(*) FROM rate_limits`).Scan(&left)
		if left == 1 {
			var key string
			db.QueryRow(`SELECT key FROM rate_limits`).Scan(&key)
			if key != "busy" {
				t.Fatalf("sweep kept %q, want busy", key)
			}
			return
		}
		if n < 0 || time.Now().After(deadline) {
			t.Fatalf("%d rows left after sweeping, want 1", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPostgresAfterIdle: a key that was idle has a full bucket, not more:
// limit 10 a second, a burst of 10, 2 s idle, then 30 attempts in a row
// allow 10, and one more for each tenth of a second the attempts took (the
// bucket refills meanwhile). A TAT left in the past by the idle time (the
// statement without GREATEST(tat, now)) would allow 20 here, and a key idle
// for an hour its whole backlog.
func TestPostgresAfterIdle(t *testing.T) {
	db, _ := newTestPostgres(t)
	lim := NewPostgres(SQLDB{db})
	ctx := context.Background()
	const limit, period = 10, time.Second
	attempt := func() bool {
		d, err := lim.Allow(ctx, "idle", limit, period)
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	for i := range limit {
		if !attempt() {
			t.Fatalf("the burst's attempt %d was refused", i)
		}
	}
	time.Sleep(2 * period) // the subject of the test: the key stays idle
	start := time.Now()
	allowed := 0
	for range 3 * limit {
		if attempt() {
			allowed++
		}
	}
	took := time.Since(start)
	refilled := int((took + period/limit - 1) / (period / limit))
	if allowed < limit || allowed > limit+refilled {
		t.Errorf("after 2 s idle, 30 attempts in %v allowed %d, want %d to %d (a full bucket, and what refilled while they ran)",
			took, allowed, limit, limit+refilled)
	}
}

// TestRefund: a refunded request is one more allowed, once; a refund of a
// key whose bucket is full changes nothing.
func TestRefund(t *testing.T) {
	type refunder interface {
		Limiter
		Refund(ctx context.Context, key string, limit int, period time.Duration) error
	}
	test := func(t *testing.T, lim refunder) {
		ctx := context.Background()
		allowed := func() bool {
			d, err := lim.Allow(ctx, "k", 3, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return d.Allowed
		}
		if err := lim.Refund(ctx, "k", 3, time.Hour); err != nil { // a full bucket: nothing to give back
			t.Fatal(err)
		}
		for i := range 3 {
			if !allowed() {
				t.Fatalf("attempt %d refused", i)
			}
		}
		if allowed() {
			t.Fatal("a fourth of 3 allowed")
		}
		if err := lim.Refund(ctx, "k", 3, time.Hour); err != nil {
			t.Fatal(err)
		}
		if !allowed() {
			t.Fatal("the refunded request was refused")
		}
		if allowed() {
			t.Fatal("a refund gave back more than one request")
		}
	}
	t.Run("memory", func(t *testing.T) { test(t, NewMemory(nil)) })
	t.Run("postgres", func(t *testing.T) {
		db, _ := newTestPostgres(t)
		test(t, NewPostgres(SQLDB{db}))
	})
}
