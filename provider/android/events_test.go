package android_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
// beat). Last-seen is written at most once per half beat for the phone
// (here every beat, a quarter of OfflineAfter being shorter than a beat).
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

// lookupStore is the real store with its credential lookups counted.
type lookupStore struct {
	countingStore
	tokens, secrets atomic.Int64
}

func (s *lookupStore) PhoneByToken(ctx context.Context, token string) (*sb.Phone, error) {
	s.tokens.Add(1)
	return s.countingStore.PhoneByToken(ctx, token)
}

func (s *lookupStore) PhoneByInboundSecret(ctx context.Context, secret string) (*sb.Phone, error) {
	s.secrets.Add(1)
	return s.countingStore.PhoneByInboundSecret(ctx, secret)
}

// TestWrongCredentialsThrottled: wrong device tokens and inbound secrets
// from one address are throttled as failed API keys are: 20 lookups, then
// 429 without one; a token this node has seen valid still works from that
// address, and another address is not throttled.
func TestWrongCredentialsThrottled(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	store := &lookupStore{countingStore: countingStore{DB: db}}
	srv := newServer(t, store, nil)
	_, _, code := livePhone(t, db)
	good := pairToken(t, srv, code)
	call := func(addr, method, path, token string) int {
		r := httptest.NewRequest(method, android.Prefix+path, strings.NewReader(`{}`))
		r.RemoteAddr = addr
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		if w.Code == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		return w.Code
	}
	const attacker = "198.51.100.9:1000"
	if st := call(attacker, "GET", "/device", good); st != 200 {
		t.Fatalf("the good token: %d", st)
	}
	got := map[int]int{}
	for i := range 100 {
		got[call(attacker, "GET", "/device", fmt.Sprintf("wrong-token-%032d", i))]++
	}
	if got[401] != 20 || got[429] != 80 || store.tokens.Load() != 21 {
		t.Errorf("100 wrong tokens from one address: %v with %d lookups, want 20 401s (and lookups) and 80 429s", got, store.tokens.Load())
	}
	if st := call(attacker, "GET", "/device", good); st != 200 {
		t.Errorf("a token seen valid, from the throttled address: %d", st)
	}
	if st := call("198.51.100.10:1000", "GET", "/device", "wrong-token-x"); st != 401 {
		t.Errorf("another address: %d", st)
	}
	got = map[int]int{}
	for i := range 30 {
		got[call("203.0.113.50:1000", "POST", fmt.Sprintf("/inbound/%040d", i), "")]++
	}
	if got[401] != 20 || got[429] != 10 || store.secrets.Load() != 20 {
		t.Errorf("30 wrong inbound secrets from one address: %v with %d lookups, want 20 401s and 10 429s", got, store.secrets.Load())
	}
}

// failingInbound is the real store whose Inbound fails.
type failingInbound struct{ countingStore }

func (*failingInbound) Inbound(context.Context, *sb.Message) error { return errors.New("disk on fire") }

