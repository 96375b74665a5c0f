// Package freshdb gives tests a database of their own, made when the test
// asks for it and dropped when it ends: a SQLite file in the test's
// temporary directory, or a database on the PostgreSQL server named by
// SWITCHBOARD_TEST_POSTGRES. It is what internal/dbtest is made of, for the
// one package that cannot import dbtest: sqlstore's own tests (dbtest
// imports sqlstore for its migrations).
//
// A migrated database is a copy of a template that the test binary migrates
// once, with the Migrator it is given: migrating from scratch takes 1.5 s
// and more on PostgreSQL, copying a template a tenth of that. An empty
// database (EmptySQLite, EmptyPostgres) is for the tests of the migrations
// themselves, which must migrate from scratch.
//
// On PostgreSQL each test binary names its databases sbtest_<random>_...
// and holds a session advisory lock (in the server's database of
// SWITCHBOARD_TEST_POSTGRES) on that name for as long as it runs. A binary
// that makes its template first drops the databases of binaries that hold
// no lock any more: those that ended, whose templates nothing drops
// otherwise (a test binary has no hook at its end), and those that died
// before their tests' cleanups ran. Copying a template needs no other
// session on it: the template is connected to only while it is made, under
// the binary's sync.Once.
package freshdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	_ "github.com/mattn/go-sqlite3"    // driver "sqlite3"
)

// PostgresEnv names the variable holding a PostgreSQL URL for tests, e.g.
// postgres://127.0.0.1:5432/test?sslmode=disable. .ci/run sets it. Its role
// must be allowed to create databases.
const PostgresEnv = "SWITCHBOARD_TEST_POSTGRES"

// Schema is the schema of the tables in a migrated PostgreSQL database:
// its URL's search_path names it, so that the tests keep running the store
// on a schema other than public, as an operator's search_path has it.
const Schema = "sbtest"

// Migrator migrates the database at url (sqlite:PATH or postgres://...)
// to the newest schema.
type Migrator func(ctx context.Context, url string) error

// Source makes migrated databases from templates it migrates once.
type Source struct {
	migrate Migrator

	sqliteOnce sync.Once
	sqliteFile []byte // the migrated SQLite file
	sqliteErr  error

	pgOnce sync.Once
	pgName string // the template database
	pgErr  error
}

// New returns a Source whose templates migrate runs.
func New(migrate Migrator) *Source { return &Source{migrate: migrate} }

// SQLite returns the URL of a migrated SQLite file in the test's temporary
// directory.
func (s *Source) SQLite(t testing.TB) string {
	t.Helper()
	s.sqliteOnce.Do(func() { s.sqliteFile, s.sqliteErr = s.sqliteTemplate() })
	if s.sqliteErr != nil {
		t.Fatalf("the SQLite template: %v", s.sqliteErr)
	}
	path := filepath.Join(t.TempDir(), "switchboard.db")
	if err := os.WriteFile(path, s.sqliteFile, 0o600); err != nil {
		t.Fatal(err)
	}
	return "sqlite:" + path
}

// sqliteTemplate migrates a new file and returns its bytes, the WAL copied
// into it.
func (s *Source) sqliteTemplate() ([]byte, error) {
	dir, err := os.MkdirTemp("", "freshdb-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "switchboard.db")
	if err := s.migrate(context.Background(), "sqlite:"+path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		return nil, err
	}
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	if err := errors.Join(err, db.Close()); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// EmptySQLite returns the URL of a SQLite file in the test's temporary
// directory that does not exist yet.
func EmptySQLite(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "switchboard.db")
}

// Postgres creates a database of the test's own, a copy of the migrated
// template, drops it when the test ends, and returns its URL (search_path
// Schema).
func (s *Source) Postgres(t testing.TB) string {
	t.Helper()
	admin := server(t)
	s.pgOnce.Do(func() { s.pgName, s.pgErr = s.postgresTemplate(admin) })
	if s.pgErr != nil {
		t.Fatalf("the PostgreSQL template: %v", s.pgErr)
	}
	name := fmt.Sprintf("%s_%d", owner.name, owner.seq.Add(1))
	if _, err := admin.db.Exec(`CREATE DATABASE ` + name + ` TEMPLATE ` + s.pgName); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.db.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return admin.url(name, Schema)
}

// postgresTemplate makes the binary's template: a new database with the
// schema Schema, migrated.
func (s *Source) postgresTemplate(admin *pgServer) (string, error) {
	claimOnce.Do(func() { claimErr = claim(admin) })
	if claimErr != nil {
		return "", claimErr
	}
	name := fmt.Sprintf("%s_%d", owner.name, owner.seq.Add(1))
	if _, err := admin.db.Exec(`CREATE DATABASE ` + name + ` TEMPLATE template0`); err != nil {
		return "", fmt.Errorf("create database (the role of %s must be allowed to): %w", PostgresEnv, err)
	}
	tmpl, err := sql.Open("pgx", admin.url(name, ""))
	if err != nil {
		return "", err
	}
	_, err = tmpl.Exec(`CREATE SCHEMA ` + Schema)
	if err := errors.Join(err, tmpl.Close()); err != nil {
		return "", err
	}
	if err := s.migrate(context.Background(), admin.url(name, Schema)); err != nil {
		return "", err
	}
	return name, nil
}

// EmptyPostgres creates a schema of the test's own in the database of
// SWITCHBOARD_TEST_POSTGRES, drops it when the test ends, and returns a URL
// whose search_path points at it.
func EmptyPostgres(t testing.TB) string {
	t.Helper()
	admin := server(t)
	schema := "sbtest_" + randomHex(6)
	if _, err := admin.db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	return admin.url("", schema)
}

// ForEach runs fn once on a SQLite database and once on a PostgreSQL one,
// made by sqlite and postgres, in parallel subtests named "sqlite" and
// "postgres".
func ForEach(t *testing.T, sqlite, postgres func(testing.TB) string, fn func(t *testing.T, url string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, sqlite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, postgres(t))
	})
}

