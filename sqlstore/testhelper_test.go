package sqlstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/freshdb"
)

// templates are the test binary's migrated template databases, which
// testSQLiteURL and testPostgresURL copy (the package cannot import
// internal/dbtest, which imports it).
var templates = freshdb.New(Migrate)

// testSQLiteURL and testPostgresURL make a migrated database of the test's
// own; emptySQLiteURL and emptyPostgresURL one that no migration touched,
// for the tests of the migrations.
var (
	testSQLiteURL    = templates.SQLite
	testPostgresURL  = templates.Postgres
	emptySQLiteURL   = freshdb.EmptySQLite
	emptyPostgresURL = freshdb.EmptyPostgres
)

// forEachDialect runs fn once against a migrated SQLite file and once
// against a migrated PostgreSQL database, in parallel.
func forEachDialect(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	freshdb.ForEach(t, testSQLiteURL, testPostgresURL, fn)
}

// forEachEmpty is forEachDialect on databases no migration has touched.
func forEachEmpty(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	freshdb.ForEach(t, emptySQLiteURL, emptyPostgresURL, fn)
}

// openTestDB opens url and closes it when the test ends (before a
// PostgreSQL schema is dropped).
func openTestDB(t testing.TB, url string) *DB {
	t.Helper()
	return openTestDBOptions(t, url, Options{})
}

// openTestDBOptions is openTestDB with the pool's options.
func openTestDBOptions(t testing.TB, url string, opt Options) *DB {
	t.Helper()
	db, err := OpenOptions(context.Background(), url, opt)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// probeInserts creates the table batch_probe and returns work that inserts
// the key k into it, for tests of how the writer batches callers.
func probeInserts(t testing.TB, db *DB) func(k string) func(*Tx) error {
	ctx := context.Background()
	if _, err := db.exec(ctx, `CREATE TABLE batch_probe (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return func(k string) func(*Tx) error {
		return func(tx *Tx) error {
			_, err := tx.exec(ctx, `INSERT INTO batch_probe (k) VALUES (?)`, k)
			return err
		}
	}
}

// holdWriter has the only writer of db run work that waits until release
// is called, and returns once it runs: callers of Write then queue behind
// it, to be run together in the next batch.
func holdWriter(db *DB) (release func()) {
	hold, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go db.Write(context.Background(), func(*Tx) error {
		once.Do(func() { close(held) })
		<-hold
		return nil
	})
	<-held
	return func() { close(hold) }
}

// waitQueued waits until n callers wait in the writers' queue.
func waitQueued(t testing.TB, db *DB, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(db.batch.queue) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d callers queued behind the held writer, want %d", len(db.batch.queue), n)
		}
		time.Sleep(time.Millisecond)
	}
}
