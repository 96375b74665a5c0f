package main

// Authentication (docs/api.md): malformed and
// unknown keys, deactivated keys, suspended tenants, ended trials, and
// tenant isolation.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAuth runs the authentication rules on one server per database; every
// subtest makes its own tenants. The trial and starter plans get a high rate
// limit: polling for an operator change must not run into it.
func TestAuth(t *testing.T) {
	t.Parallel()
	runShared(t, []string{"--plans", tempPlansFile(t, `{"trial": {"rate_limit": 100000}, "starter": {"rate_limit": 100000}}`)}, []sharedCase{
		{"InvalidKeys", testAuthInvalidKeys},
		{"KeyDeactivated", testAuthKeyDeactivated},
		{"TenantSuspended", testAuthTenantSuspended},
		{"TrialExpired", testAuthTrialExpired},
		{"TenantIsolation", testAuthTenantIsolation},
	})
}

func testAuthInvalidKeys(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	secret := tn.Live[len("svc_live_"):]
	alnum32 := "0123456789ABCDEFGHIJKLMNOPQRSTUV"
	flip := func(key string) string { // the same key with its last character changed
		last := key[len(key)-1]
		c := byte('a')
		if last == 'a' {
			c = 'b'
		}
		return key[:len(key)-1] + string(c)
	}

	headers := map[string]string{
		"no header":                "",
		"Basic scheme":             "Basic x",
		"Basic with a key":         "Basic " + tn.Live,
		"bare key, no scheme":      tn.Live,
		"Bearer alone":             "Bearer",
		"Bearer and a space":       "Bearer ",
		"trailing junk":            "Bearer " + tn.Live + " x",
		"wrong prefix":             "Bearer svc_prod_" + secret,
		"no prefix":                "Bearer " + secret,
		"upper-case prefix":        "Bearer SVC_LIVE_" + secret,
		"31 characters":            "Bearer svc_live_" + secret[:31],
		"33 characters":            "Bearer svc_live_" + secret + "x",
		"bad character -":          "Bearer svc_live_" + secret[:31] + "-",
		"bad character _":          "Bearer svc_live_" + "_" + secret[1:],
		"bad character .":          "Bearer svc_live_" + secret[:16] + "." + secret[17:],
		"bad character %":          "Bearer svc_test_" + secret[:31] + "%",
		"unknown live key":         "Bearer svc_live_" + alnum32,
		"unknown test key":         "Bearer svc_test_" + alnum32,
		"one character changed":    "Bearer " + flip(tn.Live),
		"live secret, test prefix": "Bearer svc_test_" + secret,
	}
	for what, h := range headers {
		var hdr []string
		if h != "" {
			hdr = []string{"Authorization", h}
		}
		for _, req := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/v1/api-keys", nil},
			{"POST", "/v1/api-keys", `{"bogus": true}`}, // authentication before the body
			{"DELETE", "/v1/api-keys/01ARZ3NDEKTSV4RRFFQ69G5FAV", nil},
		} {
			r := s.do(t, req.method, req.path, "", req.body, hdr...)
			if r.Status != http.StatusUnauthorized || r.Code() != "INVALID_API_KEY" {
				t.Errorf("%s (%q) on %s %s: %d %s, want 401 INVALID_API_KEY", what, h, req.method, req.path, r.Status, r.Raw)
			}
			if r.Header.Get("X-RateLimit-Limit") != "" {
				t.Errorf("%s: an unauthenticated answer carries X-RateLimit-Limit", what)
			}
		}
	}
	// The real keys work, with and without a known tenant cache.
	apiListKeys(t, s, tn.Live)
	apiListKeys(t, s, tn.Test)
	// The scheme is case-insensitive and may be followed by several spaces
	// (RFC 9110 section 11.4: auth-scheme 1*SP credentials).
	for _, h := range []string{"bearer " + tn.Live, "BEARER " + tn.Live, "BeArEr " + tn.Test, "Bearer  " + tn.Live} {
		if r := s.do(t, "GET", "/v1/api-keys", "", nil, "Authorization", h); r.Status != http.StatusOK {
			t.Errorf("Authorization %q: %d %s, want 200", h, r.Status, r.Raw)
		}
	}
}

