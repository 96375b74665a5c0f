package freshdb

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// migrateProbe is a Migrator that makes one table and counts its runs.
func migrateProbe(runs *atomic.Int64) Migrator {
	return func(ctx context.Context, url string) error {
		runs.Add(1)
		driver, dsn := "pgx", url
		if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
			driver, dsn = "sqlite3", "file:"+path+"?_journal_mode=WAL"
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, `CREATE TABLE probe (n INTEGER)`)
		return err
	}
}

// TestSQLiteCopies: every test gets a file of its own holding what the
// migrator made, which it ran once for all of them; what one test writes
// the next does not see.
func TestSQLiteCopies(t *testing.T) {
	var runs atomic.Int64
	src := New(migrateProbe(&runs))
	var first string
	t.Run("first", func(t *testing.T) {
		first = src.SQLite(t)
		Exec(t, first, `INSERT INTO probe (n) VALUES (1)`)
		if n := Count(t, first, `SELECT COUNT(*) FROM probe`); n != 1 {
			t.Errorf("%d rows", n)
		}
	})
	if _, err := os.Stat(strings.TrimPrefix(first, "sqlite:")); !os.IsNotExist(err) {
		t.Errorf("the first test's file outlived it: %v", err)
	}
	t.Run("second", func(t *testing.T) {
		second := src.SQLite(t)
		if second == first {
			t.Errorf("the second test got the first one's file %s", second)
		}
		if n := Count(t, second, `SELECT COUNT(*) FROM probe`); n != 0 {
			t.Errorf("the second test's file has the first one's %d rows", n)
		}
	})
	if n := runs.Load(); n != 1 {
		t.Errorf("the migrator ran %d times, want once", n)
	}
	empty := EmptySQLite(t)
	if _, err := os.Stat(strings.TrimPrefix(empty, "sqlite:")); !os.IsNotExist(err) {
		t.Errorf("EmptySQLite's file exists: %v", err)
	}
}

// TestPostgresCopies: every test gets a database of its own, a copy of the
// template the migrator made once, on the schema Schema, dropped when the
// test ends; an empty schema has no table.
func TestPostgresCopies(t *testing.T) {
	admin := server(t)
	var runs atomic.Int64
	src := New(migrateProbe(&runs))
	var first string
	t.Run("first", func(t *testing.T) {
		first = src.Postgres(t)
		Exec(t, first, `INSERT INTO probe (n) VALUES (1)`)
		if n := Count(t, first, `SELECT COUNT(*) FROM probe`); n != 1 {
			t.Errorf("%d rows", n)
		}
		if n := Count(t, first, `SELECT COUNT(*) FROM pg_tables WHERE tablename = 'probe' AND schemaname = ?`, Schema); n != 1 {
			t.Errorf("the probe table is not in the schema %s", Schema)
		}
	})
	u, err := url.Parse(first)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	var n int
	if err := admin.db.QueryRow(`SELECT COUNT(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil || n != 0 {
		t.Errorf("the first test's database %s outlived it: %d %v", name, n, err)
	}
	t.Run("second", func(t *testing.T) {
		second := src.Postgres(t)
		if second == first {
			t.Errorf("the second test got the first one's database %s", second)
		}
		if n := Count(t, second, `SELECT COUNT(*) FROM probe`); n != 0 {
			t.Errorf("the second test's database has the first one's %d rows", n)
		}
	})
	if n := runs.Load(); n != 1 {
		t.Errorf("the migrator ran %d times, want once", n)
	}
	empty := EmptyPostgres(t)
	if n := Count(t, empty, `SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()`); n != 0 {
		t.Errorf("EmptyPostgres's schema has %d tables", n)
	}
}

// TestSweep: the databases of a binary that holds no lock on its prefix any
// more are dropped; those of one that does, and this binary's, are kept.
func TestSweep(t *testing.T) {
	admin := server(t)
	src := New(migrateProbe(new(atomic.Int64)))
	mine := src.Postgres(t) // claims this binary's prefix
	ctx := context.Background()
	dead, live := "sbtest_"+randomHex(6), "sbtest_"+randomHex(6)
	holder, err := admin.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_lock($1, $2)`, lockClass, lockKey(live)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dead + "_1", dead + "_2", live + "_1"} {
		if _, err := admin.db.Exec(`CREATE DATABASE ` + d); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.db.Exec(`DROP DATABASE IF EXISTS ` + d + ` WITH (FORCE)`) })
	}
	conn, err := admin.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := sweep(ctx, conn); err != nil {
		t.Fatal(err)
	}
	exists := func(d string) bool {
		var n int
		if err := admin.db.QueryRow(`SELECT COUNT(*) FROM pg_database WHERE datname = $1`, d).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	for _, d := range []string{dead + "_1", dead + "_2"} {
		if exists(d) {
			t.Errorf("%s of a binary that ended was kept", d)
		}
	}
	if !exists(live + "_1") {
		t.Errorf("%s of a running binary was dropped", live+"_1")
	}
	if !exists(src.pgName) || Count(t, mine, `SELECT COUNT(*) FROM probe`) != 0 {
		t.Errorf("this binary's databases were dropped")
	}
}
