package ops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/sqlstore"
)

func open(t *testing.T, url string) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestCreateTenant: an active tenant on its plan, a live and a test key
// whose hashes are stored under the tenant, and one simulated phone with no
// daily limit.
func TestCreateTenant(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db := open(t, url)
		nt, err := CreateTenant(ctx, db, "Acme", sb.TrialPlan)
		if err != nil {
			t.Fatal(err)
		}
		tn, err := db.Tenant(ctx, nt.TenantID)
		if err != nil || tn.Name != "Acme" || tn.Plan != sb.TrialPlan || tn.Status != sb.TenantActive {
			t.Fatalf("tenant %+v, %v", tn, err)
		}
		for text, env := range map[string]sb.Environment{nt.LiveKey: sb.Live, nt.TestKey: sb.Test} {
			k, err := db.KeyByHash(ctx, sb.HashKey(text))
			if err != nil || k.TenantID != nt.TenantID || k.Environment != env || k.Status != sb.KeyActive {
				t.Errorf("key %q: %+v, %v", text, k, err)
			}
		}
		phones, err := db.Phones(ctx, nt.TenantID, sb.Live)
		if err != nil || len(phones) != 1 {
			t.Fatalf("phones %v, %v", phones, err)
		}
		if p := phones[0]; nt.Phone == nil || p.ID != nt.Phone.ID || p.Number != nt.Phone.Number || p.Kind != sb.PhoneSimulated ||
			p.DailyLimit != 0 || !strings.HasPrefix(p.Number, "+1555") {
			t.Errorf("phone %+v, printed %+v", p, nt.Phone)
		}
		if _, err := CreateTenant(ctx, db, " ", sb.TrialPlan); err == nil {
			t.Error("a tenant with a blank name was created")
		}
	})
}

// TestAddPhone: what `phone add` checks before it stores a phone, and the
// duplicate number it reports in plain words.
func TestAddPhone(t *testing.T) {
	dir := t.TempDir()
	providers := filepath.Join(dir, "providers.json")
	if err := os.WriteFile(providers, []byte(`{"links": [{"name": "eu", "type": "smpp", "addr": "127.0.0.1:2775", "system_id": "x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	good := PhoneSpec{Tenant: "t1", Number: "+15550100001"}
	for _, c := range []struct {
		name string
		spec func(s *PhoneSpec)
		want string
	}{
		{"no tenant", func(s *PhoneSpec) { s.Tenant = "" }, "--tenant is required"},
		{"bad number", func(s *PhoneSpec) { s.Number = "5550100001" }, "--number must be E.164"},
		{"negative limit", func(s *PhoneSpec) { s.DailyLimit = -1 }, "--daily-limit must be >= 0"},
		{"unknown channel", func(s *PhoneSpec) { s.Channels = []string{"fax"} }, `unknown channel "fax"`},
		{"link without file", func(s *PhoneSpec) { s.Link = "eu" }, "needs the providers file"},
		{"unknown link", func(s *PhoneSpec) { s.Link, s.ProvidersFile = "us", providers }, `"us" is not a link`},
		{"carrier chat", func(s *PhoneSpec) { s.Link, s.ProvidersFile, s.Channels = "eu", providers, []string{"chat"} }, "sms only"},
	} {
		s := good
		c.spec(&s)
		if _, err := NewPhoneFromSpec(s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	p, err := NewPhoneFromSpec(good)
	if err != nil || p.Kind != sb.PhoneSimulated || strings.Join(p.Channels, ",") != "sms,chat" || p.Status != sb.PhoneOnline {
		t.Errorf("simulated phone %+v, %v", p, err)
	}
	s := good
	s.Link, s.ProvidersFile = "eu", providers
	if p, err := NewPhoneFromSpec(s); err != nil || p.Kind != "smpp" || p.Link != "eu" || strings.Join(p.Channels, ",") != "sms" {
		t.Errorf("carrier phone %+v, %v", p, err)
	}

	ctx := context.Background()
	db := open(t, dbtest.SQLite(t))
	nt, err := CreateTenant(ctx, db, "Acme", sb.TrialPlan)
	if err != nil {
		t.Fatal(err)
	}
	s = good
	s.Tenant = nt.TenantID
	p, _ = NewPhoneFromSpec(s)
	if err := AddPhone(ctx, db, p); err != nil {
		t.Fatal(err)
	}
	p2, _ := NewPhoneFromSpec(s)
	if err := AddPhone(ctx, db, p2); !errors.Is(err, ErrDuplicateNumber) || !strings.Contains(err.Error(), s.Number) {
		t.Errorf("the same number again: %v", err)
	}
}