func testAuthKeyDeactivated(t *testing.T, s *server, db string) {
	tn := newTenant(t, db, "--plan", "scale") // no rate limit while polling
	d := apiCreateKey(t, s, tn.Live, map[string]any{"name": "ops"})
	id, text := d["id"].(string), d["key"].(string)
	apiListKeys(t, s, text) // cached

	out := cli(t, db, "key", "deactivate", id)
	if !strings.Contains(out, `"inactive"`) || !strings.Contains(out, id) {
		t.Errorf("key deactivate printed %q", out)
	}
	awaitStatus(t, s, text, operatorChange, "KEY_INACTIVE after key deactivate", http.StatusForbidden, "KEY_INACTIVE")
	wantError(t, "a deactivated key creating a key", s.do(t, "POST", "/v1/api-keys", text, map[string]any{"name": "x"}),
		http.StatusForbidden, "KEY_INACTIVE")
	// Only that key: the tenant's others work, and the list shows it inactive.
	k := findByID(apiListKeys(t, s, tn.Live), id)
	if k == nil || k["status"] != "inactive" {
		t.Errorf("the deactivated key in the list: %v, want status inactive", k)
	}

	cli(t, db, "key", "activate", id)
	awaitStatus(t, s, text, operatorChange, "the key working after key activate", http.StatusOK, "")
	if k := findByID(apiListKeys(t, s, tn.Live), id); k == nil || k["status"] != "active" {
		t.Errorf("the reactivated key in the list: %v, want status active", k)
	}

	// A deactivated key can still be revoked, and is then gone for good.
	cli(t, db, "key", "deactivate", id)
	awaitStatus(t, s, text, operatorChange, "KEY_INACTIVE again", http.StatusForbidden, "KEY_INACTIVE")
	if r := s.do(t, "DELETE", "/v1/api-keys/"+id, tn.Live, nil); r.Status != http.StatusOK {
		t.Fatalf("revoking a deactivated key: %d %s", r.Status, r.Raw)
	}
	wantError(t, "a revoked deactivated key", s.do(t, "GET", "/v1/api-keys", text, nil), http.StatusUnauthorized, "INVALID_API_KEY")
}

func testAuthTenantSuspended(t *testing.T, s *server, db string) {
	tn := newTenant(t, db, "--plan", "scale")
	other := newTenant(t, db, "--plan", "scale")
	apiListKeys(t, s, tn.Live)

	cli(t, db, "tenant", "suspend", tn.ID)
	for _, key := range []string{tn.Live, tn.Test} {
		awaitStatus(t, s, key, operatorChange, "TENANT_SUSPENDED", http.StatusForbidden, "TENANT_SUSPENDED")
	}
	wantError(t, "a suspended tenant creating a key", s.do(t, "POST", "/v1/api-keys", tn.Live, map[string]any{"name": "x"}),
		http.StatusForbidden, "TENANT_SUSPENDED")
	apiListKeys(t, s, other.Live) // other tenants are not affected

	cli(t, db, "tenant", "resume", tn.ID)
	for _, key := range []string{tn.Live, tn.Test} {
		awaitStatus(t, s, key, operatorChange, "the tenant working after resume", http.StatusOK, "")
	}
}

func testAuthTrialExpired(t *testing.T, s *server, db string) {
	tn := newTenant(t, db) // trial
	apiListKeys(t, s, tn.Live)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)

	cli(t, db, "tenant", "trial", tn.ID, "--ends", past)
	for _, key := range []string{tn.Live, tn.Test} {
		awaitStatus(t, s, key, operatorChange, "TRIAL_EXPIRED", http.StatusForbidden, "TRIAL_EXPIRED")
		wantError(t, "an ended trial creating a key", s.do(t, "POST", "/v1/api-keys", key, map[string]any{"name": "x"}),
			http.StatusForbidden, "TRIAL_EXPIRED")
	}

	// Choosing a paid plan ends the lock-out.
	cli(t, db, "tenant", "plan", tn.ID, "starter")
	for _, key := range []string{tn.Live, tn.Test} {
		awaitStatus(t, s, key, operatorChange, "the tenant working on starter", http.StatusOK, "")
	}

	// A tenant that is not on the trial plan is not affected by a trial end
	// in the past. Nothing of it is cached before the change.
	paid := newTenant(t, db, "--plan", "starter")
	cli(t, db, "tenant", "trial", paid.ID, "--ends", past)
	apiListKeys(t, s, paid.Live)
	apiListKeys(t, s, paid.Test)

	// A trial that ends in the future is fine.
	trial := newTenant(t, db)
	cli(t, db, "tenant", "trial", trial.ID, "--ends", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	apiListKeys(t, s, trial.Live)
}

