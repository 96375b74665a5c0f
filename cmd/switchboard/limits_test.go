package main

// Rate limits, monthly quotas and the order of checks (docs/api.md).
// Limits are lowered with a --plans file so that a few
// requests reach them. No test waits for a bucket to refill: the limiter's
// own tests do that with a fake clock.

import (
	"net/http"
	"strconv"
	"testing"
)

// headerInt returns the header h of r as an integer, failing the test when
// it is absent or not a whole number.
func headerInt(t testing.TB, r *response, h string) int {
	t.Helper()
	v := r.Header.Get(h)
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s is %q, not a whole number (status %d %s)", h, v, r.Status, r.Raw)
	}
	return n
}

// exhaustRateLimit makes limit requests with key, checking that each one is
// allowed with X-RateLimit-Remaining counting down to 0, then one more,
// which must be 429 RATE_LIMIT_EXCEEDED with a Retry-After of 1 to 60/limit
// seconds (rounded up).
//
// The countdown assumes that the requests take less than 60/limit seconds
// in all, the time the bucket needs to gain one request back.
func exhaustRateLimit(t testing.TB, s *server, key string, limit int) {
	t.Helper()
	for i := 1; i <= limit; i++ {
		r := s.do(t, "GET", "/v1/api-keys", key, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("request %d of %d: %d %s", i, limit, r.Status, r.Raw)
		}
		if got := headerInt(t, r, "X-RateLimit-Limit"); got != limit {
			t.Errorf("request %d: X-RateLimit-Limit %d, want %d", i, got, limit)
		}
		if got := headerInt(t, r, "X-RateLimit-Remaining"); got != limit-i {
			t.Errorf("request %d: X-RateLimit-Remaining %d, want %d", i, got, limit-i)
		}
		if reset := headerInt(t, r, "X-RateLimit-Reset"); reset < 1 || reset > 60 {
			t.Errorf("request %d: X-RateLimit-Reset %d, want 1..60 seconds", i, reset)
		}
	}
	r := s.do(t, "GET", "/v1/api-keys", key, nil)
	wantError(t, "the request over the limit", r, http.StatusTooManyRequests, "RATE_LIMIT_EXCEEDED")
	if ra := headerInt(t, r, "Retry-After"); ra < 1 || ra > (60+limit-1)/limit {
		t.Errorf("Retry-After %d, want 1..%d seconds for %d/min", ra, (60+limit-1)/limit, limit)
	}
	if got := headerInt(t, r, "X-RateLimit-Remaining"); got != 0 {
		t.Errorf("429: X-RateLimit-Remaining %d, want 0", got)
	}
	if got := headerInt(t, r, "X-RateLimit-Limit"); got != limit {
		t.Errorf("429: X-RateLimit-Limit %d, want %d", got, limit)
	}
	// Denied requests consume nothing, and the key stays limited.
	r = s.do(t, "POST", "/v1/api-keys", key, map[string]any{"name": "x"})
	wantError(t, "a second request over the limit", r, http.StatusTooManyRequests, "RATE_LIMIT_EXCEEDED")
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--plans", tempPlansFile(t, `{"trial": {"rate_limit": 5}}`))
		tn := newTenant(t, db)
		// Two more keys, made before any bucket is used up: each creation
		// costs the live key one request.
		fresh := apiCreateKey(t, s, tn.Live, map[string]any{"name": "fresh"})["key"].(string)
		low := apiCreateKey(t, s, tn.Live, map[string]any{"name": "low", "rate_limit": 2})["key"].(string)

		exhaustRateLimit(t, s, fresh, 5)
		// Test keys count against their own limit like live keys.
		exhaustRateLimit(t, s, tn.Test, 5)
		// A key's own lower limit is the one enforced.
		exhaustRateLimit(t, s, low, 2)

		// Every key has its own bucket: the live key has used 2 of its 5.
		r := s.do(t, "GET", "/v1/api-keys", tn.Live, nil)
		if r.Status != http.StatusOK || headerInt(t, r, "X-RateLimit-Remaining") != 2 {
			t.Errorf("the live key after 2 requests of 5 and the other keys exhausted: %d, remaining %q",
				r.Status, r.Header.Get("X-RateLimit-Remaining"))
		}
		// And so does every tenant.
		other := newTenant(t, db)
		apiListKeys(t, s, other.Live)
	})
}

func TestQuota(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		plans := tempPlansFile(t, `{"trial": {"rate_limit": 1000, "monthly_calls": 3}}`)
		s := startServer(t, db, "--plans", plans)
		tn := newTenant(t, db)
		other := newTenant(t, db)

		// Live call 1 of 3 makes a second live key: the quota is the tenant's.
		second := apiCreateKey(t, s, tn.Live, map[string]any{"name": "second live"})["key"].(string)
		// Test calls never count.
		for i := 0; i < 10; i++ {
			apiListKeys(t, s, tn.Test)
		}
		apiListKeys(t, s, tn.Live) // 2 of 3
		apiListKeys(t, s, second)  // 3 of 3
		for _, key := range []string{tn.Live, second} {
			r := s.do(t, "GET", "/v1/api-keys", key, nil)
			wantError(t, "a live call over the monthly quota", r, http.StatusTooManyRequests, "QUOTA_EXCEEDED")
			if ra := headerInt(t, r, "Retry-After"); ra < 1 {
				t.Errorf("QUOTA_EXCEEDED: Retry-After %d", ra)
			}
		}
		wantError(t, "creating a key over the quota", s.do(t, "POST", "/v1/api-keys", tn.Live, map[string]any{"name": "x"}),
			http.StatusTooManyRequests, "QUOTA_EXCEEDED")
		apiListKeys(t, s, tn.Test)    // test calls go on
		apiListKeys(t, s, other.Live) // other tenants are not affected

		// The count survives a restart.
		s.stop()
		s = startServer(t, db, "--plans", plans)
		wantError(t, "a live call over the quota after a restart", s.do(t, "GET", "/v1/api-keys", tn.Live, nil),
			http.StatusTooManyRequests, "QUOTA_EXCEEDED")
		apiListKeys(t, s, tn.Test)
		apiListKeys(t, s, other.Live)
	})
}

