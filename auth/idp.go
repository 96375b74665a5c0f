package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// IdentityProvider verifies bearer tokens (JWTs) issued by an external
// identity provider, the second way to authenticate (docs/api.md). A
// token names its tenant in the claim "tenant_id" and may name an
// environment in "environment" ("live", the default, or "test"); it must
// carry "exp", and "iss" and "aud" must name this service (Check requires
// both to be configured). HS256 tokens are checked with a shared secret,
// RS256 and ES256 tokens with the public keys of a JWKS document.
//
// A token may use the API as its tenant's keys do, except key management
// (creating and revoking API keys: a key would outlive the token and the
// user's removal at the provider), which needs the scope ScopeKeysWrite in
// the claim "scope" (a space-separated string, RFC 8693 section 4.2) or "scp"
// (an array of strings, or a string, as some providers write it).
//
// An authentic token past its "exp" is TOKEN_EXPIRED; anything else wrong
// (malformed, unknown algorithm or key, bad signature, wrong issuer or
// audience, not yet valid, no tenant) is INVALID_TOKEN. Expiry is only
// reported for tokens whose signature holds, so a forged token learns
// nothing.
type IdentityProvider struct {
	Secret   []byte                      // HS256 key; empty disables HS256
	Keys     map[string]crypto.PublicKey // JWKS keys by "kid"
	Issuer   string                      // required "iss"
	Audience string                      // required in "aud"
	Leeway   time.Duration               // clock skew allowed on exp and nbf
}

// MinSecretLength is the shortest HS256 secret accepted, in bytes: the
// length of the SHA-256 output, as RFC 7518 section 3.2 requires.
const MinSecretLength = 32

// ScopeKeysWrite is the scope a token needs to create or revoke API keys.
const ScopeKeysWrite = "keys:write"

// Check reports a configuration that would accept tokens it should not: an
// HS256 secret shorter than MinSecretLength, no required issuer or audience
// (a shared provider's tokens for other applications would pass), or no key
// to check signatures with. Its errors name the serve flags and never the
// secret.
func (p *IdentityProvider) Check() error {
	switch {
	case len(p.Secret) > 0 && len(p.Secret) < MinSecretLength:
		return fmt.Errorf("identity provider: --idp-hs256-secret must be at least %d bytes (it is %d)", MinSecretLength, len(p.Secret))
	case p.Issuer == "":
		return errors.New("identity provider: --idp-issuer is required (the iss claim tokens must carry)")
	case p.Audience == "":
		return errors.New("identity provider: --idp-audience is required (the aud claim tokens must carry)")
	case len(p.Secret) == 0 && len(p.Keys) == 0:
		return errors.New("identity provider: set --idp-hs256-secret or --idp-jwks (a JWKS file with at least one key) to check token signatures")
	}
	return nil
}

