// Package auth turns an Authorization header into a Principal: the key, its
// tenant and plan, after every check of authentication (docs/api.md)
// (INVALID_API_KEY, KEY_INACTIVE, TENANT_SUSPENDED, TRIAL_EXPIRED). It keeps
// keys and tenants in a short-lived cache so that a request costs no database
// read, drops entries at once when told of a change (revocation on this node,
// or a notification from another node), and records last use in batches.
//
// It does not rate-limit or meter; see Meter and package ratelimit.
package auth

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/clientip"
)

// Store is what authentication needs from storage.
type Store interface {
	KeyByHash(ctx context.Context, hash string) (*sb.APIKey, error)
	Tenant(ctx context.Context, id string) (*sb.Tenant, error)
	TouchKeys(ctx context.Context, used map[string]time.Time) error
}

// Principal is an authenticated caller.
type Principal struct {
	Key    *sb.APIKey
	Tenant *sb.Tenant
	Plan   sb.Plan
	// Env is the environment of the key: every resource the request touches
	// lives in it.
	Env sb.Environment
	// RateLimit is the key's per-minute limit now; 0 means unlimited.
	RateLimit int
	// ViaToken is set when an identity-provider token, not an API key,
	// authenticated the request; Key is then synthetic.
	ViaToken bool
	// Scopes are the scopes a token grants (none for an API key).
	Scopes []string
}

// MayManageKeys reports whether the principal may create and revoke API
// keys: an API key may; a token only with the scope ScopeKeysWrite.
func (p *Principal) MayManageKeys() bool {
	return !p.ViaToken || slices.Contains(p.Scopes, ScopeKeysWrite)
}

// DefaultTTL bounds how long a cached key or tenant may be used without
// re-reading it. Changes made through this node, and on PostgreSQL through
// any node, take effect at once; an operator command against SQLite takes
// effect within this time.
const DefaultTTL = time.Second

type keyEntry struct {
	key     *sb.APIKey
	fetched time.Time
}

type tenantEntry struct {
	tenant  *sb.Tenant
	fetched time.Time
}

// Authenticator authenticates requests. It is safe for concurrent use.
type Authenticator struct {
	store Store
	plans sb.Plans
	now   func() time.Time
	ttl   time.Duration

	keys    sync.Map // key hash -> *keyEntry
	tenants sync.Map // tenant id -> *tenantEntry
	// forgets counts ForgetKey, ForgetTenant and Reset calls. A lookup that
	// raced with one may have read storage before the change: it does not
	// keep what it read in the cache.
	forgets atomic.Uint64

	mu   sync.Mutex
	used map[string]time.Time // key id -> last use not yet written

	idp *IdentityProvider // nil: API keys only

	misses   missCache       // well-formed keys not found (see throttle.go)
	failures FailureThrottle // failed authentication per client address
}

// UseIdentityProvider makes bearer tokens shaped like JWTs authenticate
// through p.
func (a *Authenticator) UseIdentityProvider(p *IdentityProvider) { a.idp = p }

// New returns an Authenticator over store with the plan table plans.
func New(store Store, plans sb.Plans, now func() time.Time) *Authenticator {
	if now == nil {
		now = time.Now
	}
	return &Authenticator{store: store, plans: plans, now: now, ttl: DefaultTTL, used: map[string]time.Time{}}
}

// BearerToken returns the credentials of an Authorization header value of
// the Bearer scheme. The scheme is case-insensitive and followed by one or
// more spaces (RFC 9110 section 11.4): "Bearer", "bearer" and "BEARER" are
// the same.
func BearerToken(header string) (string, bool) {
	const scheme = "Bearer"
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) || header[len(scheme)] != ' ' {
		return "", false
	}
	token := strings.TrimLeft(header[len(scheme):], " ")
	return token, token != ""
}

var errInvalidKey = sb.Errorf(sb.CodeInvalidAPIKey, "Missing or invalid API key. Send Authorization: Bearer <API_KEY>.")

