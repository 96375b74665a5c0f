package sqlstore

import (
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

func testPhone(tenantID, number, kind string) *sb.Phone {
	return &sb.Phone{ID: sb.NewID(), TenantID: tenantID, Number: number, Kind: kind, Channels: []string{sb.ChannelSMS},
		Status: sb.PhoneOnline, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

// TestPhoneNumbersPerTenant: an android phone's number is unique within its
// tenant only, so one tenant cannot hold a number against another (nor
// learn that another has it); carrier and simulated numbers stay unique
// among all tenants; a tenant adding its own phones is held to its plan's
// cap, also when it adds them at once.
func TestPhoneNumbersPerTenant(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		a, b := newTestTenant(t, db, "scale"), newTestTenant(t, db, "scale")
		const num = "+15550001234"
		first := testPhone(a.ID, num, sb.PhoneAndroid)
		if err := db.AddTenantPhone(bg, first, nil, 0); err != nil {
			t.Fatal(err)
		}
		err := db.AddTenantPhone(bg, testPhone(a.ID, num, sb.PhoneAndroid), nil, 0)
		if e, ok := err.(*sb.Error); !ok || e.Code != sb.CodeDuplicatePhone || e.Details["existing_id"] != first.ID {
			t.Errorf("the same number twice in a tenant: %v", err)
		}
		if err := db.AddTenantPhone(bg, testPhone(b.ID, num, sb.PhoneAndroid), nil, 0); err != nil {
			t.Errorf("another tenant's android phone with the number: %v", err)
		}
		// The operator gives tenant b the number at a carrier, and a
		// simulated phone: the android phones do not stand in the way.
		carrier := testPhone(b.ID, "+15550009999", sb.PhoneSMPP)
		carrier.Link = "smsc"
		if err := db.AddPhone(bg, carrier, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.AddPhone(bg, testPhone(a.ID, "+15550001111", sb.PhoneSimulated), nil); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*sb.Phone{testPhone(a.ID, "+15550009999", sb.PhoneSimulated), testPhone(b.ID, "+15550001111", sb.PhoneSimulated)} {
			err := db.AddPhone(bg, p, nil)
			if e, ok := err.(*sb.Error); !ok || e.Code != sb.CodeDuplicatePhone || e.Details != nil {
				t.Errorf("a carrier or simulated number of another tenant: %v, want DUPLICATE_PHONE naming none", err)
			}
		}
		// The database holds the rules too.
		if _, err := db.exec(bg, `INSERT INTO phones (id, tenant_id, number, kind, channels, status, created_at) VALUES (?, ?, ?, 'simulated', 'sms', 'online', 0)`,
			sb.NewID(), a.ID, "+15550009999"); !isUniqueViolation(err) {
			t.Errorf("a second simulated phone with a carrier's number, inserted directly: %v", err)
		}

		// The cap: c holds 5 at most; 8 added at once make 5.
		c := newTestTenant(t, db, "scale")
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				errs <- db.AddTenantPhone(bg, testPhone(c.ID, fmt.Sprintf("+1555000200%d", i), sb.PhoneAndroid), nil, 5)
			})
		}
		wg.Wait()
		close(errs)
		capped := 0
		for err := range errs {
			if e, ok := err.(*sb.Error); ok && e.Code == sb.CodeValidation && strings.Contains(e.Message, "5") {
				capped++
			} else if err != nil {
				t.Errorf("adding at the cap: %v", err)
			}
		}
		if ps, _ := db.Phones(bg, c.ID, sb.Live); len(ps) != 5 || capped != 3 {
			t.Errorf("%d phones and %d refused at a cap of 5, want 5 and 3", len(ps), capped)
		}
		if err := db.AddPhone(bg, testPhone(c.ID, "+15550002999", sb.PhoneSimulated), nil); err != nil {
			t.Errorf("the operator's phone add past the tenant's cap: %v", err)
		}
	})
}

// TestMigrationPhoneNumbers: migration 0031 on SQLite makes the phones
// table again without the UNIQUE of its number: every row and column, and
// every index, are kept.
func TestMigrationPhoneNumbers(t *testing.T) {
	url := emptySQLiteURL(t)
	path := strings.TrimPrefix(url, "sqlite:")
	raw, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=on")
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`)
	ms, err := (&DB{dialect: SQLite}).migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version >= 31 {
			break
		}
		exec(m.sql)
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, m.version, m.name)
	}
	exec(`INSERT INTO tenants (id, name, plan, status, trial_ends_at, created_at) VALUES ('t1', 'n', 'scale', 'active', 0, 0), ('t2', 'n', 'scale', 'active', 0, 0)`)
	exec(`INSERT INTO phones (id, tenant_id, number, kind, channels, status, created_at, daily_limit, device_id, device_name, token_hash, link)
		VALUES ('p1', 't1', '+15550000001', 'android', 'sms', 'online', 7, 500, 'dev1', 'Pixel', 'th1', NULL),
		       ('p2', 't1', '+15550000002', 'smpp', 'sms', 'online', 8, NULL, NULL, NULL, NULL, 'smsc')`)
	var before []string
	rows, _ := raw.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'phones' AND sql IS NOT NULL ORDER BY name`)
	for rows.Next() {
		var n string
		rows.Scan(&n)
		before = append(before, n)
	}
	rows.Close()
	raw.Close()

	db := openTestDB(t, url)
	var name, link sql.NullString
	var limit sql.NullInt64
	var created int64
	if err := db.queryRow(bg, `SELECT device_name, daily_limit, created_at, link FROM phones WHERE id = 'p1'`).Scan(&name, &limit, &created, &link); err != nil ||
		name.String != "Pixel" || limit.Int64 != 500 || created != 7 || link.Valid {
		t.Errorf("p1 after the migration: %v %v %v %v %v", name, limit, created, link, err)
	}
	var n int
	db.queryRow(bg, `SELECT COUNT(*) FROM phones`).Scan(&n)
	if n != 2 {
		t.Errorf("%d phones after the migration, want 2", n)
	}
	var after []string
	rows, _ = db.query(bg, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'phones' AND sql IS NOT NULL ORDER BY name`)
	for rows.Next() {
		var n string
		rows.Scan(&n)
		after = append(after, n)
	}
	rows.Close()
	for _, want := range append(before, "phones_tenant_number", "phones_number") {
		if !strings.Contains(strings.Join(after, " ")+" ", want+" ") {
			t.Errorf("index %s missing after the migration: %v", want, after)
		}
	}
	if err := db.AddPhone(bg, testPhone("t2", "+15550000001", sb.PhoneAndroid), nil); err != nil {
		t.Errorf("another tenant's android phone with p1's number: %v", err)
	}
}
