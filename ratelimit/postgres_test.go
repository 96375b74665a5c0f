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

// newTestPostgres returns a database on a schema of the test's own with the
// rate_limits table of the store's migration.
func newTestPostgres(t testing.TB) (*sql.DB, string) {
	t.Helper()
	url := dbtest.Postgres(t)
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