// TestErrorLogHasNoSecret: a failure on the inbound callback is logged with
// its route, not its path, which holds the device's inbound secret.
func TestErrorLogHasNoSecret(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	var logs bytes.Buffer
	srv := android.New(android.Config{Store: &failingInbound{countingStore{DB: db}}, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	t.Cleanup(srv.Shutdown)
	_, _, code := livePhone(t, db)
	token := pairToken(t, srv, code)
	secret := sb.InboundSecret(token)
	body := `{"id":"ev1","event":"sms:received","payload":{"messageId":"m1","sender":"+15551234567","message":"hi","receivedAt":"2026-01-01T00:00:00.000Z"}}`
	r := httptest.NewRequest("POST", android.Prefix+"/inbound/"+secret, strings.NewReader(body))
	r.RemoteAddr = "192.0.2.1:1000"
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("inbound with a failing store: %d %s", w.Code, w.Body)
	}
	if strings.Contains(logs.String(), secret) || !strings.Contains(logs.String(), `"route":"POST /api/mobile/v1/inbound/{secret}"`) {
		t.Errorf("the log: %s", logs.String())
	}
}

// openStream opens an event stream of token at url and returns the
// response once its first comment came, and a reader of the rest.
func openStream(t *testing.T, client *http.Client, url, token string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+android.Prefix+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	br := bufio.NewReader(res.Body)
	if line, err := br.ReadString('\n'); err != nil || line != ": connected\n" {
		t.Fatalf("first line of the stream: %q %v", line, err)
	}
	return res, br
}

// TestStreamHijacked: over HTTP/1.1 an event stream leaves the server's
// request handling (its connection is hijacked: the request's goroutine
// and buffers are let go) and says so with Connection: close; it still
// beats, and at shutdown it ends with the chunked coding's last chunk, a
// clean end for the device.
func TestStreamHijacked(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	srv := android.New(android.Config{Store: db, Routing: sb.Routing{OfflineAfter: 600 * time.Millisecond}})
	ts := httptest.NewUnstartedServer(srv)
	var hijacked atomic.Int64
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateHijacked {
			hijacked.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	_, _, code := livePhone(t, db)
	token := pairToken(t, srv, code)

	res, br := openStream(t, ts.Client(), ts.URL, token)
	waitFor(t, "the stream's connection hijacked", func() bool { return hijacked.Load() == 1 })
	if !res.Close || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("Connection: close %v, Content-Type %q", res.Close, res.Header.Get("Content-Type"))
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if line == ": keep-alive\n" {
			break
		}
	}
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, br); done <- err }()
	srv.Shutdown()
	if err := <-done; err != nil {
		t.Errorf("the stream's end at shutdown: %v, want a clean end", err)
	}
}

// TestClosedStreamNotSeen: a device that closes its side of its stream is
// noticed at the next beat, even while its connection still reads: the
// stream is gone from the node, and its beats no longer record the device
// as seen (its phone goes offline after OfflineAfter).
func TestClosedStreamNotSeen(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	store := &touchingStore{countingStore: countingStore{DB: db}}
	reg := prometheus.NewRegistry()
	// A beat every 200 ms, each writing last-seen (a quarter of 600 ms).
	srv := android.New(android.Config{Store: store, Routing: sb.Routing{OfflineAfter: 600 * time.Millisecond}, Registry: reg})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	_, _, code := livePhone(t, db)
	token := pairToken(t, srv, code)

	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET %s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", android.Prefix, token)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %v %v", res, err)
	}
	go io.Copy(io.Discard, res.Body) // the device reads on
	waitFor(t, "two beats' last-seen writes", func() bool { return store.touches.Load() >= 3 })
	c.(*net.TCPConn).CloseWrite()
	closed := store.touches.Load()
	waitFor(t, "the closed stream gone", func() bool {
		return gaugeOf(t, reg, "switchboard_device_streams") == 0
	})
	// A beat may have been writing as the device closed.
	if n := store.touches.Load() - closed; n > 1 {
		t.Errorf("%d last-seen writes after the device closed its stream, want at most 1", n)
	}
}

// TestBeatsWriteLastSeenEveryQuarter: an open stream's beats write
// last-seen at most once every quarter of OfflineAfter, however often they
// come.
func TestBeatsWriteLastSeenEveryQuarter(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	store := &touchingStore{countingStore: countingStore{DB: db}}
	srv := android.New(android.Config{Store: store, Routing: sb.Routing{OfflineAfter: 2 * time.Second}})
	android.SetKeepAlive(srv, 10*time.Millisecond)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	_, _, code := livePhone(t, db)
	token := pairToken(t, srv, code)

	start := time.Now()
	_, br := openStream(t, ts.Client(), ts.URL, token)
	for beats := 0; beats < 50; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": keep-alive\n" {
			beats++
		}
	}
	touches, elapsed := store.touches.Load(), time.Since(start)
	if most := int64(elapsed/(500*time.Millisecond)) + 2; touches > most {
		t.Errorf("%d last-seen writes in %v of 50 beats, want at most %d (one every quarter of OfflineAfter)", touches, elapsed, most)
	}
}

