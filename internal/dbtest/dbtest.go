// Package dbtest gives tests a database of their own: a fresh SQLite file,
// or a fresh schema on the PostgreSQL server named by
// SWITCHBOARD_TEST_POSTGRES, dropped when the test ends. Tests that need
// PostgreSQL skip, saying why, when the variable is unset.
package dbtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	_ "github.com/mattn/go-sqlite3"    // driver "sqlite3"
)

// PostgresEnv names the variable holding a PostgreSQL URL for tests, e.g.
// postgres://127.0.0.1:5432/test?sslmode=disable. .ci/run sets it.
const PostgresEnv = "SWITCHBOARD_TEST_POSTGRES"

// SQLite returns the URL of a new SQLite file in the test's temporary
// directory.
func SQLite(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "switchboard.db")
}

// Postgres creates a schema of its own for the test, drops it when the test
// ends, and returns a URL whose search_path points at it.
func Postgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv(PostgresEnv)
	if base == "" {
		t.Skipf("%s is not set: skipping the PostgreSQL run (set it to e.g. postgres://127.0.0.1:5432/test?sslmode=disable)", PostgresEnv)
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "sbtest_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		admin.Close()
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

// ForEach runs fn once on a fresh SQLite database and once on a fresh
// PostgreSQL schema, in parallel subtests named "sqlite" and "postgres".
func ForEach(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, SQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, Postgres(t))
	})
}

// Exec runs one statement against the database of url, written with `?`
// placeholders, for a test that must set up a state no API can (a pairing
// code that expired, say).
func Exec(t testing.TB, url, query string, args ...any) {
	t.Helper()
	db, query := open(t, url, query)
	defer db.Close()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Count runs a query that returns one number (SELECT COUNT(*) ...)
// against the database of url, for a test that checks a state no API shows.
func Count(t testing.TB, url, query string, args ...any) int {
	t.Helper()
	db, query := open(t, url, query)
	defer db.Close()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// open opens the database of url with a plain driver and rebinds query's
// placeholders for it.
func open(t testing.TB, url, query string) (*sql.DB, string) {
	t.Helper()
	driver, dsn := "sqlite3", strings.TrimPrefix(url, "sqlite:")
	if strings.HasPrefix(url, "postgres") {
		driver, dsn = "pgx", url
		for n := 1; strings.Contains(query, "?"); n++ {
			query = strings.Replace(query, "?", "$"+strconv.Itoa(n), 1)
		}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return db, query
}
