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