// Authenticate checks the Authorization header value of a request from the
// client address client (an IP address; "" when unknown, which is never
// throttled) and returns the principal, or an *sb.Error: INVALID_API_KEY
// (401), KEY_INACTIVE, TENANT_SUSPENDED or TRIAL_EXPIRED (403), in that
// order; or a *Throttled (RATE_LIMIT_EXCEEDED) when the client has failed
// too often (see throttle.go).
func (a *Authenticator) Authenticate(ctx context.Context, header, client string) (*Principal, error) {
	text, ok := BearerToken(header)
	if !ok {
		return nil, errInvalidKey
	}
	if client != "" {
		client = clientip.KeyOf(client) // an IPv6 client by its /64
	}
	if _, ok := sb.ParseKeyText(text); !ok {
		if a.idp != nil && looksLikeJWT(text) {
			return a.authenticateToken(ctx, text, client)
		}
		return nil, errInvalidKey // costs nothing: not counted
	}
	hash := sb.HashKey(text)
	if _, seen := a.keys.Load(hash); !seen {
		// Not a key this node has seen authenticate: a throttled client
		// gets no lookup, and a recent miss needs none.
		if err := a.throttled(client); err != nil {
			return nil, err
		}
		if a.misses.has(hash, a.now()) {
			return nil, a.failed(client, errInvalidKey)
		}
	}
	key, err := a.key(ctx, hash)
	if err != nil {
		if err == errInvalidKey {
			return nil, a.failed(client, err)
		}
		return nil, err
	}
	// The lookup was by hash; compare again in constant time so that no
	// code path depends on how much of a wrong hash matched.
	if subtle.ConstantTimeCompare([]byte(key.Hash), []byte(hash)) != 1 || key.Status == sb.KeyRevoked {
		return nil, a.failed(client, errInvalidKey)
	}
	if key.Status != sb.KeyActive {
		return nil, sb.Errorf(sb.CodeKeyInactive, "This API key is deactivated.")
	}
	tenant, err := a.tenant(ctx, key.TenantID)
	if err != nil {
		return nil, err
	}
	now := a.now()
	if err := tenant.Access(now); err != nil {
		return nil, err
	}
	plan := a.plans[tenant.Plan]
	a.markUsed(key.ID, now)
	return &Principal{Key: key, Tenant: tenant, Plan: plan, Env: key.Environment, RateLimit: key.EffectiveRateLimit(plan)}, nil
}

func (a *Authenticator) key(ctx context.Context, hash string) (*sb.APIKey, error) {
	if e, ok := a.keys.Load(hash); ok {
		ke := e.(*keyEntry)
		if a.now().Sub(ke.fetched) < a.ttl {
			return ke.key, nil
		}
	}
	fetched, forgets := a.now(), a.forgets.Load()
	key, err := a.store.KeyByHash(ctx, hash)
	if err != nil {
		if sb.ErrorCode(err) == sb.CodeNotFound {
			a.keys.Delete(hash)
			a.misses.add(hash, fetched)
			return nil, errInvalidKey
		}
		return nil, err
	}
	a.keys.Store(hash, &keyEntry{key: key, fetched: fetched})
	if a.forgets.Load() != forgets {
		a.keys.Delete(hash) // maybe read before a revocation: do not keep it
	}
	return key, nil
}

func (a *Authenticator) tenant(ctx context.Context, id string) (*sb.Tenant, error) {
	if e, ok := a.tenants.Load(id); ok {
		te := e.(*tenantEntry)
		if a.now().Sub(te.fetched) < a.ttl {
			return te.tenant, nil
		}
	}
	fetched, forgets := a.now(), a.forgets.Load()
	t, err := a.store.Tenant(ctx, id)
	if err != nil {
		return nil, err
	}
	a.tenants.Store(id, &tenantEntry{tenant: t, fetched: fetched})
	if a.forgets.Load() != forgets {
		a.tenants.Delete(id)
	}
	return t, nil
}

// TenantAccess decides, through the cache, whether the tenant id may make
// requests now: nil, or an *sb.Error with TENANT_SUSPENDED or
// TRIAL_EXPIRED. The device protocol asks it of a phone's tenant.
func (a *Authenticator) TenantAccess(ctx context.Context, id string) error {
	t, err := a.tenant(ctx, id)
	if err != nil {
		return err
	}
	return t.Access(a.now())
}

// ForgetKey drops a key from the cache, so that its next use reads storage.
func (a *Authenticator) ForgetKey(hash string) {
	a.forgets.Add(1)
	a.keys.Delete(hash)
}

// ForgetTenant drops a tenant from the cache.
func (a *Authenticator) ForgetTenant(id string) {
	a.forgets.Add(1)
	a.tenants.Delete(id)
}

// Reset drops everything cached.
func (a *Authenticator) Reset() {
	a.forgets.Add(1)
	a.keys.Clear()
	a.tenants.Clear()
	a.misses.clear()
}

func (a *Authenticator) markUsed(keyID string, at time.Time) {
	a.mu.Lock()
	a.used[keyID] = at
	a.mu.Unlock()
}

// FlushUsed writes pending last-use times to storage.
func (a *Authenticator) FlushUsed(ctx context.Context) error {
	a.mu.Lock()
	used := a.used
	if len(used) == 0 {
		a.mu.Unlock()
		return nil
	}
	a.used = make(map[string]time.Time, len(used))
	a.mu.Unlock()
	return a.store.TouchKeys(ctx, used)
}

// Run flushes last-use times every interval until ctx ends, then once more.
// With an interval of half a second and key lists cached for as long
// (sqlstore), last_used_at reflects a use within about a second: the
// API's promise of 2 s with room for a loaded machine.
func (a *Authenticator) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := a.FlushUsed(context.WithoutCancel(ctx)); err != nil {
				slog.Error("flushing key last use", "err", err)
			}
			return
		case <-t.C:
			if err := a.FlushUsed(ctx); err != nil && ctx.Err() == nil {
				slog.Error("flushing key last use", "err", err)
			}
		}
	}
}