// TestCheckOrder: authentication, then rate limit, then monthly quota, then
// the request itself (docs/api.md).
func TestCheckOrder(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--plans", tempPlansFile(t, `{"trial": {"rate_limit": 6, "monthly_calls": 3}}`))

		// Quota before the request; rate limit before quota.
		tn := newTenant(t, db)
		d := apiCreateKey(t, s, tn.Live, map[string]any{"name": "k"}) // live call 1
		id, key := d["id"].(string), d["key"].(string)
		apiListKeys(t, s, key) // 2
		apiListKeys(t, s, key) // 3: the quota is used up
		for _, body := range []any{`{"bogus": 1}`, `{`, "", map[string]any{"name": "x", "rate_limit": 0}} {
			wantError(t, "an invalid body over the quota", s.do(t, "POST", "/v1/api-keys", key, body),
				http.StatusTooManyRequests, "QUOTA_EXCEEDED")
		}
		// That was the key's 6th request: its rate limit is used up too,
		// and the rate limit answers first.
		r := s.do(t, "GET", "/v1/api-keys", key, nil)
		wantError(t, "over both the rate limit and the quota", r, http.StatusTooManyRequests, "RATE_LIMIT_EXCEEDED")
		if ra := headerInt(t, r, "Retry-After"); ra < 1 || ra > 10 {
			t.Errorf("Retry-After %d, want 1..10 for 6/min", ra)
		}

		// Authentication before the rate limit: a deactivated key whose
		// bucket is empty gets 403.
		cli(t, db, "key", "deactivate", id)
		awaitStatus(t, s, key, operatorChange, "KEY_INACTIVE over the rate limit", http.StatusForbidden, "KEY_INACTIVE")

		// A revoked key whose bucket is empty gets 401. Test keys use no
		// quota, so they can make and revoke one.
		other := newTenant(t, db)
		d = apiCreateKey(t, s, other.Test, map[string]any{"name": "sandbox"})
		id, key = d["id"].(string), d["key"].(string)
		for i := 0; i < 6; i++ {
			apiListKeys(t, s, key)
		}
		wantError(t, "the sandbox key over its limit", s.do(t, "GET", "/v1/api-keys", key, nil), http.StatusTooManyRequests, "RATE_LIMIT_EXCEEDED")
		if r := s.do(t, "DELETE", "/v1/api-keys/"+id, other.Test, nil); r.Status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.Status, r.Raw)
		}
		wantError(t, "a revoked key over its limit", s.do(t, "GET", "/v1/api-keys", key, nil), http.StatusUnauthorized, "INVALID_API_KEY")

		cli(t, db, "tenant", "suspend", other.ID)
		// Polling until the suspension is seen may use up the test key's
		// bucket; the answer is 403 all the same.
		awaitStatus(t, s, other.Test, operatorChange, "TENANT_SUSPENDED before the rate limit", http.StatusForbidden, "TENANT_SUSPENDED")
		for i := 0; i < 8; i++ {
			wantError(t, "a suspended tenant's key, again", s.do(t, "GET", "/v1/api-keys", other.Test, nil),
				http.StatusForbidden, "TENANT_SUSPENDED")
		}
	})
}

// TestTenantRateLimit: besides each key's limit, a tenant's requests
// together, from all its keys of both environments, have a per-minute
// limit (the plan's tenant_rate_limit), so that a hundred keys do not make
// a hundred times the plan's rate.
func TestTenantRateLimit(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--plans", tempPlansFile(t, `{"trial": {"rate_limit": 5, "tenant_rate_limit": 8}}`))
		tn := newTenant(t, db)
		other := newTenant(t, db)
		second := apiCreateKey(t, s, tn.Live, map[string]any{"name": "second"})["key"].(string) // 1 of 8
		apiListKeys(t, s, tn.Live)                                                              // 2
		for i := 0; i < 4; i++ {
			apiListKeys(t, s, second) // 3..6
		}
		apiListKeys(t, s, tn.Test) // 7: test requests count too
		apiListKeys(t, s, tn.Test) // 8
		for _, key := range []string{tn.Test, tn.Live, second} {
			r := s.do(t, "GET", "/v1/api-keys", key, nil)
			wantError(t, "a request over the tenant's limit", r, http.StatusTooManyRequests, "RATE_LIMIT_EXCEEDED")
			if ra := headerInt(t, r, "Retry-After"); ra < 1 || ra > 8 {
				t.Errorf("Retry-After %d, want 1..8 for 8/min", ra)
			}
			if l, rem := headerInt(t, r, "X-RateLimit-Limit"), headerInt(t, r, "X-RateLimit-Remaining"); l != 8 || rem != 0 {
				t.Errorf("429 for the tenant: X-RateLimit-Limit %d, Remaining %d; want the tenant's 8 and 0", l, rem)
			}
		}
		// Other tenants have their own total.
		for i := 0; i < 5; i++ {
			apiListKeys(t, s, other.Live)
		}
	})
}
