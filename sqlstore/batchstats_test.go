package sqlstore

import (
	"context"
	"fmt"
	"testing"
)

// TestBatchStats checks what BatchStats counts (and /metrics shows as
// switchboard_db_commits_total and switchboard_db_commit_writes_total): one
// commit per transaction of a writer, one write per caller run in it.
func TestBatchStats(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db := openTestDBOptions(t, url, Options{MaxConns: 4, Writers: 1})
		insert := probeInserts(t, db)
		commits0, writes0 := db.BatchStats()

		// Three writes one after the other: three transactions.
		for i := range 3 {
			if err := db.Write(ctx, insert(fmt.Sprintf("alone-%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		// Five writes queued behind a held writer: the writer takes them
		// into the held one's transaction, still open when it returns.
		release := holdWriter(db)
		errs := make(chan error, 5)
		for i := range cap(errs) {
			go func() { errs <- db.Write(ctx, insert(fmt.Sprintf("together-%d", i))) }()
		}
		waitQueued(t, db, cap(errs))
		release()
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		commits, writes := db.BatchStats()
		if got, want := commits-commits0, int64(3+1); got != want {
			t.Errorf("commits: %d, want %d", got, want)
		}
		if got, want := writes-writes0, int64(3+1+5); got != want {
			t.Errorf("writes: %d, want %d", got, want)
		}
	})
}
