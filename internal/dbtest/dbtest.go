// Package dbtest gives tests a database of their own: a SQLite file in the
// test's temporary directory, or a database on the PostgreSQL server named
// by SWITCHBOARD_TEST_POSTGRES, dropped when the test ends. Tests that need
// PostgreSQL skip, saying why, when the variable is unset.
//
// Postgres gives a database already migrated by the store: a copy of a
// template each test binary migrates once (see internal/freshdb), since
// migrating one from scratch takes 1.5 s and more. SQLite gives a file that
// does not exist yet, which the store makes and migrates in a tenth of that:
// tests start servers on it, restore backups into it, check the modes of
// the files serve creates. EmptyPostgres gives a schema no migration has
// touched, for tests that migrate from scratch.
package dbtest

import (
	"testing"

	"github.com/switchboard/switchboard/internal/freshdb"
	"github.com/switchboard/switchboard/sqlstore"
)

// PostgresEnv names the variable holding a PostgreSQL URL for tests, e.g.
// postgres://127.0.0.1:5432/test?sslmode=disable. .ci/run sets it. Its role
// must be allowed to create databases.
const PostgresEnv = freshdb.PostgresEnv

// templates are this binary's migrated templates.
var templates = freshdb.New(sqlstore.Migrate)

// SQLite returns the URL of a SQLite file that does not exist yet, in the
// test's temporary directory.
func SQLite(t testing.TB) string { return freshdb.EmptySQLite(t) }

// Postgres creates a migrated database of the test's own, drops it when
// the test ends, and returns its URL (its search_path names the schema of
// the tables, freshdb.Schema).
func Postgres(t testing.TB) string {
	t.Helper()
	return templates.Postgres(t)
}

// ForEach runs fn once on a new SQLite file and once on a migrated
// PostgreSQL database, in parallel subtests named "sqlite" and "postgres".
func ForEach(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	freshdb.ForEach(t, SQLite, Postgres, fn)
}

// EmptyPostgres creates an empty schema of the test's own, drops it when
// the test ends, and returns a URL whose search_path points at it.
func EmptyPostgres(t testing.TB) string {
	t.Helper()
	return freshdb.EmptyPostgres(t)
}

// Exec runs one statement against the database of url, written with `?`
// placeholders, for a test that must set up a state no API can (a pairing
// code that expired, say).
func Exec(t testing.TB, url, query string, args ...any) {
	t.Helper()
	freshdb.Exec(t, url, query, args...)
}

// Count runs a query that returns one number (SELECT COUNT(*) ...)
// against the database of url, for a test that checks a state no API shows.
func Count(t testing.TB, url, query string, args ...any) int {
	t.Helper()
	return freshdb.Count(t, url, query, args...)
}
