package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

func jwtHS256(t *testing.T, secret string, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	s := enc(map[string]string{"alg": "HS256", "typ": "JWT"}) + "." + enc(claims)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(s))
	return s + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TestIdentityProviderTokens covers the second way to authenticate: a JWT
// from an external identity provider (contract section 1: TOKEN_EXPIRED,
// INVALID_TOKEN).
func TestIdentityProviderTokens(t *testing.T) {
	forEachDB(t, func(t *testing.T, db string) {
		const secret = "idp-shared-secret-0123456789abcdef"
		s := startServer(t, db, "--idp-hs256-secret", secret, "--idp-audience", "switchboard")
		tn := newTenant(t, db)
		other := newTenant(t, db)
		exp := time.Now().Add(time.Hour).Unix()

		good := jwtHS256(t, secret, map[string]any{"sub": "ada", "aud": "switchboard", "tenant_id": tn.ID, "exp": exp})
		r := s.do(t, "GET", "/v1/api-keys", good, nil)
		if r.Status != http.StatusOK || len(r.List()) != 2 {
			t.Fatalf("valid token: %d %s", r.Status, r.Raw)
		}
		if r.Header.Get("X-RateLimit-Limit") == "" {
			t.Errorf("token requests are rate limited like keys; no X-RateLimit-Limit")
		}
		// The token sees only its tenant's data.
		for _, k := range r.List() {
			for _, ok := range other.keyHints(t, s) {
				if k["key_hint"] == ok {
					t.Errorf("token of tenant A sees a key of tenant B")
				}
			}
		}
		// A test-environment token sees test data only and cannot create live keys.
		testTok := jwtHS256(t, secret, map[string]any{"sub": "ada", "aud": "switchboard", "tenant_id": tn.ID, "exp": exp, "environment": "test"})
		r = s.do(t, "POST", "/v1/api-keys", testTok, map[string]any{"name": "x", "environment": "live"})
		if r.Status != http.StatusForbidden || r.Code() != "FORBIDDEN" {
			t.Fatalf("test token creating a live key: %d %s", r.Status, r.Raw)
		}

		cases := map[string]struct {
			token string
			code  string
		}{
			"expired":        {jwtHS256(t, secret, map[string]any{"aud": "switchboard", "tenant_id": tn.ID, "exp": time.Now().Add(-time.Hour).Unix()}), "TOKEN_EXPIRED"},
			"wrong secret":   {jwtHS256(t, "another-secret-0123456789abcdefgh", map[string]any{"aud": "switchboard", "tenant_id": tn.ID, "exp": exp}), "INVALID_TOKEN"},
			"wrong audience": {jwtHS256(t, secret, map[string]any{"aud": "billing", "tenant_id": tn.ID, "exp": exp}), "INVALID_TOKEN"},
			"unknown tenant": {jwtHS256(t, secret, map[string]any{"aud": "switchboard", "tenant_id": "01NOSUCHTENANT", "exp": exp}), "INVALID_TOKEN"},
			"tampered":       {good[:len(good)-4] + "AAAA", "INVALID_TOKEN"},
		}
		for name, tc := range cases {
			r := s.do(t, "GET", "/v1/api-keys", tc.token, nil)
			if r.Status != http.StatusUnauthorized || r.Code() != tc.code {
				t.Errorf("%s: %d %s, want 401 %s", name, r.Status, r.Raw, tc.code)
			}
		}

		// Tenant states apply to tokens as to keys.
		cli(t, db, "tenant", "suspend", tn.ID)
		eventually(t, 5*time.Second, "suspension seen by token requests", func() bool {
			return s.do(t, "GET", "/v1/api-keys", good, nil).Code() == "TENANT_SUSPENDED"
		})
	})
}

// keyHints lists the key hints of a tenant, through its live key.
func (tn tenant) keyHints(t *testing.T, s *server) []any {
	var out []any
	for _, k := range s.do(t, "GET", "/v1/api-keys", tn.Live, nil).List() {
		out = append(out, k["key_hint"])
	}
	return out
}

// TestTokensRefusedWithoutIdentityProvider: with no identity provider
// configured, a JWT is just a malformed key.
func TestTokensRefusedWithoutIdentityProvider(t *testing.T) {
	db := sqliteURL(t)
	s := startServer(t, db)
	tn := newTenant(t, db)
	tok := jwtHS256(t, "whatever-secret-0123456789abcdef", map[string]any{"tenant_id": tn.ID, "exp": time.Now().Add(time.Hour).Unix()})
	r := s.do(t, "GET", "/v1/api-keys", tok, nil)
	if r.Status != http.StatusUnauthorized || r.Code() != "INVALID_API_KEY" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
}
