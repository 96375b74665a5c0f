package sqlstore

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// addPairingPhone stores an android phone of a new tenant with a live code
// and returns its id and the code.
func addPairingPhone(t *testing.T, db *DB) (string, string) {
	t.Helper()
	tn := newTestTenant(t, db, "scale")
	now := time.Now().UTC().Truncate(time.Microsecond)
	pr, err := sb.NewPairing(now)
	if err != nil {
		t.Fatal(err)
	}
	ph := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: fmt.Sprintf("+1415%07d", now.UnixNano()%1e7), Kind: sb.PhoneAndroid,
		Channels: []string{sb.ChannelSMS}, Status: sb.PhoneOnline, CreatedAt: now}
	if err := db.AddPhone(bg, ph, pr); err != nil {
		t.Fatal(err)
	}
	return ph.ID, pr.Code
}

func pairWith(db *DB, code string) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	_, err := db.PairDevice(bg, code, &sb.Device{ID: sb.NewID(), Name: "d", PairedAt: now},
		sb.DeviceCredentials{Token: sb.NewID(), InboundSecret: sb.NewID()}, now)
	return err
}

// TestPairingCodeStoredKeyed: a pairing code is stored as its HMAC keyed
// with the server's key, not as the SHA-256 that anyone with the database
// could reverse by trying 10^8 codes; it pairs by its code.
func TestPairingCodeStoredKeyed(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		id, code := addPairingPhone(t, db)
		var stored string
		if err := db.queryRow(bg, `SELECT pairing_hash FROM phones WHERE id = ?`, id).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		bare := sha256.Sum256([]byte(code))
		if stored == hex.EncodeToString(bare[:]) || stored != sb.HashPairingCode(db.pairingKey, code) || len(db.pairingKey) < 32 {
			t.Errorf("stored %q for the code: want its HMAC under a key of 32 bytes", stored)
		}
		if err := pairWith(db, code); err != nil {
			t.Errorf("pairing with the code: %v", err)
		}
	})
}

// TestPairingKeyFile: on SQLite the key lives in a file of mode 0600 beside
// the database, kept across restarts (a code made before one pairs after
// it); a file open to others is closed down.
func TestPairingKeyFile(t *testing.T) {
	url := testSQLiteURL(t)
	db, err := Open(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	_, code := addPairingPhone(t, db)
	if db.PairingKeySource() != PairingKeyFile {
		t.Errorf("source %q", db.PairingKeySource())
	}
	db.Close()
	path := strings.TrimPrefix(url, "sqlite:") + ".pairing-key"
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", fi, err)
	}
	os.Chmod(path, 0o644)
	db = openTestDB(t, url)
	if err := pairWith(db, code); err != nil {
		t.Errorf("a code made before a restart: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("a key file left open to others: %v after opening", fi.Mode().Perm())
	}
}

// TestPairingKeyShared: on PostgreSQL, nodes without a secret share the key
// in the database; nodes given the same secret share theirs, and a node with
// another secret cannot pair their codes.
func TestPairingKeyShared(t *testing.T) {
	url := testPostgresURL(t)
	a, b := openTestDB(t, url), openTestDB(t, url)
	if a.PairingKeySource() != PairingKeyDatabase {
		t.Errorf("source %q", a.PairingKeySource())
	}
	_, code := addPairingPhone(t, a)
	if err := pairWith(b, code); err != nil {
		t.Errorf("a code made on one node, paired on another: %v", err)
	}

	secret := strings.Repeat("s", MinPairingSecret)
	c, d := openTestDBOptions(t, url, Options{PairingSecret: secret}), openTestDBOptions(t, url, Options{PairingSecret: secret})
	other := openTestDBOptions(t, url, Options{PairingSecret: secret + "x"})
	_, code = addPairingPhone(t, c)
	if err := pairWith(other, code); sb.ErrorCode(err) != sb.CodeInvalidToken {
		t.Errorf("a code paired on a node with another secret: %v, want INVALID_TOKEN", err)
	}
	if err := pairWith(d, code); err != nil {
		t.Errorf("a code paired on a node with the same secret: %v", err)
	}
	if _, err := OpenOptions(bg, url, Options{PairingSecret: "short"}); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a short secret: %v", err)
	}
}

// TestMigrationVoidsBareCodes: codes stored as a bare SHA-256 before the
// pairing key cannot be keyed without the code: the migration voids them.
func TestMigrationVoidsBareCodes(t *testing.T) {
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
		if m.name == "0030_pairing_hmac.sql" {
			break
		}
		exec(m.sql)
		exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)`, m.version, m.name)
	}
	bare := sha256.Sum256([]byte("48151623"))
	exec(`INSERT INTO tenants (id, name, plan, status, trial_ends_at, created_at) VALUES ('t1', 'n', 'scale', 'active', 0, 0)`)
	exec(`INSERT INTO phones (id, tenant_id, number, kind, channels, status, created_at, pairing_hash, pairing_expires_at)
		VALUES ('p1', 't1', '+15550000001', 'android', 'sms', 'online', 0, ?, ?)`, hex.EncodeToString(bare[:]), time.Now().Add(time.Hour).UnixMicro())
	raw.Close()

	db := openTestDB(t, url)
	var hash sql.NullString
	if err := db.queryRow(bg, `SELECT pairing_hash FROM phones WHERE id = 'p1'`).Scan(&hash); err != nil || hash.Valid {
		t.Errorf("a bare SHA-256 code after the migration: %v %v, want none", hash, err)
	}
	if err := pairWith(db, "48151623"); sb.ErrorCode(err) != sb.CodeInvalidToken {
		t.Errorf("pairing with the old code: %v", err)
	}
}
