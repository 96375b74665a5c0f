package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// postgresEnv names the variable holding a PostgreSQL URL for tests, e.g.
// postgres://127.0.0.1:5432/test?sslmode=disable. .ci/run sets it.
const postgresEnv = "SWITCHBOARD_TEST_POSTGRES"

// forEachDialect runs fn once against a fresh SQLite file and once against
// a fresh PostgreSQL schema, in parallel. The PostgreSQL run is skipped,
// saying why, when SWITCHBOARD_TEST_POSTGRES is unset.
func forEachDialect(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, testSQLiteURL(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, testPostgresURL(t))
	})
}

func testSQLiteURL(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "switchboard.db")
}

// testPostgresURL creates a schema of its own for the test, drops it when
// the test ends, and returns a URL whose search_path points at it.
func testPostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(postgresEnv)
	if base == "" {
		t.Skipf("%s is not set: skipping the PostgreSQL run (set it to e.g. postgres://127.0.0.1:5432/test?sslmode=disable)", postgresEnv)
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "sbstore_" + hex.EncodeToString(b[:])
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
