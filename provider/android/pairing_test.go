package android_test

// Tests of the pairing limits against a real store (SQLite, and PostgreSQL
// when SWITCHBOARD_TEST_POSTGRES is set): the attacks a review ran on a live
// server, replayed through the device protocol's handler.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/android"
	"github.com/switchboard/switchboard/ratelimit"
	"github.com/switchboard/switchboard/sqlstore"
)

// countingStore is the real store, with its code lookups counted; the first
// hold of them wait until release is closed.
type countingStore struct {
	*sqlstore.DB
	lookups atomic.Int64
	hold    int64
	release chan struct{}
}

func (c *countingStore) PairDevice(ctx context.Context, code string, dev *sb.Device, creds sb.DeviceCredentials, now time.Time) (*sb.Phone, error) {
	if n := c.lookups.Add(1); n <= c.hold {
		<-c.release
	}
	return c.DB.PairDevice(ctx, code, dev, creds, now)
}

func openStore(t *testing.T, url string) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// livePhone adds a tenant with an android phone and returns the tenant's
// and phone's ids and the phone's live pairing code, which is never one of
// the wrong codes (see wrongCode).
func livePhone(t *testing.T, db *sqlstore.DB) (tenantID, phoneID, code string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	tn := &sb.Tenant{ID: sb.NewID(), Name: "T", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.Add(time.Hour), CreatedAt: now}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	pr, err := sb.NewPairing(now)
	for err == nil && strings.HasPrefix(pr.Code, "0000") {
		pr, err = sb.NewPairing(now)
	}
	if err != nil {
		t.Fatal(err)
	}
	ph := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: fmt.Sprintf("+1415%07d", time.Now().UnixNano()%1e7), Kind: sb.PhoneAndroid,
		Channels: []string{sb.ChannelSMS}, Status: sb.PhoneOnline, CreatedAt: now}
	if err := db.AddPhone(ctx, ph, pr); err != nil {
		t.Fatal(err)
	}
	return tn.ID, ph.ID, pr.Code
}

