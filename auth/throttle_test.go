package auth

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// fakeClock is a settable clock for the authenticator.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func unknownKey(i int) string                { return fmt.Sprintf("svc_live_%032d", i) }
func bearer(text string) string              { return "Bearer " + text }
func isThrottled(err error) (*Throttled, bool) {
	var th *Throttled
	ok := errors.As(err, &th)
	return th, ok
}

// TestUnknownKeyMisses: a well-formed key that does not exist is remembered
// for a few seconds, so that repeating it costs no database read.
func TestUnknownKeyMisses(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)}
	store := newFuzzStore()
	a := New(store, sb.DefaultPlans(), clock.now)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		if _, err := a.Authenticate(ctx, bearer(fuzzOtherLive), ""); sb.ErrorCode(err) != sb.CodeInvalidAPIKey {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if n := store.keyReads.Load(); n != 1 {
		t.Errorf("100 uses of one unknown key read storage %d times, want 1", n)
	}
	// Briefly: after twice the miss TTL the key is looked up again.
	clock.advance(2*missTTL + time.Millisecond)
	a.Authenticate(ctx, bearer(fuzzOtherLive), "")
	if n := store.keyReads.Load(); n != 2 {
		t.Errorf("after the miss expired: %d reads, want 2", n)
	}
	// A real key is unaffected, and Reset forgets the misses.
	if _, err := a.Authenticate(ctx, bearer(fuzzKeyText), ""); err != nil {
		t.Fatal(err)
	}
	a.Reset()
	a.Authenticate(ctx, bearer(fuzzOtherLive), "")
	if n := store.keyReads.Load(); n != 4 {
		t.Errorf("after Reset: %d reads, want 4", n)
	}
	// The cache of misses is bounded: a flood of distinct unknown keys
	// keeps at most two generations of missCap.
	for i := 0; i < 3*missCap; i++ {
		a.Authenticate(ctx, bearer(unknownKey(i)), "")
	}
	if n := a.misses.len(); n > 2*missCap {
		t.Errorf("%d misses cached, want at most %d", n, 2*missCap)
	}
}

