package httpapi

import (
	"context"
	"math"
	"net/http"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
)

// KeyStore is what the API-key routes need from storage.
type KeyStore interface {
	CreateKey(ctx context.Context, k *sb.APIKey) error
	Keys(ctx context.Context, tenantID string) ([]*sb.APIKey, error)
	RevokeKey(ctx context.Context, tenantID, id string, now time.Time) (*sb.APIKey, error)
}

// keyJSON is the API form of a key. Key is set only in the creation response.
type keyJSON struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Key         string     `json:"key,omitempty"`
	KeyHint     string     `json:"key_hint"`
	Environment string     `json:"environment"`
	Status      string     `json:"status"`
	RateLimit   *int       `json:"rate_limit"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

func toKeyJSON(k *sb.APIKey, plan sb.Plan) keyJSON {
	out := keyJSON{
		ID: k.ID, Name: k.Name, KeyHint: k.Hint, Environment: string(k.Environment),
		Status: k.Status, LastUsedAt: k.LastUsedAt, CreatedAt: k.CreatedAt,
	}
	if limit := k.EffectiveRateLimit(plan); limit > 0 {
		out.RateLimit = &limit
	}
	return out
}

// MaxKeyRateLimit is the largest per-minute limit a key may have: the
// limiter spaces requests in whole microseconds, so it cannot enforce more
// than one per microsecond. Without this bound a Scale key (no ceiling)
// could be created with a limit that fails every request it makes.
const MaxKeyRateLimit = sb.MaxRateLimit

type createKeyRequest struct {
	Name        *string  `json:"name"`
	RateLimit   *float64 `json:"rate_limit"`
	Environment *string  `json:"environment"`
}

// errKeysScope refuses key management to an identity-provider token
// without the scope that grants it.
var errKeysScope = sb.Errorf(sb.CodeForbidden, "This identity-provider token cannot create or revoke API keys: that needs the scope %q.", auth.ScopeKeysWrite)

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if !p.MayManageKeys() {
		return errKeysScope
	}
	var req createKeyRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return sb.Invalid("name", "name is required.")
	}
	if err := sb.CheckKeyName(*req.Name); err != nil {
		return err
	}
	env := p.Env
	if req.Environment != nil {
		env = sb.Environment(*req.Environment)
		if !env.Valid() {
			return sb.Invalid("environment", `environment must be "live" or "test".`)
		}
	}
	limit := 0
	if req.RateLimit != nil {
		// A whole number, however written: 5 and 5.0 alike (JSON has one
		// number type).
		f := *req.RateLimit
		if f != math.Trunc(f) || f < 1 {
			return sb.Invalid("rate_limit", "rate_limit must be a whole number of at least 1.")
		}
		limit = int(min(f, sb.MaxRateLimit+1)) // above the most: refused as such
		if err := sb.CheckKeyRateLimit(limit, p.Plan); err != nil {
			return err
		}
	}
	if p.Env == sb.Test && env == sb.Live {
		return sb.Errorf(sb.CodeForbidden, "A test key cannot create a live key.")
	}
	text, err := sb.NewKeyText(env)
	if err != nil {
		return err
	}
	k := &sb.APIKey{
		ID: sb.NewID(), TenantID: p.Tenant.ID, Name: *req.Name, Hash: sb.HashKey(text), Hint: sb.KeyHint(text),
		Environment: env, Status: sb.KeyActive, RateLimit: limit, CreatedAt: s.now().UTC().Truncate(time.Microsecond),
	}
	if err := s.cfg.Store.CreateKey(r.Context(), k); err != nil {
		return err
	}
	out := toKeyJSON(k, p.Plan)
	out.Key = text
	writeData(w, http.StatusCreated, out)
	return nil
}

// listKeys lists the tenant's unrevoked keys, oldest first: all of them to a
// live key, and only the test keys to a test key, which is a sandbox
// credential and learns nothing of the live ones.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	keys, err := s.cfg.Store.Keys(r.Context(), p.Tenant.ID)
	if err != nil {
		return err
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		if p.Env == sb.Test && k.Environment != sb.Test {
			continue
		}
		out = append(out, toKeyJSON(k, p.Plan))
	}
	writeData(w, http.StatusOK, out)
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if !p.MayManageKeys() {
		return errKeysScope
	}
	id := r.PathValue("id")
	if p.Env == sb.Test {
		// A sandbox credential may not touch live keys; it learns nothing
		// about whether the id exists unless the key is its own kind.
		keys, err := s.cfg.Store.Keys(r.Context(), p.Tenant.ID)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if k.ID == id && k.Environment == sb.Live {
				return sb.Errorf(sb.CodeForbidden, "A test key cannot revoke a live key.")
			}
		}
	}
	k, err := s.cfg.Store.RevokeKey(r.Context(), p.Tenant.ID, id, s.now())
	if err != nil {
		return err
	}
	s.cfg.Auth.ForgetKey(k.Hash)
	writeData(w, http.StatusOK, map[string]any{"id": k.ID, "revoked": true})
	return nil
}
