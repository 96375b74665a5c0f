package sqlstore

import (
	"context"
	"database/sql/driver"
	"sync"
	"testing"
	"time"
)

// orphanRecipient is work whose every statement succeeds and whose COMMIT
// fails: it inserts a recipient of a tenant that does not exist, with the
// foreign key checked only at the commit.
func orphanRecipient(tx *Tx) error {
	ctx := context.Background()
	if _, err := tx.exec(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
		return err
	}
	_, err := tx.exec(ctx, `INSERT INTO recipients (tenant_id, environment, number, opted_out, first_seen_at, updated_at)
		VALUES ('no-such-tenant', 'live', '+15005550000', 0, 0, 0)`)
	return err
}

// A SQLite transaction runs on the write connection taken from the pool.
// When its COMMIT fails and leaves the transaction open (here a deferred
// foreign key), it must be rolled back before the connection goes back:
// otherwise the next transaction would fail to begin, or worse, run inside
// the failed one.
func TestFailedCommitLeavesNoTransactionOpen(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, testSQLiteURL(t))
	if err := db.inTx(ctx, orphanRecipient); err == nil {
		t.Fatal("commit of a row whose tenant does not exist succeeded")
	}
	for i := 0; i < 3; i++ { // the pool has one write connection: each reuses it
		if err := db.inTx(ctx, func(tx *Tx) error {
			_, err := tx.exec(ctx, `UPDATE recipients SET opted_out = 1 WHERE tenant_id = 'no-such-tenant'`)
			return err
		}); err != nil {
			t.Fatalf("transaction %d after the failed commit: %v", i, err)
		}
	}
	var n int
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM recipients WHERE tenant_id = 'no-such-tenant'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows of the failed transaction were kept", n)
	}
}

// The write connection's checkpoint settings hold on every connection the
// pool opens, including one that replaces a connection it closed.
func TestWriteConnectionSettingsSurviveReconnect(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, testSQLiteURL(t))
	check := func(when string) {
		t.Helper()
		var auto, limit int
		if err := db.write.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil {
			t.Fatal(err)
		}
		if err := db.write.QueryRowContext(ctx, `PRAGMA journal_size_limit`).Scan(&limit); err != nil {
			t.Fatal(err)
		}
		if auto != 0 || limit != walSizeLimit {
			t.Fatalf("%s: wal_autocheckpoint %d, journal_size_limit %d; want 0 and %d", when, auto, limit, walSizeLimit)
		}
	}
	check("first connection")
	conn, err := db.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn.Raw(func(any) error { return driver.ErrBadConn }) // the pool closes it
	conn.Close()
	check("after the pool opened another")
}

// A batch whose COMMIT fails (here one caller's deferred foreign key) is run
// again one caller per transaction: the others' work is committed, the
// failing caller gets the error, and the write connection is left usable.
func TestBatchCommitFailureIsolated(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, testSQLiteURL(t))
	insert := probeInserts(t, db)
	// The first caller holds the writer until the others are queued, so
	// that they share its transaction.
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	errs := make([]error, 4)
	var wg sync.WaitGroup
	wg.Go(func() {
		errs[0] = db.Write(ctx, func(tx *Tx) error {
			once.Do(func() { close(started); <-release })
			return insert("first")(tx)
		})
	})
	<-started
	wg.Go(func() { errs[1] = db.Write(ctx, orphanRecipient) })
	for len(db.batch.queue) < 1 {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() { errs[2] = db.Write(ctx, insert("after")) })
	for len(db.batch.queue) < 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	errs[3] = db.Write(ctx, insert("later"))
	if errs[1] == nil || errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("first %v, orphan %v, after %v, later %v; want only the orphan to fail", errs[0], errs[1], errs[2], errs[3])
	}
	var n int
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM batch_probe`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("%d rows committed, want 3 (first, after, later)", n)
	}
}
