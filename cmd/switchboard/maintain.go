package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/switchboard/switchboard/internal/buildinfo"
	"github.com/switchboard/switchboard/sqlstore"
)

// versionCmd is `switchboard version`: the build's version, the commit it
// was built from and the newest database schema it knows; with
// --database, also the schema version of that database (read only).
func versionCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	f := newFlags("version", getenv, stdout)
	dbURL := f.String("database", "", "also print the schema version of this database (sqlite:PATH or postgres://...; nothing is migrated)")
	f.about = "Prints the version, the commit it was built from, and the newest database schema this build knows."
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("version: unexpected argument %q", pos[0])
	}
	bi := buildinfo.Read()
	commit := bi.Commit
	if commit == "" {
		commit = "unknown"
	}
	if bi.CommitTime != "" {
		commit += " (" + bi.CommitTime + ")"
	}
	if bi.Modified {
		commit += " modified"
	}
	goVersion := bi.Go
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	fmt.Fprintf(stdout, "switchboard %s\ncommit: %s\nschema: %d\ngo: %s %s/%s\n", bi.Version, commit, sqlstore.SchemaVersion(), goVersion, runtime.GOOS, runtime.GOARCH)
	if *dbURL != "" {
		if err := checkDatabase(*dbURL); err != nil {
			return err
		}
		v, err := sqlstore.DatabaseSchema(ctx, *dbURL)
		if err != nil {
			return fmt.Errorf("version: reading the database's schema: %w", err)
		}
		fmt.Fprintf(stdout, "database schema: %d\n", v)
	}
	return nil
}

// backupCmd is `switchboard backup --to FILE`: a consistent copy of a
// SQLite database, taken while serve runs.
func backupCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	f := newFlags("backup", getenv, stdout)
	dbURL := f.database()
	to := f.String("to", "", "the file to write the copy to (required); replaced atomically when it exists")
	f.synopsis = "--to FILE"
	f.about = `Copies a SQLite database, consistently, while serve runs and sends: the copy is the database at
one instant, checked with SQLite's integrity check, in one file readable by its owner only.
Prints what it wrote as JSON. For PostgreSQL use pg_dump (docs/deploy.md).`
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if *to == "" {
		return fmt.Errorf("backup: --to is required")
	}
	if len(pos) != 0 {
		return fmt.Errorf("backup: unexpected argument %q", pos[0])
	}
	if err := checkDatabase(*dbURL); err != nil {
		return err
	}
	info, err := sqlstore.Backup(ctx, *dbURL, *to)
	if err != nil {
		return err
	}
	return printJSON(stdout, info)
}

// restoreCmd is `switchboard restore --from FILE`: a backup put back in
// place of the database, with serve stopped.
func restoreCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	f := newFlags("restore", getenv, stdout)
	dbURL := f.database()
	from := f.String("from", "", "the backup file to restore (required)")
	force := f.Bool("force", false, "replace the database when it already holds one")
	f.synopsis = "--from FILE"
	f.about = `Puts a backup made by "switchboard backup" in place of the SQLite database. Stop serve first:
restore refuses while it runs. The backup is checked before anything is replaced; a database that
already exists is replaced only with --force. The next start migrates a backup of an older version.`
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if *from == "" {
		return fmt.Errorf("restore: --from is required")
	}
	if len(pos) != 0 {
		return fmt.Errorf("restore: unexpected argument %q", pos[0])
	}
	if err := checkDatabase(*dbURL); err != nil {
		return err
	}
	info, err := sqlstore.Restore(ctx, *from, *dbURL, *force)
	if err != nil {
		return err
	}
	return printJSON(stdout, info)
}