// LoadJWKS reads a JWKS document (RSA and P-256 EC keys) from path.
func LoadJWKS(path string) (map[string]crypto.PublicKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Keys []struct {
			Kid, Kty, N, E, Crv, X, Y string
		} `json:"keys"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("jwks %s: %w", path, err)
	}
	keys := map[string]crypto.PublicKey{}
	for _, k := range doc.Keys {
		switch k.Kty {
		case "RSA":
			n, err1 := base64.RawURLEncoding.DecodeString(k.N)
			e, err2 := base64.RawURLEncoding.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(e) > 4 {
				return nil, fmt.Errorf("jwks %s: bad RSA key %q", path, k.Kid)
			}
			keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case "EC":
			if k.Crv != "P-256" {
				return nil, fmt.Errorf("jwks %s: key %q: only P-256 is supported", path, k.Kid)
			}
			x, err1 := base64.RawURLEncoding.DecodeString(k.X)
			y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("jwks %s: bad EC key %q", path, k.Kid)
			}
			keys[k.Kid] = &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
		}
	}
	return keys, nil
}

var (
	errInvalidToken = sb.Errorf(sb.CodeInvalidToken, "The identity-provider token is not valid.")
	errTokenExpired = sb.Errorf(sb.CodeTokenExpired, "The identity-provider token has expired. Get a new one from your identity provider.")
)

// looksLikeJWT reports whether a bearer credential has the form of a JWT
// (three base64url parts) rather than of an API key.
func looksLikeJWT(s string) bool {
	return strings.Count(s, ".") == 2 && !strings.HasPrefix(s, "svc_")
}

type tokenClaims struct {
	Iss         string          `json:"iss"`
	Sub         string          `json:"sub"`
	Aud         json.RawMessage `json:"aud"`
	Exp         *float64        `json:"exp"`
	Nbf         *float64        `json:"nbf"`
	TenantID    string          `json:"tenant_id"`
	Environment string          `json:"environment"`
	Scope       json.RawMessage `json:"scope"`
	Scp         json.RawMessage `json:"scp"`
}

// scopes returns the scopes the token grants: "scope" as a space-separated
// string, and "scp" as an array of strings or a space-separated string.
// Anything else grants nothing.
func (c *tokenClaims) scopes() []string {
	var out []string
	var one string
	if json.Unmarshal(c.Scope, &one) == nil {
		out = append(out, strings.Fields(one)...)
	}
	var many []string
	if json.Unmarshal(c.Scp, &one) == nil {
		out = append(out, strings.Fields(one)...)
	} else if json.Unmarshal(c.Scp, &many) == nil {
		out = append(out, many...)
	}
	return out
}

// Verify checks token at now and returns its claims.
func (p *IdentityProvider) verify(token string, now time.Time) (*tokenClaims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errInvalidToken
	}
	var hdr struct{ Alg, Kid string }
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return nil, errInvalidToken
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, errInvalidToken
	}
	signed := []byte(parts[0] + "." + parts[1])
	digest := sha256.Sum256(signed)
	switch hdr.Alg {
	case "HS256":
		if len(p.Secret) == 0 {
			return nil, errInvalidToken
		}
		mac := hmac.New(sha256.New, p.Secret)
		mac.Write(signed)
		if !hmac.Equal(mac.Sum(nil), sig) {
			return nil, errInvalidToken
		}
	case "RS256":
		key, ok := p.Keys[hdr.Kid].(*rsa.PublicKey)
		if !ok || rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig) != nil {
			return nil, errInvalidToken
		}
	case "ES256":
		key, ok := p.Keys[hdr.Kid].(*ecdsa.PublicKey)
		if !ok || len(sig) != 64 ||
			!ecdsa.Verify(key, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			return nil, errInvalidToken
		}
	default: // "none" and everything else
		return nil, errInvalidToken
	}
	var c tokenClaims
	if err := decodeSegment(parts[1], &c); err != nil {
		return nil, errInvalidToken
	}
	if p.Issuer == "" || c.Iss != p.Issuer {
		return nil, errInvalidToken
	}
	if p.Audience == "" || !audienceHas(c.Aud, p.Audience) {
		return nil, errInvalidToken
	}
	if c.Nbf != nil && now.Add(p.Leeway).Before(unixFloat(*c.Nbf)) {
		return nil, errInvalidToken
	}
	if c.TenantID == "" || c.Exp == nil {
		return nil, errInvalidToken
	}
	if env := sb.Environment(c.Environment); c.Environment != "" && !env.Valid() {
		return nil, errInvalidToken
	}
	if !now.Add(-p.Leeway).Before(unixFloat(*c.Exp)) {
		return nil, errTokenExpired
	}
	return &c, nil
}

func unixFloat(f float64) time.Time {
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9))
}

func audienceHas(raw json.RawMessage, want string) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		for _, a := range many {
			if a == want {
				return true
			}
		}
	}
	return false
}

func decodeSegment(seg string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errors.New("bad json")
	}
	return nil
}

// authenticateToken turns a verified token into a principal of its tenant.
// The principal's key is synthetic (never stored): it names the token's
// subject, so each subject has its own rate-limit bucket at the plan's limit.
//
// A token that fails counts against client's failed authentications; once
// client is throttled, a failing token answers RATE_LIMIT_EXCEEDED. A valid
// token costs only its checks, so it is accepted from a throttled client.
func (a *Authenticator) authenticateToken(ctx context.Context, token, client string) (*Principal, error) {
	now := a.now()
	c, err := a.idp.verify(token, now)
	var tenant *sb.Tenant
	if err == nil {
		tenant, err = a.tenant(ctx, c.TenantID)
		if sb.ErrorCode(err) == sb.CodeNotFound {
			err = errInvalidToken
		}
	}
	if code := sb.ErrorCode(err); code == sb.CodeInvalidToken || code == sb.CodeTokenExpired {
		if th := a.throttled(client); th != nil {
			return nil, th
		}
		return nil, a.failed(client, err)
	}
	if err != nil {
		return nil, err
	}
	if err := tenant.Access(now); err != nil {
		return nil, err
	}
	env := sb.Live
	if c.Environment != "" {
		env = sb.Environment(c.Environment)
	}
	plan := a.plans[tenant.Plan]
	key := &sb.APIKey{ID: "idp:" + tenant.ID + ":" + c.Sub, TenantID: tenant.ID, Name: "identity provider", Environment: env, Status: sb.KeyActive}
	return &Principal{Key: key, Tenant: tenant, Plan: plan, Env: env, RateLimit: key.EffectiveRateLimit(plan), ViaToken: true,
		Scopes: c.scopes()}, nil
}
