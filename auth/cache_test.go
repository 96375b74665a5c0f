package auth

import (
	"context"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// raceStore is a Store whose next read can be held: the read takes its
// snapshot, reports that it did, and returns only when released. That is a
// request that read storage just before a revocation committed.
type raceStore struct {
	mu      sync.Mutex
	keys    map[string]*sb.APIKey
	tenants map[string]*sb.Tenant
	hold    chan struct{} // when set, the next read signals read and waits on it
	read    chan struct{}
}

func (s *raceStore) wait() {
	s.mu.Lock()
	hold, read := s.hold, s.read
	s.hold = nil
	s.mu.Unlock()
	if hold != nil {
		close(read)
		<-hold
	}
}

func (s *raceStore) KeyByHash(_ context.Context, hash string) (*sb.APIKey, error) {
	s.mu.Lock()
	k, ok := s.keys[hash]
	var c sb.APIKey
	if ok {
		c = *k
	}
	s.mu.Unlock()
	s.wait()
	if !ok {
		return nil, sb.ErrNotFound
	}
	return &c, nil
}

func (s *raceStore) Tenant(_ context.Context, id string) (*sb.Tenant, error) {
	s.mu.Lock()
	t, ok := s.tenants[id]
	var c sb.Tenant
	if ok {
		c = *t
	}
	s.mu.Unlock()
	s.wait()
	if !ok {
		return nil, sb.ErrNotFound
	}
	return &c, nil
}

func (s *raceStore) TouchKeys(context.Context, map[string]time.Time) error { return nil }

// holdNextRead makes the next read block; it returns a channel closed once
// that read has its snapshot, and the function that releases it.
func (s *raceStore) holdNextRead() (read <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hold, r := make(chan struct{}), make(chan struct{})
	s.hold, s.read = hold, r
	return r, func() { close(hold) }
}

func newRaceStore(t *testing.T) (*raceStore, string) {
	t.Helper()
	text, err := sb.NewKeyText(sb.Live)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tn := &sb.Tenant{ID: "T1", Plan: "starter", Status: sb.TenantActive, TrialEndsAt: now, CreatedAt: now}
	k := &sb.APIKey{ID: "K1", TenantID: tn.ID, Hash: sb.HashKey(text), Environment: sb.Live, Status: sb.KeyActive}
	return &raceStore{keys: map[string]*sb.APIKey{k.Hash: k}, tenants: map[string]*sb.Tenant{tn.ID: tn}}, text
}

// TestRevocationDuringLookup: a key revoked (and forgotten) while a request
// was reading it from storage is refused by the next request, not kept in
// the cache from the stale read for the rest of the TTL.
func TestRevocationDuringLookup(t *testing.T) {
	st, text := newRaceStore(t)
	a := New(st, sb.DefaultPlans(), nil)

	read, release := st.holdNextRead()
	done := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(context.Background(), "Bearer "+text, "")
		done <- err
	}()
	<-read // the in-flight request read the key while it was active
	st.mu.Lock()
	delete(st.keys, sb.HashKey(text)) // revoked
	st.mu.Unlock()
	a.ForgetKey(sb.HashKey(text))
	release()
	<-done // it may succeed: it started before the revocation

	if _, err := a.Authenticate(context.Background(), "Bearer "+text, ""); sb.ErrorCode(err) != sb.CodeInvalidAPIKey {
		t.Fatalf("the first request after the revocation: %v, want INVALID_API_KEY", err)
	}
}

// TestSuspensionDuringLookup: the same for a tenant suspended while a
// request was reading it.
func TestSuspensionDuringLookup(t *testing.T) {
	st, text := newRaceStore(t)
	a := New(st, sb.DefaultPlans(), nil)
	if _, err := a.Authenticate(context.Background(), "Bearer "+text, ""); err != nil {
		t.Fatal(err) // the key is cached now; the tenant's read comes next time its entry expires
	}
	a.ForgetTenant("T1")

	read, release := st.holdNextRead()
	done := make(chan error, 1)
	go func() {
		_, err := a.Authenticate(context.Background(), "Bearer "+text, "")
		done <- err
	}()
	<-read
	st.mu.Lock()
	st.tenants["T1"].Status = sb.TenantSuspended
	st.mu.Unlock()
	a.ForgetTenant("T1")
	release()
	<-done

	if _, err := a.Authenticate(context.Background(), "Bearer "+text, ""); sb.ErrorCode(err) != sb.CodeTenantSuspended {
		t.Fatalf("the first request after the suspension: %v, want TENANT_SUSPENDED", err)
	}
}
