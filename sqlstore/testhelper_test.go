package sqlstore

import (
	"context"
	"github.com/switchboard/switchboard/internal/dbtest"
	"testing"
)

// forEachDialect runs fn once against a fresh SQLite file and once against
// a fresh PostgreSQL schema, in parallel.
var forEachDialect = dbtest.ForEach

var (
	testSQLiteURL   = dbtest.SQLite
	testPostgresURL = dbtest.Postgres
)

// openTestDB opens url and closes it when the test ends (before a
// PostgreSQL schema is dropped).
func openTestDB(t testing.TB, url string) *DB {
	t.Helper()
	db, err := Open(context.Background(), url)
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