func testAuthTenantIsolation(t *testing.T, s *server, db string) {
	a := newTenant(t, db)
	b := newTenant(t, db)
	created := apiCreateKey(t, s, a.Live, map[string]any{"name": "a's key"})
	aKeys := apiListKeys(t, s, a.Live)
	if len(aKeys) != 3 {
		t.Fatalf("tenant A has %d keys, want 3", len(aKeys))
	}

	for key, n := range map[string]int{b.Live: 2, b.Test: 1} { // a test key lists test keys only
		r := s.do(t, "GET", "/v1/api-keys", key, nil)
		if r.Status != http.StatusOK || len(r.List()) != n {
			t.Fatalf("tenant B's list: %d %s", r.Status, r.Raw)
		}
		for _, k := range aKeys {
			if findByID(r.List(), k["id"]) != nil || strings.Contains(string(r.Raw), k["id"].(string)) {
				t.Errorf("tenant B sees tenant A's key %v", k["id"])
			}
		}
	}

	// B cannot revoke A's keys; the answer is the one for an id that does not exist.
	absent := s.do(t, "DELETE", "/v1/api-keys/01ARZ3NDEKTSV4RRFFQ69G5FAV", b.Live, nil)
	wantError(t, "revoking an absent key", absent, http.StatusNotFound, "NOT_FOUND")
	for _, k := range aKeys {
		for _, key := range []string{b.Live, b.Test} {
			r := s.do(t, "DELETE", "/v1/api-keys/"+k["id"].(string), key, nil)
			wantError(t, "tenant B revoking tenant A's key", r, http.StatusNotFound, "NOT_FOUND")
			if r.Body["error"] != absent.Body["error"] || fmt.Sprint(r.Body["details"]) != fmt.Sprint(absent.Body["details"]) {
				t.Errorf("revoking another tenant's key answers %s, an absent key %s: existence leaks", r.Raw, absent.Raw)
			}
		}
	}
	// A's keys still work and are all still listed.
	apiListKeys(t, s, created["key"].(string))
	apiListKeys(t, s, a.Test)
	if n := len(apiListKeys(t, s, a.Live)); n != 3 {
		t.Errorf("tenant A has %d keys after B's attempts, want 3", n)
	}
}

// TestAuthFailureThrottle: failed authentication is throttled per client
// address: after 20 failures from one address, a key this server
// has not seen authenticate answers 429 RATE_LIMIT_EXCEEDED with
// Retry-After, without a lookup; keys that have authenticated go on
// working. Every test here comes from 127.0.0.1, so it has a server of its
// own.
func TestAuthFailureThrottle(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := newTenant(t, db)
		apiListKeys(t, s, tn.Live) // seen to authenticate
		unknown := func(i int) string { return fmt.Sprintf("svc_live_%032d", i) }
		for i := 0; i < 20; i++ {
			wantError(t, fmt.Sprintf("unknown key %d", i+1), s.do(t, "GET", "/v1/api-keys", unknown(i), nil), http.StatusUnauthorized, "INVALID_API_KEY")
		}
		for _, key := range []string{unknown(100), unknown(0), tn.Test} {
			r := s.do(t, "GET", "/v1/api-keys", key, nil)
			wantError(t, "a key not seen before, from a throttled address", r, http.StatusTooManyRequests, "RATE_LIMIT_EXCEEDED")
			if ra := headerInt(t, r, "Retry-After"); ra < 1 || ra > 3 {
				t.Errorf("Retry-After %d, want 1..3", ra)
			}
		}
		// Malformed keys cost nothing and are answered as before.
		wantError(t, "a malformed key", s.do(t, "GET", "/v1/api-keys", "svc_live_short", nil), http.StatusUnauthorized, "INVALID_API_KEY")
		// The key that authenticated before goes on working.
		apiListKeys(t, s, tn.Live)
		// No key appears in the logs.
		if logs := s.logs.String(); strings.Contains(logs, unknown(0)[9:]) || strings.Contains(logs, tn.Live[9:]) {
			t.Errorf("a key appears in the logs:\n%s", logs)
		}
	})
}
