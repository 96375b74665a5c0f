package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

func seg(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hs256(secret []byte, hdr, claims any) string {
	s := seg(hdr) + "." + seg(claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(s))
	return s + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func TestIdentityProviderVerify(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	p := &IdentityProvider{Secret: secret, Issuer: "https://idp.example", Audience: "switchboard"}
	hdr := map[string]string{"alg": "HS256", "typ": "JWT"}
	good := map[string]any{"iss": "https://idp.example", "aud": "switchboard", "sub": "u1", "tenant_id": "T1", "exp": now.Unix() + 60}
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range good {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	cases := []struct {
		name  string
		token string
		want  sb.Code
	}{
		{"valid", hs256(secret, hdr, good), ""},
		{"audience list", hs256(secret, hdr, with("aud", []string{"other", "switchboard"})), ""},
		{"expired", hs256(secret, hdr, with("exp", now.Unix()-1)), sb.CodeTokenExpired},
		{"expired but forged", hs256([]byte("wrong-secret-wrong-secret-wrong!"), hdr, with("exp", now.Unix()-1)), sb.CodeInvalidToken},
		{"bad signature", hs256([]byte("wrong-secret-wrong-secret-wrong!"), hdr, good), sb.CodeInvalidToken},
		{"alg none", seg(map[string]string{"alg": "none"}) + "." + seg(good) + ".", sb.CodeInvalidToken},
		{"wrong issuer", hs256(secret, hdr, with("iss", "https://evil.example")), sb.CodeInvalidToken},
		{"wrong audience", hs256(secret, hdr, with("aud", "other")), sb.CodeInvalidToken},
		{"no exp", hs256(secret, hdr, with("exp", nil)), sb.CodeInvalidToken},
		{"no tenant", hs256(secret, hdr, with("tenant_id", nil)), sb.CodeInvalidToken},
		{"not yet valid", hs256(secret, hdr, with("nbf", now.Unix()+3600)), sb.CodeInvalidToken},
		{"bad environment", hs256(secret, hdr, with("environment", "prod")), sb.CodeInvalidToken},
		{"garbage", "a.b.c", sb.CodeInvalidToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.verify(tc.token, now)
			if got := sb.ErrorCode(err); got != tc.want {
				t.Fatalf("code %q, want %q (err %v)", got, tc.want, err)
			}
		})
	}
}

func TestIdentityProviderAsymmetric(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p := &IdentityProvider{Keys: map[string]crypto.PublicKey{"r1": &rk.PublicKey, "e1": &ek.PublicKey}, Issuer: "https://idp.example", Audience: "switchboard"}
	claims := map[string]any{"iss": "https://idp.example", "aud": "switchboard", "sub": "u1", "tenant_id": "T1", "exp": now.Unix() + 60, "environment": "test"}

	signed := seg(map[string]string{"alg": "RS256", "kid": "r1"}) + "." + seg(claims)
	d := sha256.Sum256([]byte(signed))
	sig, _ := rsa.SignPKCS1v15(rand.Reader, rk, crypto.SHA256, d[:])
	if c, err := p.verify(signed+"."+base64.RawURLEncoding.EncodeToString(sig), now); err != nil || c.Environment != "test" {
		t.Fatalf("RS256: %v %+v", err, c)
	}
	// The same token naming the EC key must fail.
	wrongKid := seg(map[string]string{"alg": "RS256", "kid": "e1"}) + "." + seg(claims)
	if _, err := p.verify(wrongKid+"."+base64.RawURLEncoding.EncodeToString(sig), now); sb.ErrorCode(err) != sb.CodeInvalidToken {
		t.Fatalf("RS256 with EC kid: %v", err)
	}

	signed = seg(map[string]string{"alg": "ES256", "kid": "e1"}) + "." + seg(claims)
	d = sha256.Sum256([]byte(signed))
	r, s, _ := ecdsa.Sign(rand.Reader, ek, d[:])
	raw := make([]byte, 64)
	r.FillBytes(raw[:32])
	s.FillBytes(raw[32:])
	if _, err := p.verify(signed+"."+base64.RawURLEncoding.EncodeToString(raw), now); err != nil {
		t.Fatalf("ES256: %v", err)
	}
	// HS256 is refused when no secret is configured (no key confusion).
	if _, err := p.verify(hs256(nil, map[string]string{"alg": "HS256"}, claims), now); sb.ErrorCode(err) != sb.CodeInvalidToken {
		t.Fatalf("HS256 without a secret: %v", err)
	}
}

// TestIdentityProviderCheck: a provider without a required issuer and
// audience, or with a short HS256 secret, is refused; verify, too, accepts
// no token when either is unset.
func TestIdentityProviderCheck(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef") // 32 bytes
	keys := map[string]crypto.PublicKey{"k": nil}
	cases := []struct {
		p    IdentityProvider
		want string // "" for none
	}{
		{IdentityProvider{Secret: secret, Issuer: "i", Audience: "a"}, ""},
		{IdentityProvider{Keys: keys, Issuer: "i", Audience: "a"}, ""},
		{IdentityProvider{Secret: secret[:31], Issuer: "i", Audience: "a"}, "at least 32 bytes"},
		{IdentityProvider{Secret: secret, Audience: "a"}, "--idp-issuer"},
		{IdentityProvider{Secret: secret, Issuer: "i"}, "--idp-audience"},
		{IdentityProvider{Keys: keys, Issuer: "i"}, "--idp-audience"},
		{IdentityProvider{Issuer: "i", Audience: "a"}, "--idp-hs256-secret or --idp-jwks"},
		{IdentityProvider{Keys: map[string]crypto.PublicKey{}, Issuer: "i", Audience: "a"}, "--idp-hs256-secret or --idp-jwks"},
	}
	for i, c := range cases {
		err := c.p.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("case %d: %v, want none", i, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("case %d: %v, want an error naming %s", i, err, c.want)
		case err != nil && strings.Contains(err.Error(), string(secret[:31])):
			t.Errorf("case %d: the error shows the secret: %v", i, err)
		}
	}

	// Each provider below lacks one of issuer and audience; the token
	// matches the one it has, and names none or an empty one for the other.
	now := time.Unix(1_800_000_000, 0)
	hdr := map[string]string{"alg": "HS256"}
	for _, c := range []struct {
		p      *IdentityProvider
		claims map[string]any
	}{
		{&IdentityProvider{Secret: secret, Audience: "a"}, map[string]any{"iss": "", "aud": "a"}},
		{&IdentityProvider{Secret: secret, Audience: "a"}, map[string]any{"aud": "a"}},
		{&IdentityProvider{Secret: secret, Issuer: "i"}, map[string]any{"iss": "i", "aud": ""}},
		{&IdentityProvider{Secret: secret, Issuer: "i"}, map[string]any{"iss": "i"}},
	} {
		c.claims["tenant_id"], c.claims["exp"] = "T1", now.Unix()+60
		if _, err := c.p.verify(hs256(secret, hdr, c.claims), now); sb.ErrorCode(err) != sb.CodeInvalidToken {
			t.Errorf("provider %+v accepted %v: %v", c.p, c.claims, err)
		}
	}
}

// TestTokenScopes: key management needs the scope keys:write, in "scope"
// (space-separated, RFC 8693) or "scp" (an array, or a string).
func TestTokenScopes(t *testing.T) {
	cases := map[string]bool{
		`{}`:                                    false,
		`{"scope": "openid profile"}`:           false,
		`{"scope": "keys:write"}`:               true,
		`{"scope": "openid keys:write email"}`:  true,
		`{"scope": "  keys:write\t"}`:           true,
		`{"scope": "keys:writer keys:read"}`:    false,
		`{"scope": "KEYS:WRITE"}`:               false,
		`{"scope": ["keys:write"]}`:             false, // "scope" is a string
		`{"scope": 1}`:                          false,
		`{"scp": ["openid", "keys:write"]}`:     true,
		`{"scp": "keys:write"}`:                 true,
		`{"scp": ["keys:write openid"]}`:        false, // an array's items are whole scopes
		`{"scp": {"keys:write": true}}`:         false,
		`{"scope": "openid", "scp": ["other"]}`: false,
	}
	for raw, want := range cases {
		var c tokenClaims
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		p := &Principal{ViaToken: true, Scopes: c.scopes()}
		if got := p.MayManageKeys(); got != want {
			t.Errorf("%s: may manage keys %v, want %v (scopes %q)", raw, got, want, c.scopes())
		}
	}
	if !(&Principal{}).MayManageKeys() {
		t.Error("an API key may not manage keys")
	}
}
