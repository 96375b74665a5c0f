// Package dbtest gives tests a database of their own: a SQLite file in the
// test's temporary directory, or a database on the PostgreSQL server named
// by SWITCHBOARD_TEST_POSTGRES, dropped when the test ends. Tests that need
// PostgreSQL skip, saying why, when the variable is unset.
//
// SQLite, Postgres and ForEach give databases already migrated by the
// store: copies of a template each test binary migrates once (see
// internal/freshdb). EmptySQLite, EmptyPostgres and ForEachEmpty give
// databases no migration has touched, for tests that migrate from scratch.
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

// SQLite returns the URL of a migrated SQLite file in the test's temporary
// directory.
func SQLite(t testing.TB) string {
	t.Helper()
	return templates.SQLite(t)
}

// Postgres creates a migrated database of the test's own, drops it when
// the test ends, and returns its URL (its search_path names the schema of
// the tables, freshdb.Schema).
func Postgres(t testing.TB) string {
	t.Helper()
	return templates.Postgres(t)
}

// ForEach runs fn once on a migrated SQLite database and once on a
// migrated PostgreSQL one, in parallel subtests named "sqlite" and
// "postgres".
func ForEach(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	freshdb.ForEach(t, SQLite, Postgres, fn)
}

// EmptySQLite returns the URL of a SQLite file that does not exist yet, in
// the test's temporary directory.
func EmptySQLite(t testing.TB) string { return freshdb.EmptySQLite(t) }

// EmptyPostgres creates an empty schema of the test's own, drops it when
// the test ends, and returns a URL whose search_path points at it.
func EmptyPostgres(t testing.TB) string {
	t.Helper()
	return freshdb.EmptyPostgres(t)
}

// ForEachEmpty is ForEach on databases no migration has touched.
func ForEachEmpty(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	freshdb.ForEach(t, EmptySQLite, EmptyPostgres, fn)
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
