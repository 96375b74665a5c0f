package auth

import (
	"context"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// fuzzStore is a tiny in-memory Store. The fuzz target is header parsing, not
// storage, so a map is enough; it counts every read.
type fuzzStore struct {
	keys                  map[string]*sb.APIKey // hash -> key
	tenants               map[string]*sb.Tenant
	keyReads, tenantReads atomic.Int64
}

func (s *fuzzStore) KeyByHash(_ context.Context, hash string) (*sb.APIKey, error) {
	s.keyReads.Add(1)
	if k, ok := s.keys[hash]; ok {
		c := *k
		return &c, nil
	}
	return nil, sb.ErrNotFound
}

func (s *fuzzStore) Tenant(_ context.Context, id string) (*sb.Tenant, error) {
	s.tenantReads.Add(1)
	if t, ok := s.tenants[id]; ok {
		c := *t
		return &c, nil
	}
	return nil, sb.ErrNotFound
}

func (s *fuzzStore) TouchKeys(context.Context, map[string]time.Time) error { return nil }

const (
	fuzzKeyText   = "svc_live_Q7fJ2kLm9XzA0bC3dE5gH8iK1nP4rS6t"
	fuzzOtherLive = "svc_live_Q7fJ2kLm9XzA0bC3dE5gH8iK1nP4rS6u" // right form, not stored
	fuzzOtherTest = "svc_test_Q7fJ2kLm9XzA0bC3dE5gH8iK1nP4rS6t" // same secret, other env
)

// fuzzHeaderFormRE is what a header must look like before storage may be
// read: the Bearer scheme in any case (RFC 9110), one or more spaces, a key.
var fuzzHeaderFormRE = regexp.MustCompile(`^(?i:bearer) +svc_(live|test)_[0-9A-Za-z]{32}$`)

// fuzzValidHeaderRE matches the headers that carry the stored key.
var fuzzValidHeaderRE = regexp.MustCompile(`^(?i:bearer) +` + regexp.QuoteMeta(fuzzKeyText) + `$`)

func newFuzzStore() *fuzzStore {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	key := &sb.APIKey{
		ID: "key_1", TenantID: "ten_1", Name: "fuzz", Hash: sb.HashKey(fuzzKeyText),
		Hint: sb.KeyHint(fuzzKeyText), Environment: sb.Live, Status: sb.KeyActive, CreatedAt: now,
	}
	tenant := &sb.Tenant{
		ID: "ten_1", Name: "Fuzz Inc", Plan: "starter", Status: sb.TenantActive,
		TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now,
	}
	return &fuzzStore{
		keys:    map[string]*sb.APIKey{key.Hash: key},
		tenants: map[string]*sb.Tenant{tenant.ID: tenant},
	}
}

// FuzzAuthenticateHeader drives Authenticate with arbitrary Authorization
// header values: only the Bearer scheme (in any case) and the one stored
// key authenticates, every
// other value is INVALID_API_KEY, and a value that is not of key form never
// reaches storage.
func FuzzAuthenticateHeader(f *testing.F) {
	seeds := []string{
		"Bearer " + fuzzKeyText,
		"Bearer " + fuzzOtherLive,
		"Bearer " + fuzzOtherTest,
		"Bearer svc_test_00000000000000000000000000000000",
		"bearer " + fuzzKeyText,
		"BEARER " + fuzzKeyText,
		"Bearer  " + fuzzKeyText,
		"Bearer\t" + fuzzKeyText,
		"Bearer " + fuzzKeyText + " ",
		"Bearer " + fuzzKeyText + "\t",
		"Bearer " + fuzzKeyText + "\r\n",
		"Bearer " + fuzzKeyText + "\x00",
		" Bearer " + fuzzKeyText,
		"Bearer " + fuzzKeyText[:len(fuzzKeyText)-1],
		"Bearer " + fuzzKeyText + "u",
		"Bearer " + fuzzKeyText[:len(fuzzKeyText)-1] + "é",
		"Bearer " + fuzzKeyText[:len(fuzzKeyText)-2] + "é",
		"Bearer " + fuzzKeyText[:len(fuzzKeyText)-1] + "\x00",
		"Bearer " + strings.Replace(fuzzKeyText, "live", "prod", 1),
		"Bearer Bearer " + fuzzKeyText,
		"Bearer",
		"Bearer ",
		"",
		" ",
		fuzzKeyText,
		"Basic " + fuzzKeyText,
		"Basic dXNlcjpwYXNz",
		"Token " + fuzzKeyText,
		"Bearer " + strings.Repeat("A", 1<<16),
		strings.Repeat("Bearer ", 1<<10),
		"Bearer \xff\xfe" + fuzzKeyText[2:],
		"Bearer svc_live_" + strings.Repeat("\x00", 32),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	ctx := context.Background()
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, header string) {
		store := newFuzzStore()
		a := New(store, sb.DefaultPlans(), func() time.Time { return now })
		p, err := a.Authenticate(ctx, header, "")

		if fuzzValidHeaderRE.MatchString(header) {
			if err != nil || p == nil {
				t.Fatalf("Authenticate(valid header) = %v, %v", p, err)
			}
			if p.Key.ID != "key_1" || p.Tenant.ID != "ten_1" || p.Env != sb.Live || p.Plan.Name != "starter" {
				t.Fatalf("Authenticate(valid header): wrong principal %+v", p)
			}
			// A second use is served from the cache.
			reads := store.keyReads.Load()
			if p2, err := a.Authenticate(ctx, header, ""); err != nil || p2 == nil || store.keyReads.Load() != reads {
				t.Fatalf("second Authenticate = %v, %v (key reads %d -> %d)", p2, err, reads, store.keyReads.Load())
			}
			return
		}

		if p != nil {
			t.Fatalf("Authenticate(%q) returned a principal for a header that is not the valid key", header)
		}
		if code := sb.ErrorCode(err); code != sb.CodeInvalidAPIKey {
			t.Fatalf("Authenticate(%q) error = %v (code %q), want %s", header, err, code, sb.CodeInvalidAPIKey)
		}
		if store.tenantReads.Load() != 0 {
			t.Fatalf("Authenticate(%q) read a tenant for an invalid key", header)
		}
		reads := store.keyReads.Load()
		if fuzzHeaderFormRE.MatchString(header) {
			if reads > 1 {
				t.Fatalf("Authenticate(%q) read storage %d times", header, reads)
			}
		} else if reads != 0 {
			t.Fatalf("Authenticate(%q) read storage %d times for a malformed header", header, reads)
		}
	})
}
