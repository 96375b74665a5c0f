package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// Migration 0006 rebuilds SQLite's hot tables WITHOUT ROWID: a database
// made by the earlier migrations keeps every row, and its tables come out
// stored by their primary key.
func TestMigrationWithoutRowidKeepsRows(t *testing.T) {
	ctx := context.Background()
	url := emptySQLiteURL(t)
	path := strings.TrimPrefix(url, "sqlite:")
	raw, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=on")
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`)
	ms, err := (&DB{dialect: SQLite}).migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version >= 6 {
			break
		}
		exec(m.sql)
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, m.version, m.name)
	}
	exec(`INSERT INTO tenants (id, name, plan, status, trial_ends_at, created_at) VALUES ('t1', 'n', 'scale', 'active', 0, 0)`)
	exec(`INSERT INTO messages (id, tenant_id, environment, direction, from_number, to_number, body, channel, status, created_at, run_at, attempts)
		VALUES ('m1', 't1', 'live', 'outbound', '+15550000001', '+15005550000', 'hello', 'sms', 'queued', 1, 5, 2)`)
	exec(`INSERT INTO recipients (tenant_id, environment, number, opted_out, phone_id, first_seen_at, updated_at) VALUES ('t1', 'live', '+15005550000', 1, 'p1', 1, 2)`)
	exec(`INSERT INTO daily_counters (tenant_id, environment, counter, day, n) VALUES ('t1', 'live', 'new_contacts', '2026-11-21', 3)`)
	raw.Close()

	db := openTestDB(t, url)
	var body string
	var runAt, attempts int64
	if err := db.queryRow(ctx, `SELECT body, run_at, attempts FROM messages WHERE id = 'm1'`).Scan(&body, &runAt, &attempts); err != nil ||
		body != "hello" || runAt != 5 || attempts != 2 {
		t.Errorf("message after the migration: %q %d %d %v", body, runAt, attempts, err)
	}
	if known, opted, err := db.Recipient(ctx, "t1", "live", "+15005550000"); err != nil || !known || !opted {
		t.Errorf("recipient after the migration: known %v, opted out %v, %v", known, opted, err)
	}
	if n, err := db.NewContactsToday(ctx, "t1", "live", "2026-11-21"); err != nil || n != 3 {
		t.Errorf("counter after the migration: %d %v", n, err)
	}
	for _, table := range []string{"messages", "recipients", "daily_counters"} {
		var withoutRowid bool
		if err := db.queryRow(ctx, `SELECT wr FROM pragma_table_list WHERE name = ?`, table).Scan(&withoutRowid); err != nil || !withoutRowid {
			t.Errorf("%s: WITHOUT ROWID %v, %v", table, withoutRowid, err)
		}
	}
}

// Every embedded migration has a version of its own in each dialect: a
// second file of one version would be taken as applied and skipped.
func TestMigrationVersionsUnique(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		ms, err := (&DB{dialect: d}).migrations()
		if err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		for i := 1; i < len(ms); i++ {
			if ms[i].version <= ms[i-1].version {
				t.Errorf("%v: %s after %s", d, ms[i].name, ms[i-1].name)
			}
		}
	}
}