// pair posts POST /device with code from the address addr and returns the
// status.
func pair(h http.Handler, addr, code string) int {
	r := httptest.NewRequest("POST", android.Prefix+"/device", strings.NewReader(`{"name":"test"}`))
	r.RemoteAddr = addr
	r.Header.Set("Authorization", "Code "+code)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// wrongCode is the i-th of a series of well-formed codes (8 digits) that
// are not live: livePhone makes none that starts with 0000.
func wrongCode(i int) string { return fmt.Sprintf("%08d", i) }

// burst sends codes at once, each from the address addr(i), and returns how
// many answers had each status.
func burst(h http.Handler, codes []string, addr func(i int) string) map[int]int {
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for i, c := range codes {
		wg.Go(func() {
			st := pair(h, addr(i), c)
			mu.Lock()
			got[st]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

func newServer(t *testing.T, store android.Store, shared android.Counter) *android.Server {
	s := android.New(android.Config{Store: store, Shared: shared})
	t.Cleanup(s.Shutdown)
	return s
}

// TestPairingBurstFromOneAddress: hundreds of wrong codes sent at once from
// one address get 429 beyond the client's budget, each before any lookup,
// and a live code inside the burst does not pair; the burst does not weaken
// that code for its owner, whose device pairs from its own address.
func TestPairingBurstFromOneAddress(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		db := openStore(t, url)
		tenantID, phoneID, code := livePhone(t, db)
		store := &countingStore{DB: db, hold: android.PairingPerClient, release: make(chan struct{})}
		h := newServer(t, store, nil)
		const attacker = "198.51.100.7:40000"

		// The client's budget of lookups is taken, and the lookups held, so
		// that the failures they will count are not known yet.
		var first sync.WaitGroup
		for i := range android.PairingPerClient {
			first.Go(func() { pair(h, attacker, wrongCode(i)) })
		}
		waitFor(t, "the first lookups", func() bool { return store.lookups.Load() == android.PairingPerClient })

		codes := make([]string, 300)
		for i := range codes {
			codes[i] = wrongCode(100 + i)
		}
		codes[150] = code
		got := burst(h, codes, func(int) string { return attacker })
		if got[429] != len(codes) {
			t.Errorf("a burst of %d codes from one address while its budget is spent: %v, want 429 for all", len(codes), got)
		}
		if n := store.lookups.Load(); n != android.PairingPerClient {
			t.Errorf("%d code lookups, want %d (the client's budget)", n, android.PairingPerClient)
		}
		close(store.release)
		first.Wait()
		if ph, err := db.Phone(context.Background(), tenantID, sb.Live, phoneID); err != nil || ph.Device != nil {
			t.Fatalf("the phone after the burst: %+v, %v: paired by the burst", ph, err)
		}
		// The code is as good as before for the phone's owner.
		if st := pair(h, "203.0.113.9:5000", code); st != http.StatusCreated {
			t.Errorf("the live code from its owner's address after the burst: %d, want 201", st)
		}
	})
}

// TestPairingNodeBudget: wrong codes from as many addresses as codes, sent
// at once, are looked up at most the node's budget (plus what refills while
// they run): the node's limit holds for all clients and all codes together.
func TestPairingNodeBudget(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		store := &countingStore{DB: openStore(t, url)}
		h := newServer(t, store, nil)
		codes := make([]string, 400)
		for i := range codes {
			codes[i] = wrongCode(i)
		}
		start := time.Now()
		got := burst(h, codes, func(i int) string { return fmt.Sprintf("10.%d.%d.1:1000", i/250, i%250) })
		most := int64(android.PairingPerNode) + refills(time.Since(start), android.PairingPerNode)
		if n := store.lookups.Load(); n > most {
			t.Errorf("%d lookups for %d codes from as many addresses, want at most %d", n, len(codes), most)
		}
		if got[429] < len(codes)-int(most) {
			t.Errorf("answers %v: want at least %d 429s", got, len(codes)-int(most))
		}
	})
}

// refills is how many attempts a budget of limit a minute regains in d,
// rounded up.
func refills(d time.Duration, limit int) int64 {
	iv := time.Minute / time.Duration(limit)
	return int64((d + iv - 1) / iv)
}

// TestPairingAcrossNodes: two nodes on one PostgreSQL database share the
// budget of all nodes: wrong codes from many addresses spread over both are
// looked up at most PairingInAll times (plus the refill), not twice that.
func TestPairingAcrossNodes(t *testing.T) {
	url := dbtest.Postgres(t)
	a, b := &countingStore{DB: openStore(t, url)}, &countingStore{DB: openStore(t, url)}
	nodes := []http.Handler{newServer(t, a, ratelimit.NewPostgres(a.DB)), newServer(t, b, ratelimit.NewPostgres(b.DB))}
	codes := make([]string, 300)
	for i := range codes {
		codes[i] = wrongCode(i)
	}
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range codes {
		wg.Go(func() {
			st := pair(nodes[i%2], fmt.Sprintf("10.1.%d.%d:1000", i/250, i%250), c)
			mu.Lock()
			got[st]++
			mu.Unlock()
		})
	}
	wg.Wait()
	most := int64(android.PairingInAll) + refills(time.Since(start), android.PairingInAll)
	if n := a.lookups.Load() + b.lookups.Load(); n > most {
		t.Errorf("%d lookups on two nodes (%d and %d), want at most %d for both together", n, a.lookups.Load(), b.lookups.Load(), most)
	}
	if got[401]+got[429] != len(codes) {
		t.Errorf("answers %v", got)
	}
}

// TestPairingClientNetworks: an IPv6 client is counted by its /64; a
// successful pairing counts for nothing, so one address pairs more phones
// than its budget of failures.
func TestPairingClientNetworks(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	h := newServer(t, db, nil)
	for i := range android.PairingPerClient + 5 {
		_, _, code := livePhone(t, db)
		if st := pair(h, "[2001:db8:1:2::1]:1000", code); st != http.StatusCreated {
			t.Fatalf("pairing %d from one address: %d", i, st)
		}
	}
	for i := range android.PairingPerClient {
		addr := fmt.Sprintf("[2001:db8:1:2::%x]:1000", i+2) // the same /64
		if st := pair(h, addr, wrongCode(i)); st != http.StatusUnauthorized {
			t.Fatalf("wrong code %d: %d, want 401", i, st)
		}
	}
	if st := pair(h, "[2001:db8:1:2:ffff::1]:1000", wrongCode(99)); st != http.StatusTooManyRequests {
		t.Errorf("another address of the same /64 after its budget: %d, want 429", st)
	}
	if st := pair(h, "[2001:db8:1:3::1]:1000", wrongCode(98)); st != http.StatusUnauthorized {
		t.Errorf("another /64: %d, want 401", st)
	}
}

// waitFor polls cond until it holds, or fails the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
