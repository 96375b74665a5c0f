package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
)

// ErrBackupPostgres refuses a backup or restore of a PostgreSQL database:
// pg_dump and pg_restore do that (docs/deploy.md).
var ErrBackupPostgres = errors.New("backup and restore copy SQLite databases: for PostgreSQL use pg_dump and pg_restore (see docs/deploy.md)")

// BackupInfo describes a backup file.
type BackupInfo struct {
	File          string `json:"file"`
	Bytes         int64  `json:"bytes"`
	SchemaVersion int    `json:"schema_version"`
	// Messages counts the messages the backup holds.
	Messages int64 `json:"messages"`
	// TookMS is how long the copy took.
	TookMS int64 `json:"took_ms"`
}

// Backup writes a consistent copy of the SQLite database at url to the file
// to, through SQLite's online backup API: the copy is the database as it
// was at one instant, whatever `serve` and the operator commands write
// meanwhile, and they are not held up (in WAL mode a reader blocks no
// writer). The copy is one self-contained file (rollback-journal mode, no
// -wal beside it), readable by its owner only, checked with SQLite's
// integrity check before it replaces `to` (atomically, by rename): a
// failed backup never leaves a half-written file under that name.
func Backup(ctx context.Context, url, to string) (*BackupInfo, error) {
	path, err := sqlitePath(url)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	start := time.Now()
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), filepath.Base(to)+".tmp-*")
	if err != nil {
		return nil, err
	}
	tmp.Close() // created 0600
	defer os.Remove(tmp.Name())
	if err := copySQLite(ctx, "file:"+path+"?_busy_timeout=10000", "file:"+tmp.Name()); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	info, err := checkBackup(ctx, tmp.Name())
	if err != nil {
		return nil, fmt.Errorf("backup: the copy: %w", err)
	}
	if err := syncFile(tmp.Name()); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), to); err != nil {
		return nil, err
	}
	if err := syncFile(filepath.Dir(to)); err != nil {
		return nil, err
	}
	st, err := os.Stat(to)
	if err != nil {
		return nil, err
	}
	info.File, info.Bytes, info.TookMS = to, st.Size(), time.Since(start).Milliseconds()
	return info, nil
}

// Restore puts the backup file from in place of the SQLite database at url,
// through the same backup API (so that a process that has the database open
// sees the new content, never a torn file). It refuses a file that is not a
// sound Switchboard database, or one a newer build wrote; and, unless
// force, a destination that already holds a Switchboard database. It holds
// the database's lock (see LockSQLite) throughout: serve must be stopped.
// The next Open migrates the restored database if it is older than this
// build.
func Restore(ctx context.Context, from, url string, force bool) (*BackupInfo, error) {
	path, err := sqlitePath(url)
	if err != nil {
		return nil, err
	}
	release, err := LockSQLite(url)
	if err != nil {
		return nil, err
	}
	defer release()
	info, err := checkBackup(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("restore: %s: %w", from, err)
	}
	if !force {
		if v, err := DatabaseSchema(ctx, url); err == nil && v > 0 {
			return nil, fmt.Errorf("restore: %s already holds a Switchboard database (schema version %d): pass --force to replace it", path, v)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := privateFiles(path); err != nil {
		return nil, err
	}
	if err := copySQLite(ctx, "file:"+from+"?mode=ro", "file:"+path+"?_busy_timeout=10000"); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	info.File = path
	if st, err := os.Stat(path); err == nil {
		info.Bytes = st.Size()
	}
	return info, nil
}

func sqlitePath(url string) (string, error) {
	if err := CheckURL(url); err != nil {
		return "", err
	}
	path, ok := strings.CutPrefix(url, "sqlite:")
	if !ok {
		return "", ErrBackupPostgres
	}
	return path, nil
}

// copySQLite copies the database at the DSN src into the one at dst with
// the online backup API: all pages in one step, under one read transaction
// of src, so the copy is of one instant. A step that finds src busy (a
// checkpoint truncating the WAL) is tried again. dst ends in
// rollback-journal mode: one file.
func copySQLite(ctx context.Context, src, dst string) error {
	srcDB, err := sql.Open("sqlite3", src)
	if err != nil {
		return err
	}
	defer srcDB.Close()
	dstDB, err := sql.Open("sqlite3", dst)
	if err != nil {
		return err
	}
	defer dstDB.Close()
	sc, err := srcDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer sc.Close()
	dc, err := dstDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer dc.Close()
	err = dc.Raw(func(d any) error {
		return sc.Raw(func(s any) error {
			b, err := d.(*sqlite3.SQLiteConn).Backup("main", s.(*sqlite3.SQLiteConn), "main")
			if err != nil {
				return err
			}
			for {
				done, err := b.Step(-1)
				if err != nil || done {
					return errors.Join(err, b.Finish())
				}
				select {
				case <-ctx.Done():
					return errors.Join(ctx.Err(), b.Finish())
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	})
	if err != nil {
		return err
	}
	_, err = dc.ExecContext(ctx, `PRAGMA journal_mode = DELETE`)
	return err
}

// checkBackup runs SQLite's integrity check on the database file at path
// and returns what it holds; a file that is not a Switchboard database, or
// that a newer build migrated, is an error.
func checkBackup(ctx context.Context, path string) (*BackupInfo, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check(1)`).Scan(&check); err != nil {
		return nil, fmt.Errorf("not a SQLite database: %w", err)
	}
	if check != "ok" {
		return nil, fmt.Errorf("SQLite's integrity check failed: %s", check)
	}
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, errors.New("not a Switchboard database (no schema_migrations table)")
	}
	var applied []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		applied = append(applied, v)
	}
	rows.Close()
	if err := (&DB{dialect: SQLite}).checkSchema(applied); err != nil {
		return nil, err
	}
	info := &BackupInfo{}
	for _, v := range applied {
		info.SchemaVersion = max(info.SchemaVersion, v)
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages`).Scan(&info.Messages); err != nil {
		return nil, fmt.Errorf("not a Switchboard database: %w", err)
	}
	return info, nil
}

// syncFile flushes the file or directory at path to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
