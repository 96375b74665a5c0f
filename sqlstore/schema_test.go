package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard/switchboard/internal/freshdb"
)

// TestRefuseNewerSchema: a database that holds a migration this build does
// not know (a newer build migrated it) is refused, in one line naming both
// schema versions, before anything is written: not even a migration this
// build has and the database lacks is applied.
func TestRefuseNewerSchema(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		known := SchemaVersion()
		if _, err := db.exec(ctx, `DELETE FROM schema_migrations WHERE version = ?`, known); err != nil {
			t.Fatal(err)
		}
		if _, err := db.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from_the_future.sql', 0)`, known+1); err != nil {
			t.Fatal(err)
		}
		db.Close()

		_, err = Open(ctx, url)
		var newer *NewerSchemaError
		if !errors.As(err, &newer) || newer.Database != known+1 || newer.Known != known {
			t.Fatalf("open a database of schema %d with a build of %d: %v", known+1, known, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, fmt.Sprintf("version %d, newer than the %d of this build", known+1, known)) {
			t.Errorf("the refusal: %q", msg)
		}
		if v, err := DatabaseSchema(ctx, url); err != nil || v != known+1 {
			t.Errorf("DatabaseSchema: %d, %v", v, err)
		}
		if n := freshdb.Count(t, url, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, known); n != 0 {
			t.Errorf("the refused open applied migration %d", known)
		}
	})
}

// TestMigrationsOnceAcrossNodes: nodes starting at once on a new
// PostgreSQL database all start, and each migration is applied once.
func TestMigrationsOnceAcrossNodes(t *testing.T) {
	t.Parallel()
	url := emptyPostgresURL(t)
	ctx := context.Background()
	const nodes = 4
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	dbs := make([]*DB, nodes)
	start := make(chan struct{})
	for i := range nodes {
		wg.Go(func() {
			<-start
			dbs[i], errs[i] = Open(ctx, url)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
		} else {
			defer dbs[i].Close()
		}
	}
	ms, err := (&DB{dialect: Postgres}).migrations()
	if err != nil {
		t.Fatal(err)
	}
	rows := freshdb.Count(t, url, `SELECT COUNT(*) FROM schema_migrations`)
	versions := freshdb.Count(t, url, `SELECT COUNT(DISTINCT version) FROM schema_migrations`)
	newest := freshdb.Count(t, url, `SELECT MAX(version) FROM schema_migrations`)
	if rows != len(ms) || versions != len(ms) || newest != SchemaVersion() {
		t.Errorf("schema_migrations: %d rows, %d versions, newest %d; want %d of each, newest %d", rows, versions, newest, len(ms), SchemaVersion())
	}
}

// TestMigrate: Migrate brings a new database to this build's schema and
// does nothing else Open does: no pairing key is stored.
func TestMigrate(t *testing.T) {
	forEachEmpty(t, func(t *testing.T, url string) {
		ctx := context.Background()
		if err := Migrate(ctx, url); err != nil {
			t.Fatal(err)
		}
		if v, err := DatabaseSchema(ctx, url); err != nil || v != SchemaVersion() {
			t.Errorf("DatabaseSchema after Migrate: %d, %v; want %d", v, err, SchemaVersion())
		}
		if n := freshdb.Count(t, url, `SELECT COUNT(*) FROM server_secrets`); n != 0 {
			t.Errorf("Migrate stored %d server secrets", n)
		}
		if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
			if _, err := os.Stat(path + ".pairing-key"); !os.IsNotExist(err) {
				t.Errorf("Migrate made the pairing key file: %v", err)
			}
		}
	})
}
