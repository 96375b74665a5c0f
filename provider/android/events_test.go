package android_test

import (
	"bufio"
	"context"
	"encoding/json"
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
)

// touchingStore is the real store with its last-seen writes counted.
type touchingStore struct {
	countingStore
	touches atomic.Int64
}

func (s *touchingStore) TouchDevice(ctx context.Context, phoneID, deviceID string, now time.Time) (bool, error) {
	s.touches.Add(1)
	return s.countingStore.TouchDevice(ctx, phoneID, deviceID, now)
}

// pairToken pairs a device with a live phone's code and returns its token.
func pairToken(t *testing.T, h http.Handler, code string) string {
	t.Helper()
	r := httptest.NewRequest("POST", android.Prefix+"/device", strings.NewReader(`{"name":"test"}`))
	r.RemoteAddr = "192.0.2.1:1000"
	r.Header.Set("Authorization", "Code "+code)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out struct{ Token string }
	if w.Code != http.StatusCreated || json.Unmarshal(w.Body.Bytes(), &out) != nil || out.Token == "" {
		t.Fatalf("pairing: %d %s", w.Code, w.Body)
	}
	return out.Token
}

// TestOneStreamPerPhone: one device token that opens many event streams
// holds one: each new stream ends the one before it (the attack: one token
// held 3,000 streams, each a connection, and each wrote last-seen at every
// beat). Last-seen is written at most once per half beat for the phone.
func TestOneStreamPerPhone(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	store := &touchingStore{countingStore: countingStore{DB: db}}
	// A beat every 200 ms: the phone goes offline after 600 ms unseen.
	srv := android.New(android.Config{Store: store, Routing: sb.Routing{OfflineAfter: 600 * time.Millisecond}})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	_, _, code := livePhone(t, db)
	token := pairToken(t, srv, code)

	const n = 30
	var ended atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	store.touches.Store(0)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", ts.URL+android.Prefix+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
			}
			ended.Add(1)
		})
	}
	// The streams beat: wait for a few writes of last-seen.
	waitFor(t, "five last-seen writes", func() bool { return store.touches.Load() >= 5 })
	touches, elapsed := store.touches.Load(), time.Since(start)
	if most := int64(elapsed/(100*time.Millisecond)) + 2; touches > most {
		t.Errorf("%d last-seen writes in %v, want at most %d (one per half beat)", touches, elapsed, most)
	}
	for deadline := time.Now().Add(5 * time.Second); ended.Load() < n-1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := ended.Load(); got != n-1 {
		t.Errorf("%d of %d streams ended, want all but the newest", got, n)
	}
	srv.Shutdown()
	wg.Wait()
}