// pgServer is the PostgreSQL server of SWITCHBOARD_TEST_POSTGRES: a pool
// on its database, shared by the binary's tests, which is never closed.
type pgServer struct {
	base *url.URL
	db   *sql.DB
}

// url returns the URL of database (the base URL's when empty) with
// search_path schema (none when empty).
func (p *pgServer) url(database, schema string) string {
	u := *p.base
	if database != "" {
		u.Path = "/" + database
	}
	if schema != "" {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

var (
	serverOnce sync.Once
	serverPool *pgServer
	serverErr  error
)

// server returns the server of SWITCHBOARD_TEST_POSTGRES; it skips the
// test, saying why, when the variable is unset.
func server(t testing.TB) *pgServer {
	t.Helper()
	base := os.Getenv(PostgresEnv)
	if base == "" {
		t.Skipf("%s is not set: skipping the PostgreSQL run (set it to e.g. postgres://127.0.0.1:5432/test?sslmode=disable)", PostgresEnv)
	}
	serverOnce.Do(func() {
		u, err := url.Parse(base)
		if err != nil || !strings.HasPrefix(u.Scheme, "postgres") {
			serverErr = fmt.Errorf("%s is not a postgres:// URL", PostgresEnv)
			return
		}
		db, err := sql.Open("pgx", base)
		if err != nil {
			serverErr = err
			return
		}
		db.SetMaxIdleConns(4)
		serverPool = &pgServer{base: u, db: db}
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return serverPool
}

// owner is this binary's claim on the names sbtest_<random>_...: a
// connection holding the session advisory lock of the prefix, kept until
// the process ends.
var owner struct {
	name string
	conn *sql.Conn
	seq  atomic.Int64
}

var (
	claimOnce sync.Once
	claimErr  error
)

// lockClass is the first key of the advisory locks on binaries' names.
const lockClass = 0x53424454 // "SBDT"

// lockKey is the second key of the advisory lock on the prefix name.
func lockKey(name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int32(h.Sum32())
}

// prefixLen is the length of a binary's prefix: sbtest_ and 12 hex digits.
const prefixLen = len("sbtest_") + 12

// claim takes a name for this binary's databases, holding its lock, and
// drops the databases of binaries that no longer hold theirs.
func claim(admin *pgServer) error {
	ctx := context.Background()
	conn, err := admin.db.Conn(ctx)
	if err != nil {
		return err
	}
	for {
		name := "sbtest_" + randomHex(6)
		var ok bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockClass, lockKey(name)).Scan(&ok); err != nil {
			conn.Close()
			return err
		}
		if ok {
			owner.name, owner.conn = name, conn
			break
		}
	}
	return sweep(ctx, conn)
}

// sweep drops, from conn, the databases of the binaries that no longer
// hold the lock on their prefix, other than this binary's.
func sweep(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'sbtest\_%' ORDER BY datname`)
	if err != nil {
		return err
	}
	byPrefix := map[string][]string{}
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			rows.Close()
			return err
		}
		if len(d) > prefixLen && d[prefixLen] == '_' && d[:prefixLen] != owner.name {
			byPrefix[d[:prefixLen]] = append(byPrefix[d[:prefixLen]], d)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for prefix, dbs := range byPrefix {
		var free bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockClass, lockKey(prefix)).Scan(&free); err != nil {
			return err
		}
		if !free {
			continue // its binary is running
		}
		for _, d := range dbs {
			if _, err := conn.ExecContext(ctx, `DROP DATABASE IF EXISTS `+d+` WITH (FORCE)`); err != nil {
				return fmt.Errorf("drop the database %s a test binary left: %w", d, err)
			}
		}
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1, $2)`, lockClass, lockKey(prefix)); err != nil {
			return err
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
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
