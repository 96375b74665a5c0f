package sqlstore

// The store suite: every test runs against SQLite and PostgreSQL (see
// forEachDialect) through the same methods the service uses.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

var bg = context.Background()

// newTestTenant stores a tenant on plan and returns it.
func newTestTenant(t *testing.T, db *DB, plan string) *sb.Tenant {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	tn := &sb.Tenant{ID: sb.NewID(), Name: "Acme " + plan, Plan: plan, Status: sb.TenantActive,
		TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now}
	if err := db.CreateTenant(bg, tn); err != nil {
		t.Fatalf("create tenant: %v", err)
	}
	return tn
}

// newTestKey returns a key of the tenant (not stored) and its text.
func newTestKey(t *testing.T, tenantID string, env sb.Environment, limit int) (*sb.APIKey, string) {
	t.Helper()
	text, err := sb.NewKeyText(env)
	if err != nil {
		t.Fatal(err)
	}
	return &sb.APIKey{ID: sb.NewID(), TenantID: tenantID, Name: "key " + string(env), Hash: sb.HashKey(text), Hint: sb.KeyHint(text),
		Environment: env, Status: sb.KeyActive, RateLimit: limit, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}, text
}

func mustCreateKey(t *testing.T, db *DB, tenantID string, env sb.Environment, limit int) *sb.APIKey {
	t.Helper()
	k, _ := newTestKey(t, tenantID, env, limit)
	if err := db.CreateKey(bg, k); err != nil {
		t.Fatalf("create key: %v", err)
	}
	return k
}

func wantCode(t *testing.T, what string, err error, code sb.Code) {
	t.Helper()
	if got := sb.ErrorCode(err); got != code {
		t.Errorf("%s: error %v (code %q), want %s", what, err, got, code)
	}
}

// openConcurrently opens url from three goroutines at once, as nodes
// starting together or an operator command beside the server do, and
// checks that every open succeeds with a usable database.
func openConcurrently(t *testing.T, url string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			db, err := Open(bg, url)
			if err == nil {
				if _, err = db.Tenant(bg, "x"); sb.ErrorCode(err) == sb.CodeNotFound {
					err = nil
				}
				db.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent open %d: %v", i, err)
		}
	}
}

// TestStoreConcurrentOpen: several processes open one existing database at
// once.
func TestStoreConcurrentOpen(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		openTestDB(t, url) // the database exists and is migrated
		for i := 0; i < 3; i++ {
			openConcurrently(t, url)
		}
	})
}

// TestStoreConcurrentFirstOpen: several processes open one database that
// does not exist yet at once, and all succeed.
func TestStoreConcurrentFirstOpen(t *testing.T) {
	for name, fresh := range map[string]func(testing.TB) string{"sqlite": emptySQLiteURL, "postgres": emptyPostgresURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for i := 0; i < 10; i++ {
				openConcurrently(t, fresh(t))
			}
		})
	}
}

