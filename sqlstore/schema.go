package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/switchboard/switchboard/internal/buildinfo"
)

// SchemaVersion is the newest schema this build knows: the number of its
// latest migration. It means the same on SQLite and PostgreSQL: a
// migration for one dialect only is recorded on the other as done.
func SchemaVersion() int {
	entries, _ := fs.ReadDir(migrationFS, "migrations")
	v := 0
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0]); err == nil {
			v = max(v, n)
		}
	}
	return v
}

// NewerSchemaError refuses a database that a newer build migrated: this
// build does not know the tables and rules that migration made, so it must
// not write to it.
type NewerSchemaError struct {
	// Database is the newest migration the database has; Known the newest
	// this build knows.
	Database, Known int
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("the database's schema is version %d, newer than the %d of this build (switchboard %s): a newer Switchboard migrated it; "+
		"run that version or a later one (to go back, restore the backup taken before the upgrade)", e.Database, e.Known, buildinfo.Read().Short())
}

// checkSchema refuses (with *NewerSchemaError) a database holding a
// migration this build does not have. applied lists the database's
// migration versions.
func (db *DB) checkSchema(applied []int) error {
	ms, err := db.migrations()
	if err != nil {
		return err
	}
	known := map[int]bool{}
	for _, m := range ms {
		known[m.version] = true
	}
	newest := 0
	for _, v := range applied {
		if !known[v] {
			newest = max(newest, v)
		}
	}
	if newest == 0 {
		return nil
	}
	return &NewerSchemaError{Database: newest, Known: SchemaVersion()}
}

// appliedMigrations lists the versions in schema_migrations.
func (t *Tx) appliedMigrations(ctx context.Context) ([]int, error) {
	rows, err := t.query(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// DatabaseSchema returns the newest migration applied to the database at
// url, without migrating or changing anything (0 for a database no
// Switchboard has opened yet). A SQLite file that does not exist is an
// error.
func DatabaseSchema(ctx context.Context, url string) (int, error) {
	if err := CheckURL(url); err != nil {
		return 0, err
	}
	driver, dsn := "pgx", url
	if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
		if _, err := os.Stat(path); err != nil {
			return 0, fmt.Errorf("sqlite: %w", err)
		}
		driver, dsn = "sqlite3", "file:"+path+"?mode=ro&_busy_timeout=10000"
	}
	conn, err := sql.Open(driver, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var exists bool
	q := `SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`
	if driver == "pgx" {
		q = `SELECT to_regclass('schema_migrations') IS NOT NULL`
	}
	if err := conn.QueryRowContext(ctx, q).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}

// IsNewerSchema reports whether err refuses a database a newer build
// migrated.
func IsNewerSchema(err error) bool {
	var e *NewerSchemaError
	return errors.As(err, &e)
}

// Migrate applies the pending migrations to the database at url (see
// CheckURL) and closes it, doing nothing else Open does: it starts no
// writer and stores no pairing key. The tests migrate their template
// databases with it, once per test binary, and copy them for each test.
func Migrate(ctx context.Context, url string) error {
	if err := CheckURL(url); err != nil {
		return err
	}
	var db *DB
	var err error
	if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
		db, err = openSQLite(path)
	} else {
		opt := Options{}
		opt.defaults()
		db, err = openPostgres(url, opt)
	}
	if err != nil {
		return err
	}
	return errors.Join(db.migrate(ctx), db.Close())
}
