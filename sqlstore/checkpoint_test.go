package sqlstore

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"
)

// TestCheckpointSkipsUnchangedWAL: the background checkpoint leaves alone
// a WAL not written since a checkpoint found every frame copied, and
// checkpoints every WAL written since, and every WAL written within the
// last second (file times may be coarse).
func TestCheckpointSkipsUnchangedWAL(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, testSQLiteURL(t))
	close(db.stopCheckpoints) // the test runs the checkpoints itself
	<-db.checkpointsDone
	db.stopCheckpoints = nil
	if _, err := db.exec(ctx, `CREATE TABLE ckpt_test (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	// A checkpoint that runs asks for a WAL restart (every length is long
	// enough): walFull tells whether it ran.
	db.walRestartPages.Store(0)
	ran := func() bool {
		t.Helper()
		db.walFull.Store(false)
		db.checkpoint()
		return db.walFull.Load()
	}
	age := func() { // as if last written a minute ago
		t.Helper()
		old := time.Now().Add(-time.Minute)
		if err := os.Chtimes(db.walPath, old, old); err != nil {
			t.Fatal(err)
		}
	}
	write := func() {
		t.Helper()
		if _, err := db.exec(ctx, `INSERT INTO ckpt_test (n) VALUES (1)`); err != nil {
			t.Fatal(err)
		}
	}

	write()
	if !ran() || !ran() {
		t.Fatal("a WAL written within the last second was not checkpointed")
	}
	age()
	if !ran() {
		t.Fatal("a WAL changed since the last checkpoint was not checkpointed")
	}
	if ran() {
		t.Fatal("an unchanged WAL, all copied, was checkpointed again")
	}
	write()
	if !ran() {
		t.Fatal("a WAL written since the last checkpoint was not checkpointed")
	}
	age()
	if !ran() || ran() {
		t.Fatal("after a write: not checkpointed once, then left alone")
	}

	// A reader's snapshot keeps the checkpoint from copying what was
	// written after it: the WAL is checkpointed again once it ends.
	reader, err := sql.Open("sqlite3", "file:"+db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	rtx, err := reader.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rtx.QueryRow(`SELECT COUNT(*) FROM ckpt_test`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	write()
	age()
	if !ran() {
		t.Fatal("a WAL written since the last checkpoint was not checkpointed")
	}
	rtx.Rollback()
	if !ran() {
		t.Fatal("a WAL whose frames a reader kept from being copied was not checkpointed again")
	}
	if ran() {
		t.Fatal("an unchanged WAL, all copied, was checkpointed again")
	}
}
