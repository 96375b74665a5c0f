package sqlstore

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestWALStartsOverUnderLoad: under a load that never lets the background
// checkpoints catch up with the writer, the WAL still starts over from its
// beginning, so it stays short instead of growing with everything written.
//
// The load is made exact rather than heavy, so that the result does not
// depend on the machine's speed: each round's write transaction is open
// while a checkpoint runs, so the checkpoint copies every frame but that
// round's, which commit after it. The WAL only starts over when a write
// transaction begins with every frame copied, which then never happens on
// its own; the writer's own checkpoint between transactions (restartWAL),
// asked for once the WAL is walRestartPages long, is what makes it happen.
// Without restartWAL the WAL of this test grows to more than everything
// written (4 MB); with it, it stays under half a megabyte.
func TestWALStartsOverUnderLoad(t *testing.T) {
	ctx := context.Background()
	url := testSQLiteURL(t)
	db := openTestDB(t, url)
	// The background checkpoints run every 200 ms: at a moment between two
	// transactions, one would copy every frame and let the WAL start over
	// on its own. The test runs the checkpoints itself.
	close(db.stopCheckpoints)
	<-db.checkpointsDone
	db.stopCheckpoints = nil
	db.walRestartPages.Store(64)
	const limit = 1 << 20
	for _, q := range []string{
		fmt.Sprintf(`PRAGMA journal_size_limit = %d`, limit),
		`CREATE TABLE wal_load (n INTEGER, blob BLOB)`,
	} {
		if _, err := db.exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	wal := url[len("sqlite:"):] + "-wal"

	const rounds, rows, size = 128, 8, 4096
	blob := make([]byte, size)
	var largest int64
	for i := range rounds {
		inTx, checkpointed := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- db.Write(ctx, func(tx *Tx) error {
				close(inTx)
				<-checkpointed
				for j := range rows {
					if _, err := tx.exec(ctx, `INSERT INTO wal_load (n, blob) VALUES (?, ?)`, i*rows+j, blob); err != nil {
						return err
					}
				}
				return nil
			})
		}()
		<-inTx
		db.checkpoint() // as the background loop would, with a write under way
		close(checkpointed)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(wal); err == nil {
			largest = max(largest, fi.Size())
		}
	}
	total := int64(rounds * rows * size)
	t.Logf("wrote %d kB; the WAL was at most %d kB", total>>10, largest>>10)
	// Started over, the WAL holds the few rounds written since the last
	// restart; growing, it holds more than everything written.
	if largest > total/8 {
		t.Fatalf("the WAL grew to %d bytes while %d were written: it did not start over", largest, total)
	}
	var n int
	if err := db.read.QueryRow(`SELECT count(*) FROM wal_load`).Scan(&n); err != nil || n != rounds*rows {
		t.Fatalf("rows: %d, %v; want %d", n, err, rounds*rows)
	}
}
