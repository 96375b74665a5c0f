package sqlstore

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// A PostgreSQL writer runs its next transaction on the connection of the
// last one, without going through the pool (keptConn), and gives the
// connection back once it has had nothing to do for keptIdle. A batch ends
// when it holds maxBatch callers: with one more caller queued, the next
// transaction begins at once, and it must run on the same *sql.Conn
// (through the pool, every transaction gets a new one). Then, with nothing
// to write, the writer must give the connection back to the pool.
func TestWriterKeepsConnectionUnderLoad(t *testing.T) {
	ctx := context.Background()
	db := openTestDBOptions(t, testPostgresURL(t), Options{MaxConns: 4, Writers: 1})

	conns := make(chan *sql.Conn, maxBatch+1)
	record := func(tx *Tx) error {
		conns <- tx.conn
		return nil
	}
	release := holdWriter(db)
	errs := make(chan error, maxBatch+1)
	for range cap(errs) {
		go func() { errs <- db.Write(ctx, record) }()
	}
	waitQueued(t, db, cap(errs))
	release()
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The held work and maxBatch-1 callers made the first batch; the
	// last caller ran in a batch of its own.
	seen := map[*sql.Conn]int{}
	for range cap(conns) {
		seen[<-conns]++
	}
	if len(seen) != 1 {
		t.Errorf("the writer's two transactions ran on %d connections, want 1 (the first one kept for the second)", len(seen))
	}

	for deadline := time.Now().Add(10 * time.Second); db.write.Stats().InUse != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections in use with nothing to write, want 0: the writer kept its connection", db.write.Stats().InUse)
		}
		time.Sleep(time.Millisecond)
	}
}