// TestStoreMigrationsIdempotent: a new database is migrated by Open, and
// opening it again applies nothing twice and keeps its data.
func TestStoreMigrationsIdempotent(t *testing.T) {
	forEachEmpty(t, func(t *testing.T, url string) {
		db, err := Open(bg, url)
		if err != nil {
			t.Fatal(err)
		}
		tn := newTestTenant(t, db, "starter")
		k := mustCreateKey(t, db, tn.ID, sb.Live, 0)
		ms, err := db.migrations()
		if err != nil || len(ms) == 0 {
			t.Fatalf("migrations: %v %v", ms, err)
		}
		db.Close()

		// Opening again applies nothing twice and keeps the data.
		for i := 0; i < 2; i++ {
			db, err := Open(bg, url)
			if err != nil {
				t.Fatalf("open again: %v", err)
			}
			var n, distinct int
			if err := db.queryRow(bg, `SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&n, &distinct); err != nil {
				t.Fatal(err)
			}
			if n != len(ms) || distinct != len(ms) {
				t.Errorf("schema_migrations has %d rows (%d versions), want %d", n, distinct, len(ms))
			}
			if got, err := db.Tenant(bg, tn.ID); err != nil || got.Name != tn.Name {
				t.Errorf("tenant after reopening: %v %v", got, err)
			}
			if got, err := db.KeyByHash(bg, k.Hash); err != nil || got.ID != k.ID {
				t.Errorf("key after reopening: %v %v", got, err)
			}
			db.Close()
		}
	})
}

func TestStoreTenants(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "trial")
		got, err := db.Tenant(bg, tn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if *got != *tn {
			t.Errorf("stored %+v, read back %+v", tn, got)
		}
		if got.CreatedAt.Location() != time.UTC || got.TrialEndsAt.Location() != time.UTC {
			t.Errorf("times are not UTC: %v %v", got.CreatedAt, got.TrialEndsAt)
		}
		if err := db.CreateTenant(bg, tn); err == nil {
			t.Errorf("a second tenant with the same id was stored")
		}

		if err := db.SetTenantPlan(bg, tn.ID, "growth"); err != nil {
			t.Fatal(err)
		}
		if err := db.SetTenantStatus(bg, tn.ID, sb.TenantSuspended); err != nil {
			t.Fatal(err)
		}
		ends := time.Date(2020, 1, 2, 3, 4, 5, 6000, time.UTC)
		if err := db.SetTrialEnd(bg, tn.ID, ends); err != nil {
			t.Fatal(err)
		}
		got, err = db.Tenant(bg, tn.ID)
		if err != nil || got.Plan != "growth" || got.Status != sb.TenantSuspended || !got.TrialEndsAt.Equal(ends) || got.Name != tn.Name {
			t.Errorf("after updates: %+v %v", got, err)
		}

		// Other tenants are untouched.
		other := newTestTenant(t, db, "starter")
		if got, err := db.Tenant(bg, other.ID); err != nil || got.Plan != "starter" || got.Status != sb.TenantActive {
			t.Errorf("other tenant: %+v %v", got, err)
		}

		const unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
		_, err = db.Tenant(bg, unknown)
		wantCode(t, "Tenant of an unknown id", err, sb.CodeNotFound)
		wantCode(t, "SetTenantPlan of an unknown id", db.SetTenantPlan(bg, unknown, "growth"), sb.CodeNotFound)
		wantCode(t, "SetTenantStatus of an unknown id", db.SetTenantStatus(bg, unknown, sb.TenantActive), sb.CodeNotFound)
		wantCode(t, "SetTrialEnd of an unknown id", db.SetTrialEnd(bg, unknown, ends), sb.CodeNotFound)
	})
}

func TestStoreKeys(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "trial")
		other := newTestTenant(t, db, "trial")
		live, _ := newTestKey(t, tn.ID, sb.Live, 0)
		if err := db.CreateKey(bg, live); err != nil {
			t.Fatal(err)
		}
		test := mustCreateKey(t, db, tn.ID, sb.Test, 7)
		third := mustCreateKey(t, db, tn.ID, sb.Live, 0)
		foreign := mustCreateKey(t, db, other.ID, sb.Live, 0)

		// Read back exactly, by hash.
		got, err := db.KeyByHash(bg, test.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != test.ID || got.TenantID != tn.ID || got.Name != test.Name || got.Hash != test.Hash || got.Hint != test.Hint ||
			got.Environment != sb.Test || got.Status != sb.KeyActive || got.RateLimit != 7 || got.LastUsedAt != nil || !got.CreatedAt.Equal(test.CreatedAt) {
			t.Errorf("stored %+v, read back %+v", test, got)
		}
		if got, err := db.KeyByHash(bg, live.Hash); err != nil || got.RateLimit != 0 {
			t.Errorf("a key without a limit: %+v %v", got, err)
		}
		_, err = db.KeyByHash(bg, sb.HashKey("svc_live_00000000000000000000000000000000"))
		wantCode(t, "KeyByHash of an unknown hash", err, sb.CodeNotFound)
		dup, _ := newTestKey(t, tn.ID, sb.Live, 0)
		dup.Hash = live.Hash
		if err := db.CreateKey(bg, dup); err == nil {
			t.Errorf("a second key with the same hash was stored")
		}

		// The tenant's keys, oldest first, and only the tenant's.
		ids := func(tenantID string) []string {
			t.Helper()
			keys, err := db.Keys(bg, tenantID)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, k := range keys {
				out = append(out, k.ID+"/"+k.Status)
			}
			return out
		}
		if got, want := fmt.Sprint(ids(tn.ID)), fmt.Sprint([]string{live.ID + "/active", test.ID + "/active", third.ID + "/active"}); got != want {
			t.Errorf("Keys: %s, want %s", got, want)
		}
		if got := fmt.Sprint(ids(other.ID)); got != fmt.Sprint([]string{foreign.ID + "/active"}) {
			t.Errorf("Keys of the other tenant: %s", got)
		}
		if k, err := db.Key(bg, tn.ID, test.ID); err != nil || k.ID != test.ID {
			t.Errorf("Key: %v %v", k, err)
		}
		_, err = db.Key(bg, other.ID, test.ID)
		wantCode(t, "Key of another tenant", err, sb.CodeNotFound)

		// Deactivate and activate, by key id alone.
		k, err := db.SetKeyStatus(bg, test.ID, sb.KeyInactive)
		if err != nil || k.Status != sb.KeyInactive || k.ID != test.ID {
			t.Fatalf("SetKeyStatus inactive: %+v %v", k, err)
		}
		if got, err := db.KeyByHash(bg, test.Hash); err != nil || got.Status != sb.KeyInactive {
			t.Errorf("an inactive key by hash: %+v %v", got, err)
		}
		if got, want := fmt.Sprint(ids(tn.ID)), fmt.Sprint([]string{live.ID + "/active", test.ID + "/inactive", third.ID + "/active"}); got != want {
			t.Errorf("Keys after deactivation: %s, want %s", got, want)
		}
		if k, err := db.SetKeyStatus(bg, test.ID, sb.KeyActive); err != nil || k.Status != sb.KeyActive {
			t.Errorf("SetKeyStatus active: %+v %v", k, err)
		}
		_, err = db.SetKeyStatus(bg, "01ARZ3NDEKTSV4RRFFQ69G5FAV", sb.KeyActive)
		wantCode(t, "SetKeyStatus of an unknown id", err, sb.CodeNotFound)

		// Revocation: only by the owner, once, for good.
		now := time.Now()
		_, err = db.RevokeKey(bg, other.ID, live.ID, now)
		wantCode(t, "RevokeKey by another tenant", err, sb.CodeNotFound)
		if _, err := db.KeyByHash(bg, live.Hash); err != nil {
			t.Errorf("a key another tenant tried to revoke: %v", err)
		}
		k, err = db.RevokeKey(bg, tn.ID, live.ID, now)
		if err != nil || k.ID != live.ID || k.Hash != live.Hash {
			t.Fatalf("RevokeKey: %+v %v", k, err)
		}
		_, err = db.KeyByHash(bg, live.Hash)
		wantCode(t, "KeyByHash of a revoked key", err, sb.CodeNotFound)
		_, err = db.Key(bg, tn.ID, live.ID)
		wantCode(t, "Key of a revoked key", err, sb.CodeNotFound)
		if got, want := fmt.Sprint(ids(tn.ID)), fmt.Sprint([]string{test.ID + "/active", third.ID + "/active"}); got != want {
			t.Errorf("Keys after revocation: %s, want %s", got, want)
		}
		_, err = db.RevokeKey(bg, tn.ID, live.ID, now)
		wantCode(t, "RevokeKey twice", err, sb.CodeNotFound)
		_, err = db.SetKeyStatus(bg, live.ID, sb.KeyActive)
		wantCode(t, "SetKeyStatus of a revoked key", err, sb.CodeNotFound)
		_, err = db.KeyByHash(bg, live.Hash)
		wantCode(t, "KeyByHash of a revoked key after SetKeyStatus", err, sb.CodeNotFound)
	})
}

func TestStoreKeyCapConcurrent(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "scale")
		other := newTestTenant(t, db, "scale")
		var revoked *sb.APIKey
		for i := 0; i < 95; i++ {
			k := mustCreateKey(t, db, tn.ID, sb.Live, 0)
			if i == 0 {
				revoked = k
			}
		}
		// A revoked key does not count: revoke one and make one more.
		if _, err := db.RevokeKey(bg, tn.ID, revoked.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		mustCreateKey(t, db, tn.ID, sb.Test, 0)

		// 95 unrevoked; 20 concurrent creations: exactly 5 succeed.
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			k, _ := newTestKey(t, tn.ID, sb.Live, 0)
			wg.Go(func() { errs[i] = db.CreateKey(bg, k) })
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch sb.ErrorCode(err) {
			case "":
				ok++
			case sb.CodeValidation:
			default:
				t.Errorf("a creation over the cap failed with %v, want VALIDATION_ERROR", err)
			}
		}
		keys, err := db.keys(bg, tn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ok != 5 || len(keys) != sb.MaxKeysPerTenant {
			t.Errorf("%d creations succeeded and %d keys are unrevoked, want 5 and %d", ok, len(keys), sb.MaxKeysPerTenant)
		}
		k, _ := newTestKey(t, tn.ID, sb.Test, 0)
		wantCode(t, "the 101st key", db.CreateKey(bg, k), sb.CodeValidation)
		// The cap is per tenant.
		mustCreateKey(t, db, other.ID, sb.Live, 0)
	})
}

func TestStoreTouchKeys(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "trial")
		a := mustCreateKey(t, db, tn.ID, sb.Live, 0)
		b := mustCreateKey(t, db, tn.ID, sb.Test, 0)
		lastUsed := func(k *sb.APIKey) *time.Time {
			t.Helper()
			got, err := db.KeyByHash(bg, k.Hash)
			if err != nil {
				t.Fatal(err)
			}
			return got.LastUsedAt
		}
		if err := db.TouchKeys(bg, nil); err != nil {
			t.Fatalf("TouchKeys of nothing: %v", err)
		}
		if lastUsed(a) != nil {
			t.Fatalf("an unused key has last_used_at")
		}
		t0 := time.Date(2030, 5, 6, 7, 8, 9, 123456000, time.UTC)
		if err := db.TouchKeys(bg, map[string]time.Time{a.ID: t0, "01ARZ3NDEKTSV4RRFFQ69G5FAV": t0}); err != nil {
			t.Fatalf("TouchKeys: %v", err)
		}
		if got := lastUsed(a); got == nil || !got.Equal(t0) {
			t.Errorf("last_used_at %v, want %v", got, t0)
		}
		if lastUsed(b) != nil {
			t.Errorf("TouchKeys of one key set another's last_used_at")
		}
		// Never backwards (several nodes flush in any order); forwards always.
		if err := db.TouchKeys(bg, map[string]time.Time{a.ID: t0.Add(-time.Second), b.ID: t0}); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(a); got == nil || !got.Equal(t0) {
			t.Errorf("an older use moved last_used_at to %v, want %v", got, t0)
		}
		if got := lastUsed(b); got == nil || !got.Equal(t0) {
			t.Errorf("b's last_used_at %v, want %v", got, t0)
		}
		if err := db.TouchKeys(bg, map[string]time.Time{a.ID: t0.Add(time.Microsecond)}); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(a); got == nil || !got.Equal(t0.Add(time.Microsecond)) {
			t.Errorf("a newer use: last_used_at %v, want %v", got, t0.Add(time.Microsecond))
		}
	})
}

func TestStoreUsage(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "trial")
		other := newTestTenant(t, db, "trial")
		if n, err := db.Usage(bg, tn.ID, "2030-01"); err != nil || n != 0 {
			t.Errorf("usage of a month without calls: %d %v", n, err)
		}
		if n, err := db.AddUsage(bg, tn.ID, "2030-01", 3); err != nil || n != 3 {
			t.Errorf("AddUsage 3: %d %v", n, err)
		}
		if n, err := db.AddUsage(bg, tn.ID, "2030-01", 2); err != nil || n != 5 {
			t.Errorf("AddUsage 2 more: %d %v, want 5", n, err)
		}
		if n, err := db.AddUsage(bg, tn.ID, "2030-02", 1); err != nil || n != 1 {
			t.Errorf("AddUsage in another month: %d %v, want 1", n, err)
		}
		if n, err := db.Usage(bg, tn.ID, "2030-01"); err != nil || n != 5 {
			t.Errorf("Usage: %d %v, want 5", n, err)
		}
		if n, err := db.Usage(bg, other.ID, "2030-01"); err != nil || n != 0 {
			t.Errorf("Usage of another tenant: %d %v, want 0", n, err)
		}

		// Several nodes flush at once: no count is lost.
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Go(func() {
				if _, err := db.AddUsage(bg, other.ID, "2030-01", 2); err != nil {
					t.Errorf("concurrent AddUsage: %v", err)
				}
			})
		}
		wg.Wait()
		if n, err := db.Usage(bg, other.ID, "2030-01"); err != nil || n != 40 {
			t.Errorf("Usage after 20 concurrent additions of 2: %d %v, want 40", n, err)
		}
	})
}

func TestStorePhones(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "trial")
		other := newTestTenant(t, db, "trial")
		now := time.Now().UTC().Truncate(time.Microsecond)
		phone := func(tenantID, number string, limit int, channels ...string) *sb.Phone {
			return &sb.Phone{ID: sb.NewID(), TenantID: tenantID, Number: number, DailyLimit: limit, Channels: channels,
				Status: sb.PhoneOnline, CreatedAt: now}
		}
		a := phone(tn.ID, "+15551230001", 1000, sb.ChannelSMS, sb.ChannelChat)
		b := phone(tn.ID, "+15551230002", 0, sb.ChannelSMS)
		c := phone(other.ID, "+15551230003", 5, sb.ChannelChat)
		for _, p := range []*sb.Phone{a, b, c} {
			if err := db.AddPhone(bg, p, nil); err != nil {
				t.Fatalf("AddPhone %s: %v", p.Number, err)
			}
		}
		list, err := db.Phones(bg, tn.ID, sb.Live)
		if err != nil || len(list) != 2 {
			t.Fatalf("Phones: %v %v", list, err)
		}
		for i, want := range []*sb.Phone{a, b} {
			got := list[i]
			if got.ID != want.ID || got.TenantID != want.TenantID || got.Number != want.Number || got.DailyLimit != want.DailyLimit ||
				fmt.Sprint(got.Channels) != fmt.Sprint(want.Channels) || got.Status != sb.PhoneOnline || !got.CreatedAt.Equal(now) {
				t.Errorf("phone %d: %+v, want %+v", i, got, want)
			}
		}

		// A number is unique across all tenants: the tenant that has it
		// learns which phone it is, another tenant does not.
		for i, dup := range []*sb.Phone{phone(tn.ID, a.Number, 0, sb.ChannelSMS), phone(other.ID, a.Number, 0, sb.ChannelSMS)} {
			err := db.AddPhone(bg, dup, nil)
			wantCode(t, "a duplicate number", err, sb.CodeDuplicatePhone)
			want := map[string]any{"existing_id": a.ID}
			if i == 1 {
				want = nil
			}
			if e, ok := err.(*sb.Error); ok && fmt.Sprint(e.Details) != fmt.Sprint(want) {
				t.Errorf("duplicate number %d: details %v, want %v", i, e.Details, want)
			}
		}
		if list, _ := db.Phones(bg, other.ID, sb.Live); len(list) != 1 {
			t.Errorf("the other tenant has %d phones after a refused duplicate, want 1", len(list))
		}

		p, err := db.SetPhoneStatus(bg, b.ID, sb.PhoneOffline)
		if err != nil || p.ID != b.ID || p.Status != sb.PhoneOffline || p.Number != b.Number {
			t.Errorf("SetPhoneStatus offline: %+v %v", p, err)
		}
		if p, err := db.SetPhoneStatus(bg, b.ID, sb.PhoneOnline); err != nil || p.Status != sb.PhoneOnline {
			t.Errorf("SetPhoneStatus online: %+v %v", p, err)
		}
		_, err = db.SetPhoneStatus(bg, "01ARZ3NDEKTSV4RRFFQ69G5FAV", sb.PhoneOffline)
		wantCode(t, "SetPhoneStatus of an unknown id", err, sb.CodeNotFound)
		if list, err := db.Phones(bg, "01ARZ3NDEKTSV4RRFFQ69G5FAV", sb.Live); err != nil || len(list) != 0 {
			t.Errorf("Phones of an unknown tenant: %v %v", list, err)
		}
	})
}
