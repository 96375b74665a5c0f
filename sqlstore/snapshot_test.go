package sqlstore

import (
	"context"
	"testing"
	"time"
)

// A read snapshot does not see what commits between its queries, on
// either database, so a listing and the rows it attaches (a delivery and
// its attempts) come from one commit.
func TestReadSnapshot(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db := openTestDB(t, url)
		count := func(q queryFunc) int {
			t.Helper()
			rows, err := q(ctx, `SELECT COUNT(*) FROM dashboard_flashes`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
			}
			return n
		}
		err := db.readSnapshot(ctx, func(q queryFunc) error {
			before := count(q)
			if err := db.PutDashboardFlash(ctx, "f1", "session", "sealed", time.Now()); err != nil {
				t.Fatal(err)
			}
			if n := count(db.query); n != before+1 {
				t.Fatalf("outside the snapshot: %d flashes, want %d", n, before+1)
			}
			if n := count(q); n != before {
				t.Errorf("the snapshot saw a commit made after its first read: %d flashes, want %d", n, before)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The connection went back to the pool usable and out of its
		// transaction: the next snapshot sees the commit.
		if err := db.readSnapshot(ctx, func(q queryFunc) error {
			if n := count(q); n != 1 {
				t.Errorf("a later snapshot: %d flashes, want 1", n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}
