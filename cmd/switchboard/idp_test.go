package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
// from an external identity provider (TOKEN_EXPIRED, INVALID_TOKEN).
func TestIdentityProviderTokens(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		const secret = "idp-shared-secret-0123456789abcdef"
		const iss = "https://idp.example"
		s := startServer(t, db, "--idp-hs256-secret", secret, "--idp-issuer", iss, "--idp-audience", "switchboard")
		tn := newTenant(t, db)
		other := newTenant(t, db)
		exp := time.Now().Add(time.Hour).Unix()
		claims := func(extra ...any) map[string]any {
			c := map[string]any{"iss": iss, "sub": "ada", "aud": "switchboard", "tenant_id": tn.ID, "exp": exp}
			for i := 0; i+1 < len(extra); i += 2 {
				if extra[i+1] == nil {
					delete(c, extra[i].(string))
				} else {
					c[extra[i].(string)] = extra[i+1]
				}
			}
			return c
		}

		good := jwtHS256(t, secret, claims())
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
		// Key management needs the scope keys:write: a token without it
		// cannot mint a key that would outlive it, nor revoke one.
		keyID := r.List()[0]["id"].(string)
		for name, tok := range map[string]string{
			"no scope":           good,
			"other scopes":       jwtHS256(t, secret, claims("scope", "openid keys:read messages:write")),
			"scope as a prefix":  jwtHS256(t, secret, claims("scope", "keys:writer")),
			"scope not a string": jwtHS256(t, secret, claims("scope", []string{"keys:write"})),
		} {
			r := s.do(t, "POST", "/v1/api-keys", tok, map[string]any{"name": "minted"})
			if r.Status != http.StatusForbidden || r.Code() != "FORBIDDEN" {
				t.Errorf("%s: creating a key: %d %s, want 403 FORBIDDEN", name, r.Status, r.Raw)
			}
			r = s.do(t, "DELETE", "/v1/api-keys/"+keyID, tok, nil)
			if r.Status != http.StatusForbidden || r.Code() != "FORBIDDEN" {
				t.Errorf("%s: revoking a key: %d %s, want 403 FORBIDDEN", name, r.Status, r.Raw)
			}
		}
		for name, tok := range map[string]string{
			"scope":     jwtHS256(t, secret, claims("scope", "openid keys:write")),
			"scp array": jwtHS256(t, secret, claims("scp", []string{"openid", "keys:write"})),
		} {
			r := s.do(t, "POST", "/v1/api-keys", tok, map[string]any{"name": "minted " + name})
			if r.Status != http.StatusCreated {
				t.Fatalf("%s: creating a key: %d %s, want 201", name, r.Status, r.Raw)
			}
			if r := s.do(t, "DELETE", "/v1/api-keys/"+r.Data()["id"].(string), tok, nil); r.Status != http.StatusOK {
				t.Errorf("%s: revoking the key: %d %s, want 200", name, r.Status, r.Raw)
			}
		}

		// A test-environment token sees test data only and cannot create live keys.
		testTok := jwtHS256(t, secret, claims("environment", "test", "scope", "keys:write"))
		r = s.do(t, "POST", "/v1/api-keys", testTok, map[string]any{"name": "x", "environment": "live"})
		if r.Status != http.StatusForbidden || r.Code() != "FORBIDDEN" {
			t.Fatalf("test token creating a live key: %d %s", r.Status, r.Raw)
		}

		cases := map[string]struct {
			token string
			code  string
		}{
			"expired":        {jwtHS256(t, secret, claims("exp", time.Now().Add(-time.Hour).Unix())), "TOKEN_EXPIRED"},
			"wrong secret":   {jwtHS256(t, "another-secret-0123456789abcdefgh", claims()), "INVALID_TOKEN"},
			"wrong audience": {jwtHS256(t, secret, claims("aud", "billing")), "INVALID_TOKEN"},
			"no audience":    {jwtHS256(t, secret, claims("aud", nil)), "INVALID_TOKEN"},
			"wrong issuer":   {jwtHS256(t, secret, claims("iss", "https://other-app.example")), "INVALID_TOKEN"},
			"no issuer":      {jwtHS256(t, secret, claims("iss", nil)), "INVALID_TOKEN"},
			"unknown tenant": {jwtHS256(t, secret, claims("tenant_id", "01NOSUCHTENANT")), "INVALID_TOKEN"},
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
	t.Parallel()
	db := sqliteURL(t)
	s := startServer(t, db)
	tn := newTenant(t, db)
	tok := jwtHS256(t, "whatever-secret-0123456789abcdef", map[string]any{"tenant_id": tn.ID, "exp": time.Now().Add(time.Hour).Unix()})
	r := s.do(t, "GET", "/v1/api-keys", tok, nil)
	if r.Status != http.StatusUnauthorized || r.Code() != "INVALID_API_KEY" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
}

// TestIdentityProviderConfig: serve refuses to start, with a one-line
// reason, when an identity provider is configured without the issuer and
// audience that keep tokens of other applications of a shared provider out,
// or with an HS256 secret shorter than 32 bytes.
func TestIdentityProviderConfig(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, []byte(`{"keys": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "idp-shared-secret-0123456789abcdef" // 34 bytes
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--idp-hs256-secret", secret, "--idp-audience", "switchboard"}, "--idp-issuer"},
		{[]string{"--idp-hs256-secret", secret, "--idp-issuer", "https://idp.example"}, "--idp-audience"},
		{[]string{"--idp-jwks", jwks}, "--idp-issuer"},
		{[]string{"--idp-jwks", jwks, "--idp-issuer", "https://idp.example"}, "--idp-audience"},
		{[]string{"--idp-hs256-secret", secret[:31], "--idp-issuer", "https://idp.example", "--idp-audience", "switchboard"}, "32 bytes"},
		{[]string{"--idp-issuer", "https://idp.example", "--idp-audience", "switchboard"}, "--idp-hs256-secret or --idp-jwks"},
	} {
		// serve makes its logger the process default: other tests' servers
		// may write to it at once.
		var stdout, stderr syncBuffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--database", db}, c.args...), noEnv, &stdout, &stderr)
		cancel()
		if err == nil {
			t.Errorf("serve %v started", c.args)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) || strings.Contains(msg, secret[:31]) {
			t.Errorf("serve %v: reason %q, want one line naming %s (and no secret)", c.args, msg, c.want)
		}
		if strings.Contains(stderr.String(), `"msg":"listening"`) {
			t.Errorf("serve %v listened before refusing", c.args)
		}
	}
}