// TestFailedAuthThrottle: failed authentication is throttled per client
// address: a burst of authFailureBurst failures, then one per
// authFailureInterval; once throttled, a key the node has not seen succeed
// answers 429 without a lookup, while keys that have succeeded go on
// working.
func TestFailedAuthThrottle(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)}
	store := newFuzzStore()
	a := New(store, sb.DefaultPlans(), clock.now)
	ctx := context.Background()
	const attacker, neighbour = "203.0.113.7", "198.51.100.9"

	if _, err := a.Authenticate(ctx, bearer(fuzzKeyText), neighbour); err != nil { // the real key, seen once
		t.Fatal(err)
	}
	for i := 0; i < authFailureBurst; i++ {
		if _, err := a.Authenticate(ctx, bearer(unknownKey(i)), attacker); sb.ErrorCode(err) != sb.CodeInvalidAPIKey {
			t.Fatalf("failure %d: %v, want INVALID_API_KEY", i+1, err)
		}
	}
	reads := store.keyReads.Load()
	_, err := a.Authenticate(ctx, bearer(unknownKey(1000)), attacker)
	th, ok := isThrottled(err)
	if !ok || sb.ErrorCode(err) != sb.CodeRateLimitExceeded || th.RetryAfter < 1 || th.RetryAfter > int(authFailureInterval/time.Second) {
		t.Fatalf("failure %d: %v, want RATE_LIMIT_EXCEEDED with Retry-After 1..3", authFailureBurst+1, err)
	}
	if store.keyReads.Load() != reads {
		t.Error("a throttled request read storage")
	}
	// Repeating a known miss is throttled too.
	if _, ok := isThrottled(func() error { _, err := a.Authenticate(ctx, bearer(unknownKey(0)), attacker); return err }()); !ok {
		t.Error("a cached miss from a throttled address is not throttled")
	}
	// A key that has succeeded on this node still works from there, even
	// once its cache entry is stale.
	clock.advance(2 * DefaultTTL)
	if _, err := a.Authenticate(ctx, bearer(fuzzKeyText), attacker); err != nil {
		t.Errorf("a known key from a throttled address: %v", err)
	}
	// Other addresses have their own budget; an unknown client address
	// (none given) is never throttled.
	if _, err := a.Authenticate(ctx, bearer(unknownKey(2000)), neighbour); sb.ErrorCode(err) != sb.CodeInvalidAPIKey {
		t.Errorf("another address: %v, want INVALID_API_KEY", err)
	}
	if _, err := a.Authenticate(ctx, bearer(unknownKey(2001)), ""); sb.ErrorCode(err) != sb.CodeInvalidAPIKey {
		t.Errorf("no address: %v, want INVALID_API_KEY", err)
	}
	// Malformed keys cost nothing: they are answered 401 and not counted.
	if _, err := a.Authenticate(ctx, "Bearer nonsense", attacker); sb.ErrorCode(err) != sb.CodeInvalidAPIKey {
		t.Errorf("a malformed key from a throttled address: %v, want INVALID_API_KEY", err)
	}
	// One more attempt every authFailureInterval.
	clock.advance(authFailureInterval)
	if _, err := a.Authenticate(ctx, bearer(unknownKey(3000)), attacker); sb.ErrorCode(err) != sb.CodeInvalidAPIKey {
		t.Errorf("after %v: %v, want one more attempt", authFailureInterval, err)
	}
	if _, ok := isThrottled(func() error { _, err := a.Authenticate(ctx, bearer(unknownKey(3001)), attacker); return err }()); !ok {
		t.Error("the attempt after that is not throttled")
	}
	// IPv6 clients are throttled by /64: an attacker's other addresses of
	// the same network share the budget.
	for i := 0; i < authFailureBurst; i++ {
		a.Authenticate(ctx, bearer(unknownKey(4000+i)), fmt.Sprintf("2001:db8:1:2::%x", i+1))
	}
	if _, ok := isThrottled(func() error {
		_, err := a.Authenticate(ctx, bearer(unknownKey(5000)), "2001:db8:1:2:ffff::1")
		return err
	}()); !ok {
		t.Error("IPv6 addresses of one /64 do not share the budget")
	}
	// After a minute the whole burst is back.
	clock.advance(time.Minute)
	for i := 0; i < authFailureBurst; i++ {
		if _, err := a.Authenticate(ctx, bearer(unknownKey(6000+i)), attacker); sb.ErrorCode(err) != sb.CodeInvalidAPIKey {
			t.Fatalf("a minute later, failure %d: %v", i+1, err)
		}
	}
}

// TestFailedTokenThrottle: invalid identity-provider tokens count as
// failures too; a valid token is always checked, so it works from a
// throttled address.
func TestFailedTokenThrottle(t *testing.T) {
	clock := &fakeClock{t: time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)}
	a := New(newFuzzStore(), sb.DefaultPlans(), clock.now)
	secret := []byte("0123456789abcdef0123456789abcdef")
	a.UseIdentityProvider(&IdentityProvider{Secret: secret, Issuer: "i", Audience: "a"})
	ctx := context.Background()
	hdr := map[string]string{"alg": "HS256"}
	claims := map[string]any{"iss": "i", "aud": "a", "tenant_id": "ten_1", "exp": clock.t.Unix() + 60}
	bad := hs256([]byte("another-secret-another-secret-xx"), hdr, claims)
	for i := 0; i < authFailureBurst; i++ {
		if _, err := a.Authenticate(ctx, bearer(bad), "203.0.113.7"); sb.ErrorCode(err) != sb.CodeInvalidToken {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	if _, ok := isThrottled(func() error { _, err := a.Authenticate(ctx, bearer(bad), "203.0.113.7"); return err }()); !ok {
		t.Error("a bad token from a throttled address is not throttled")
	}
	if _, err := a.Authenticate(ctx, bearer(hs256(secret, hdr, claims)), "203.0.113.7"); err != nil {
		t.Errorf("a valid token from a throttled address: %v", err)
	}
}
