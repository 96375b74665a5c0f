package sqlstore

import (
	"context"
	"testing"
	"time"
)

// A writer commits only in its turn: while the turn is held (by the test
// here, standing for the node's other writer with a commit in flight), a
// writer whose batch is ready keeps it open and takes the callers that
// come, and commits them all in one transaction once the turn is back.
// A writer waits for the turn for turnWait at most: with the turn never
// given back, its callers are answered all the same.
func TestWritersCommitInTurn(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db := openTestDBOptions(t, url, Options{Writers: 1})
		db.batch.turnWait.Store(int64(time.Hour))
		nothing := func(*Tx) error { return nil }

		<-db.batch.turn // the other writer commits
		commits0, writes0 := db.BatchStats()
		errs := make(chan error, 3)
		ran := make(chan struct{}, cap(errs))
		for range cap(errs) {
			go func() {
				errs <- db.Write(ctx, func(*Tx) error {
					ran <- struct{}{}
					return nil
				})
			}()
			// Each caller in turn is run by the waiting writer, not left
			// in the queue for a transaction of its own.
			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Fatal("a caller queued while the writer waited for its turn was not run in 10 s")
			}
		}
		select {
		case err := <-errs:
			t.Fatalf("a caller was answered (%v) before the turn came back", err)
		default:
		}
		db.batch.turn <- struct{}{} // its commit is back
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		commits, writes := db.BatchStats()
		if commits-commits0 != 1 || writes-writes0 != 3 {
			t.Errorf("%d transactions for %d callers, want 1 for 3", commits-commits0, writes-writes0)
		}

		// The turn never comes back: the writer commits after turnWait.
		db.batch.turnWait.Store(int64(turnWait))
		<-db.batch.turn
		done := make(chan error, 1)
		go func() { done <- db.Write(ctx, nothing) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			db.batch.turn <- struct{}{} // so that the store closes
			t.Fatal("a caller waited 10 s for a turn that never came back, want turnWait at most")
		}
		db.batch.turn <- struct{}{}
	})
}