// TestPairingEndsOldStream: pairing another device ends the stream of the
// device it replaces on this node at once, not when its last-seen is next
// written.
func TestPairingEndsOldStream(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	// Last-seen written every 15 minutes at most: only the pairing can end
	// the stream within the test.
	srv := android.New(android.Config{Store: db, Routing: sb.Routing{OfflineAfter: time.Hour}})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(); ts.Close() })
	tenantID, phoneID, code := livePhone(t, db)
	token := pairToken(t, srv, code)
	_, br := openStream(t, ts.Client(), ts.URL, token)
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, br); close(ended) }()

	pr, err := sb.NewPairing(time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetPairing(context.Background(), tenantID, phoneID, pr); err != nil {
		t.Fatal(err)
	}
	pairToken(t, srv, pr.Code)
	waitFor(t, "the replaced device's stream ended", func() bool {
		select {
		case <-ended:
			return true
		default:
			return false
		}
	})
}

// gaugeOf is the value of the unlabelled gauge name among reg's.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// stallListener hands out connections whose writes, once stalled, wait for
// their write deadline as a socket whose device stopped reading does.
type stallListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*stallConn
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &stallConn{Conn: c, changed: make(chan struct{})}
	l.mu.Lock()
	l.conns = append(l.conns, sc)
	l.mu.Unlock()
	return sc, nil
}

// stall makes every connection's writes wait from now on.
func (l *stallListener) stall() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.mu.Lock()
		c.stalled = true
		c.mu.Unlock()
	}
}

type stallConn struct {
	net.Conn
	mu       sync.Mutex
	stalled  bool
	deadline time.Time
	changed  chan struct{} // closed when the deadline changes
	waiting  atomic.Int64  // writes waiting
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.SetWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) Write(p []byte) (int, error) {
	for {
		c.mu.Lock()
		stalled, d, changed := c.stalled, c.deadline, c.changed
		c.mu.Unlock()
		if !stalled {
			return c.Conn.Write(p)
		}
		if !d.IsZero() && !time.Now().Before(d) {
			return 0, os.ErrDeadlineExceeded
		}
		var expire <-chan time.Time
		if !d.IsZero() {
			t := time.NewTimer(time.Until(d))
			defer t.Stop()
			expire = t.C
		}
		c.waiting.Add(1)
		select {
		case <-changed:
		case <-expire:
		}
		c.waiting.Add(-1)
	}
}

// TestShutdownEndsStalledStream: Shutdown ends a stream served outside its
// handler whose device stopped reading (its write waiting for the socket)
// at once, not when the write's own deadline (a minute) runs out.
func TestShutdownEndsStalledStream(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	srv := android.New(android.Config{Store: db, Routing: sb.Routing{OfflineAfter: time.Hour}})
	android.SetKeepAlive(srv, 10*time.Millisecond)
	ts := httptest.NewUnstartedServer(srv)
	ln := &stallListener{Listener: ts.Listener}
	ts.Listener = ln
	var hijacked atomic.Int64
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateHijacked {
			hijacked.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	_, _, code := livePhone(t, db)
	token := pairToken(t, srv, code)

	openStream(t, ts.Client(), ts.URL, token)
	waitFor(t, "the stream's connection hijacked", func() bool { return hijacked.Load() == 1 })
	ln.stall()
	waitFor(t, "the stream's write to wait for the device", func() bool {
		ln.mu.Lock()
		defer ln.mu.Unlock()
		for _, c := range ln.conns {
			if c.waiting.Load() > 0 {
				return true
			}
		}
		return false
	})
	done := make(chan struct{})
	go func() { srv.Shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // the write's own deadline is a minute
		t.Fatal("Shutdown waits for the stalled stream's write")
	}
}
