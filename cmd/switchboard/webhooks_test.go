package main

// End-to-end tests of webhooks (docs/webhooks.md): registration and its
// limits, the events and their payloads, signatures, the retry schedule,
// durability across restarts, isolation between endpoints and tenants, the
// delivery log and manual retries. Deliveries go to real HTTP receivers on
// 127.0.0.1, so servers that deliver run with --allow-private-webhooks.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/provider/simulator"
	"github.com/switchboard/switchboard/webhook"
	"github.com/switchboard/switchboard/webhook/sign"
)

const (
	hookAllowPrivate = "--allow-private-webhooks"
	hookSecret       = "whsec-test-secret-0123456789"
	// hookDeliveredNumber is a simulator number that is delivered (on chat) and
	// never in quiet hours.
	hookDeliveredNumber = "+15005550000"
)

var hookEvents = []string{"message.delivered", "message.failed", "message.received"}

// hookRequest is one request a receiver got.
type hookRequest struct {
	At     time.Time // arrival
	Header http.Header
	Body   []byte
}

// hookReceiver is a webhook endpoint on 127.0.0.1 that records every request
// on arrival and answers with respond (200 when nil). n counts from 1.
type hookReceiver struct {
	*httptest.Server
	respond func(n int, w http.ResponseWriter, r *http.Request)

	mu          sync.Mutex
	reqs        []hookRequest
	inflight    int
	maxInflight int
}

func newHookReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{respond: respond}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, hookRequest{At: at, Header: r.Header.Clone(), Body: body})
		n := len(rc.reqs)
		rc.inflight++
		rc.maxInflight = max(rc.maxInflight, rc.inflight)
		rc.mu.Unlock()
		defer func() {
			rc.mu.Lock()
			rc.inflight--
			rc.mu.Unlock()
		}()
		if rc.respond != nil {
			rc.respond(n, w, r)
		}
	}))
	// Requests' contexts end when the client gives up or the test ends, so
	// that a hanging handler never holds up Close.
	ctx, cancel := context.WithCancel(context.Background())
	rc.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	rc.Start()
	t.Cleanup(func() {
		cancel()
		rc.Close()
	})
	return rc
}

// hookHang never answers: it returns when the client gives up (or the
// test ends).
func hookHang(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

func hookAnswer(status int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }
}

func (rc *hookReceiver) requests() []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

func (rc *hookReceiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

// payload parses a request body into a generic map.
func (h hookRequest) payload(t testing.TB) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(h.Body, &p); err != nil {
		t.Fatalf("delivery body is not a JSON object: %v: %s", err, h.Body)
	}
	return p
}

// registerHook registers a webhook and returns its id.
func registerHook(t testing.TB, s *server, key, url string, events ...string) string {
	t.Helper()
	r := s.do(t, "POST", "/v1/webhooks", key, map[string]any{"url": url, "events": events, "secret": hookSecret})
	if r.Status != http.StatusCreated {
		t.Fatalf("register webhook %s: %d %s", url, r.Status, r.Raw)
	}
	return r.Data()["id"].(string)
}

// hookRaw sends a request with none of the harness's checks; unlike s.do it
// may be called from any goroutine (s.do may stop the test).
func (s *server) hookRaw(method, path, key string, body any) (*response, error) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, s.URL+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	r := &response{Status: res.StatusCode, Header: res.Header}
	if r.Raw, err = io.ReadAll(res.Body); err == nil {
		err = json.Unmarshal(r.Raw, &r.Body)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", method, path, err, r.Raw)
	}
	return r, nil
}

// hookSend sends a message and returns its id.
func hookSend(t testing.TB, s *server, key, to string) string {
	t.Helper()
	r := s.do(t, "POST", "/v1/messages", key, map[string]any{"to": to, "body": "webhook test"})
	if r.Status != http.StatusAccepted {
		t.Fatalf("send to %s: %d %s", to, r.Status, r.Raw)
	}
	return r.Data()["message_id"].(string)
}

// hookInbound simulates an inbound message and returns its id.
func hookInbound(t testing.TB, s *server, key, from, body string) string {
	t.Helper()
	r := s.do(t, "POST", "/v1/test/inbound", key, map[string]any{"from": from, "body": body})
	if r.Status != http.StatusOK {
		t.Fatalf("inbound from %s: %d %s", from, r.Status, r.Raw)
	}
	return r.Data()["id"].(string)
}

// hookFlood sends n simulated inbound messages from one number, from 8
// clients at once so that their events pile up. The first goes alone: the
// number's first inbound message creates its recipient record.
func hookFlood(t testing.TB, s *server, key, from string, n int) {
	t.Helper()
	hookInbound(t, s, key, from, "flood 0")
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				r, err := s.hookRaw("POST", "/v1/test/inbound", key, map[string]any{"from": from, "body": fmt.Sprintf("flood %d", i)})
				if err != nil {
					t.Error(err)
				} else if r.Status != http.StatusOK {
					t.Errorf("inbound %d: %d %s", i, r.Status, r.Raw)
				}
			}
		})
	}
	for i := 1; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

type hookAttempt struct {
	At         time.Time `json:"at"`
	StatusCode *int      `json:"status_code"`
	Error      *string   `json:"error"`
	DurationMS int64     `json:"duration_ms"`
}

type hookDelivery struct {
	ID            string        `json:"id"`
	Event         string        `json:"event"`
	MessageID     string        `json:"message_id"`
	Status        string        `json:"status"`
	Attempts      []hookAttempt `json:"attempts"`
	NextAttemptAt *time.Time    `json:"next_attempt_at"`
	CreatedAt     time.Time     `json:"created_at"`
}

func (d hookDelivery) codes() []any {
	var out []any
	for _, a := range d.Attempts {
		if a.StatusCode == nil {
			out = append(out, nil)
		} else {
			out = append(out, *a.StatusCode)
		}
	}
	return out
}

// hookDeliveries returns the first page (up to 100) of a webhook's log.
func hookDeliveries(t testing.TB, s *server, key, hookID string) []hookDelivery {
	t.Helper()
	r := s.do(t, "GET", "/v1/webhooks/"+hookID+"/deliveries?limit=100", key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("deliveries of %s: %d %s", hookID, r.Status, r.Raw)
	}
	var out struct{ Data []hookDelivery }
	if err := json.Unmarshal(r.Raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.Data
}

// waitHookDelivery polls a webhook's log until it holds exactly one delivery
// and ok accepts it.
func waitHookDelivery(t testing.TB, s *server, key, hookID string, within time.Duration, what string, ok func(d hookDelivery) bool) hookDelivery {
	t.Helper()
	var got hookDelivery
	eventually(t, within, what, func() bool {
		ds := hookDeliveries(t, s, key, hookID)
		if len(ds) != 1 || !ok(ds[0]) {
			return false
		}
		got = ds[0]
		return true
	})
	return got
}

func hookSettled(d hookDelivery) bool { return d.Status != "pending" }

// verifyHookSignatures checks both signature schemes of a delivery the way a
// receiver would: X-Service-Signature with an HMAC computed here, the
// Standard Webhooks headers with sign.VerifyStandard.
func verifyHookSignatures(t testing.TB, h hookRequest, secret string) {
	t.Helper()
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(h.Body)
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	if got := h.Header.Get("X-Service-Signature"); got != want {
		t.Errorf("X-Service-Signature = %q, want %q (HMAC-SHA256 of the %d bytes received)", got, want, len(h.Body))
	}
	id, ts := h.Header.Get("webhook-id"), h.Header.Get("webhook-timestamp")
	if err := sign.VerifyStandard([]byte(secret), id, ts, h.Body, h.Header.Get("webhook-signature"), time.Now(), 0); err != nil {
		t.Errorf("Standard Webhooks signature: %v (id %q, timestamp %q, signature %q)", err, id, ts, h.Header.Get("webhook-signature"))
	}
	if d := h.Header.Get("X-Service-Delivery"); d == "" || d != id {
		t.Errorf("X-Service-Delivery %q, webhook-id %q: want equal and non-empty", d, id)
	}
	if ct := h.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
}

func TestWebhookRegistration(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, hookAllowPrivate)
		tn := newTenant(t, db, "--plan", "scale")
		other := newTenant(t, db, "--plan", "scale")
		url := "http://127.0.0.1:9/hooks"

		r := s.do(t, "POST", "/v1/webhooks", tn.Live, map[string]any{"url": url, "events": []string{"message.failed", "message.delivered"}, "secret": hookSecret})
		if r.Status != http.StatusCreated {
			t.Fatalf("register: %d %s", r.Status, r.Raw)
		}
		d := r.Data()
		keys := slices.Sorted(maps.Keys(d))
		if !slices.Equal(keys, []string{"created_at", "environment", "events", "id", "previous_secret_expires_at", "retry_policy", "url"}) {
			t.Errorf("record fields %v, want id, url, events, environment, retry_policy, previous_secret_expires_at, created_at", keys)
		}
		if d["retry_policy"] != "standard" {
			t.Errorf("retry_policy %v by default, want standard", d["retry_policy"])
		}
		if d["previous_secret_expires_at"] != nil {
			t.Errorf("a new webhook has a previous secret: %s", r.Raw)
		}
		if d["url"] != url || d["environment"] != "live" || fmt.Sprint(d["events"]) != "[message.failed message.delivered]" || d["id"] == "" {
			t.Errorf("record %s", r.Raw)
		}
		if created, err := time.Parse(time.RFC3339Nano, d["created_at"].(string)); err != nil || time.Since(created) > time.Minute || !strings.HasSuffix(d["created_at"].(string), "Z") {
			t.Errorf("created_at %v: %v", d["created_at"], err)
		}
		if bytes.Contains(r.Raw, []byte(hookSecret)) || bytes.Contains(r.Raw, []byte(`"secret"`)) {
			t.Errorf("registration answer shows the secret: %s", r.Raw)
		}
		first := d["id"].(string)

		// Validation: each request is invalid in exactly one field.
		long := strings.Repeat("s", 257)
		for _, c := range []struct {
			body  string
			field string
		}{
			{`{"events":["message.failed"],"secret":"` + hookSecret + `"}`, "url"},
			{`{"url":"","events":["message.failed"],"secret":"` + hookSecret + `"}`, "url"},
			{`{"url":"/hooks","events":["message.failed"],"secret":"` + hookSecret + `"}`, "url"},
			{`{"url":"127.0.0.1:9/hooks","events":["message.failed"],"secret":"` + hookSecret + `"}`, "url"},
			{`{"url":"ftp://127.0.0.1/hooks","events":["message.failed"],"secret":"` + hookSecret + `"}`, "url"},
			{`{"url":"http://","events":["message.failed"],"secret":"` + hookSecret + `"}`, "url"},
			{`{"url":"http:///hooks","events":["message.failed"],"secret":"` + hookSecret + `"}`, "url"},
			{`{"url":"` + url + `","secret":"` + hookSecret + `"}`, "events"},
			{`{"url":"` + url + `","events":[],"secret":"` + hookSecret + `"}`, "events"},
			{`{"url":"` + url + `","events":["message.sent"],"secret":"` + hookSecret + `"}`, "events"},
			{`{"url":"` + url + `","events":["message.failed","*"],"secret":"` + hookSecret + `"}`, "events"},
			{`{"url":"` + url + `","events":["message.failed"]}`, "secret"},
			{`{"url":"` + url + `","events":["message.failed"],"secret":"0123456789abcde"}`, "secret"},
			{`{"url":"` + url + `","events":["message.failed"],"secret":"` + long + `"}`, "secret"},
			{`{"url":"` + url + `","events":["message.failed"],"secret":"` + hookSecret + `","retry_policy":"forever"}`, "retry_policy"},
			{`{"url":"` + url + `","events":["message.failed"],"secret":"` + hookSecret + `","retry_policy":null}`, "retry_policy"},
			{`{"url":"` + url + `","events":["message.failed"],"secret":"` + hookSecret + `","retry_policy":""}`, "retry_policy"},
		} {
			r := s.do(t, "POST", "/v1/webhooks", tn.Live, c.body)
			if r.Status != http.StatusBadRequest || r.Code() != "VALIDATION_ERROR" || r.Field() != c.field {
				t.Errorf("%s: %d %s, want 400 VALIDATION_ERROR field %s", c.body, r.Status, r.Raw, c.field)
			}
		}
		// The bounds themselves are accepted (and make the 2nd and 3rd webhook).
		for _, secret := range []string{strings.Repeat("x", 16), strings.Repeat("y", 256)} {
			if r := s.do(t, "POST", "/v1/webhooks", tn.Live, map[string]any{"url": url, "events": hookEvents, "secret": secret}); r.Status != http.StatusCreated {
				t.Errorf("secret of %d characters: %d %s", len(secret), r.Status, r.Raw)
			}
		}

		// 20 per tenant and environment; the test environment has its own 20.
		for i := 4; i <= 20; i++ {
			registerHook(t, s, tn.Live, fmt.Sprintf("http://127.0.0.1:9/live/%d", i), "message.received")
		}
		r = s.do(t, "POST", "/v1/webhooks", tn.Live, map[string]any{"url": url, "events": hookEvents, "secret": hookSecret})
		if r.Status != http.StatusBadRequest || r.Code() != "VALIDATION_ERROR" {
			t.Fatalf("21st live webhook: %d %s, want 400 VALIDATION_ERROR", r.Status, r.Raw)
		}
		var testIDs []string
		for i := 1; i <= 20; i++ {
			testIDs = append(testIDs, registerHook(t, s, tn.Test, fmt.Sprintf("http://127.0.0.1:9/test/%d", i), "message.received"))
		}
		if r := s.do(t, "POST", "/v1/webhooks", tn.Test, map[string]any{"url": url, "events": hookEvents, "secret": hookSecret}); r.Status != http.StatusBadRequest || r.Code() != "VALIDATION_ERROR" {
			t.Fatalf("21st test webhook: %d %s, want 400 VALIDATION_ERROR", r.Status, r.Raw)
		}
		// Another tenant has its own 20.
		registerHook(t, s, other.Live, url, "message.received")

		// Lists: each environment sees only its own, oldest first.
		live := s.do(t, "GET", "/v1/webhooks", tn.Live, nil)
		test := s.do(t, "GET", "/v1/webhooks", tn.Test, nil)
		if live.Status != http.StatusOK || len(live.List()) != 20 || test.Status != http.StatusOK || len(test.List()) != 20 {
			t.Fatalf("lists: live %d (%d items), test %d (%d items)", live.Status, len(live.List()), test.Status, len(test.List()))
		}
		if live.List()[0]["id"] != first {
			t.Errorf("live list does not start with the oldest webhook %s: %s", first, live.Raw)
		}
		for _, w := range live.List() {
			if w["environment"] != "live" || slices.Contains(testIDs, w["id"].(string)) {
				t.Errorf("live key lists %v", w)
			}
		}
		for i, w := range test.List() {
			if w["environment"] != "test" || w["id"] != testIDs[i] {
				t.Errorf("test list item %d: %v, want %s", i, w, testIDs[i])
			}
		}
		for _, raw := range [][]byte{live.Raw, test.Raw} {
			if bytes.Contains(raw, []byte(hookSecret)) || bytes.Contains(raw, []byte(`"secret"`)) {
				t.Errorf("list shows secrets: %s", raw)
			}
		}

		// Delete, then 404; the freed place can be used again.
		r = s.do(t, "DELETE", "/v1/webhooks/"+first, tn.Live, nil)
		if r.Status != http.StatusOK || r.Data()["id"] != first || r.Data()["deleted"] != true || len(r.Data()) != 2 {
			t.Fatalf("delete: %d %s", r.Status, r.Raw)
		}
		if r := s.do(t, "DELETE", "/v1/webhooks/"+first, tn.Live, nil); r.Status != http.StatusNotFound || r.Code() != "NOT_FOUND" {
			t.Errorf("second delete: %d %s, want 404 NOT_FOUND", r.Status, r.Raw)
		}
		if r := s.do(t, "GET", "/v1/webhooks/"+first+"/deliveries", tn.Live, nil); r.Status != http.StatusNotFound || r.Code() != "NOT_FOUND" {
			t.Errorf("deliveries of a deleted webhook: %d %s, want 404 NOT_FOUND", r.Status, r.Raw)
		}
		if n := len(s.do(t, "GET", "/v1/webhooks", tn.Live, nil).List()); n != 19 {
			t.Errorf("%d webhooks listed after the delete, want 19", n)
		}
		registerHook(t, s, tn.Live, url, "message.failed")

		// Another tenant's webhook, or the other environment's, does not exist.
		theirs := s.do(t, "GET", "/v1/webhooks", other.Live, nil).List()[0]["id"].(string)
		for _, c := range []struct{ key, id string }{{tn.Live, theirs}, {tn.Test, theirs}, {tn.Live, testIDs[0]}, {other.Live, testIDs[0]}} {
			for _, req := range [][2]string{
				{"GET", "/v1/webhooks/" + c.id + "/deliveries"},
				{"POST", "/v1/webhooks/" + c.id + "/deliveries/01ARZ3NDEKTSV4RRFFQ69G5FAV/retry"},
				{"DELETE", "/v1/webhooks/" + c.id},
			} {
				if r := s.do(t, req[0], req[1], c.key, nil); r.Status != http.StatusNotFound || r.Code() != "NOT_FOUND" {
					t.Errorf("%s %s with a key of another tenant or environment: %d %s, want 404 NOT_FOUND", req[0], req[1], r.Status, r.Raw)
				}
			}
		}
		if n := len(s.do(t, "GET", "/v1/webhooks", other.Live, nil).List()); n != 1 {
			t.Errorf("the other tenant has %d webhooks, want its 1", n)
		}
	})
}

func TestWebhookRegistrationRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db) // without --allow-private-webhooks
		tn := newTenant(t, db, "--plan", "scale")
		for _, url := range []string{
			"http://127.0.0.1:8080/x",
			"http://127.1.2.3/x",
			"http://localhost/x",
			"http://10.0.0.1/",
			"http://172.16.5.4/",
			"http://192.168.1.1/",
			"http://100.64.0.1/",
			"http://169.254.169.254/latest",
			"http://[::1]/",
			"http://[::ffff:127.0.0.1]/",
			"http://[fd00::1]/",
			"http://[fe80::1]/",
			"http://0.0.0.0/",
			"http://224.0.0.1/",
			"https://255.255.255.255/",
			"http://[::ffff:8.8.8.8]/",                       // IPv4-mapped, written as IPv6
			"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", // Teredo
			"http://switchboard-test-no-such-host.invalid/",  // does not resolve (RFC 6761)
		} {
			r := s.do(t, "POST", "/v1/webhooks", tn.Live, map[string]any{"url": url, "events": hookEvents, "secret": hookSecret})
			if r.Status != http.StatusBadRequest || r.Code() != "VALIDATION_ERROR" || r.Field() != "url" {
				t.Errorf("%s: %d %s, want 400 VALIDATION_ERROR field url", url, r.Status, r.Raw)
			}
			// One message whatever the reason, so that registering urls
			// tells nothing about which internal names exist.
			if msg, _ := r.Body["error"].(string); msg != "url is not allowed: url host does not resolve to a public address." {
				t.Errorf("%s: message %q", url, msg)
			}
		}
		if n := len(s.do(t, "GET", "/v1/webhooks", tn.Live, nil).List()); n != 0 {
			t.Errorf("%d webhooks registered, want none", n)
		}
	})
}

// TestWebhookConnectTimeRefusal registers a loopback webhook on a server
// that allows it, then restarts the service without the flag: the delivery
// is refused when it connects, and the receiver gets nothing.
func TestWebhookConnectTimeRefusal(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		tn := newTenant(t, db, "--plan", "scale")
		rc := newHookReceiver(t, nil)
		s := startServer(t, db, hookAllowPrivate)
		hook := registerHook(t, s, tn.Live, rc.URL+"/hooks", hookEvents...)
		s.stop()

		s = startServer(t, db)
		hookInbound(t, s, tn.Live, "+15005550123", "hello")
		d := waitHookDelivery(t, s, tn.Live, hook, 20*time.Second, "a refused attempt", func(d hookDelivery) bool { return len(d.Attempts) >= 1 })
		a := d.Attempts[0]
		if a.StatusCode != nil || a.Error == nil || !strings.Contains(*a.Error, "refused") || !strings.Contains(*a.Error, "address") {
			t.Errorf("attempt %+v: want no status code and a refusal naming the address kind", a)
		}
		if a.Error != nil && strings.Contains(*a.Error, "127.0.0.1") {
			t.Errorf("the refusal shows the resolved address: %q", *a.Error)
		}
		if d.Status != "pending" || d.NextAttemptAt == nil {
			t.Errorf("after one refused attempt the delivery is %s (next %v), want pending with a retry", d.Status, d.NextAttemptAt)
		}
		if n := rc.count(); n != 0 {
			t.Errorf("the receiver got %d requests, want none", n)
		}
	})
}

// checkHookPayload compares a delivered payload with the message it reports.
func checkHookPayload(t testing.TB, got map[string]any, want map[string]any, from, to time.Time) {
	t.Helper()
	ts, _ := got["timestamp"].(string)
	if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$`).MatchString(ts) {
		t.Errorf("timestamp %q is not ISO 8601 UTC", ts)
	} else if at, _ := time.Parse(time.RFC3339Nano, ts); at.Before(from.Add(-time.Second)) || at.After(to.Add(time.Second)) {
		t.Errorf("timestamp %s is outside the test's window %s .. %s", ts, from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	}
	delete(got, "timestamp")
	if !hookSameJSON(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Errorf("payload (without timestamp)\n got %s\nwant %s", gj, wj)
	}
}

func hookSameJSON(a, b map[string]any) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return bytes.Equal(aj, bj) // json.Marshal sorts map keys
}

// TestWebhookPayloads checks each event's exact payload and both signatures
// of every delivery.
func TestWebhookPayloads(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, hookAllowPrivate)
		tn := newTenant(t, db, "--plan", "scale")
		rc := newHookReceiver(t, nil)
		hook := registerHook(t, s, tn.Live, rc.URL+"/hooks", hookEvents...)
		start := time.Now()

		delivered := hookSend(t, s, tn.Live, hookDeliveredNumber)
		failed := hookSend(t, s, tn.Live, simulator.FailNumber)
		received := hookInbound(t, s, tn.Live, "+15005550199", "Hi there, \"quoted\" & <tagged> ünïcode")
		eventually(t, 20*time.Second, "three deliveries", func() bool { return rc.count() >= 3 })
		end := time.Now()

		byEvent := map[string]hookRequest{}
		for _, h := range rc.requests() {
			verifyHookSignatures(t, h, hookSecret)
			p := h.payload(t)
			if ev := h.Header.Get("X-Service-Event"); ev != p["event"] {
				t.Errorf("X-Service-Event %q, payload event %v", ev, p["event"])
			}
			byEvent[p["event"].(string)] = h
		}
		message := func(id string) map[string]any {
			r := s.do(t, "GET", "/v1/messages/"+id, tn.Live, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("message %s: %d %s", id, r.Status, r.Raw)
			}
			return r.Data()
		}
		md, mf := message(delivered), message(failed)
		if md["status"] != "delivered" || mf["status"] != "failed" {
			t.Fatalf("message statuses %v and %v", md["status"], mf["status"])
		}
		checkHookPayload(t, byEvent["message.delivered"].payload(t), map[string]any{
			"event": "message.delivered", "message_id": delivered, "from": tn.Phone.Number, "to": hookDeliveredNumber, "channel": md["channel"],
		}, start, end)
		checkHookPayload(t, byEvent["message.failed"].payload(t), map[string]any{
			"event": "message.failed", "message_id": failed, "from": tn.Phone.Number, "to": simulator.FailNumber, "channel": mf["channel"],
			"failure_reason": "simulated carrier rejection", "error_code": "DELIVERY_FAILED",
		}, start, end)
		checkHookPayload(t, byEvent["message.received"].payload(t), map[string]any{
			"event": "message.received", "message_id": received, "from": "+15005550199", "to": tn.Phone.Number, "channel": "sms",
			"body": "Hi there, \"quoted\" & <tagged> ünïcode",
		}, start, end)
		if md["channel"] != "chat" || mf["failure_reason"] != "simulated carrier rejection" {
			t.Errorf("messages: %v / %v", md, mf)
		}

		// The log lists the three deliveries by the ids the requests carried.
		eventually(t, 10*time.Second, "three succeeded deliveries", func() bool {
			ds := hookDeliveries(t, s, tn.Live, hook)
			return len(ds) == 3 && !slices.ContainsFunc(ds, func(d hookDelivery) bool { return d.Status != "succeeded" })
		})
		for _, d := range hookDeliveries(t, s, tn.Live, hook) {
			h := byEvent[d.Event]
			if h.Header.Get("X-Service-Delivery") != d.ID || h.payload(t)["message_id"] != d.MessageID || len(d.Attempts) != 1 ||
				*d.Attempts[0].StatusCode != 200 || d.Attempts[0].Error != nil || d.NextAttemptAt != nil {
				t.Errorf("log entry %+v does not match the request (delivery %s)", d, h.Header.Get("X-Service-Delivery"))
			}
		}
		if n := rc.count(); n != 3 {
			t.Errorf("receiver got %d requests, want 3", n)
		}
	})
}

// TestWebhookFanOut checks who gets which event: every subscribed webhook
// of the tenant and environment, nobody else.
func TestWebhookFanOut(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, hookAllowPrivate)
		a := newTenant(t, db, "--plan", "scale")
		b := newTenant(t, db, "--plan", "scale")
		all1, all2, failedOnly, testHook, otherTenant := newHookReceiver(t, nil), newHookReceiver(t, nil), newHookReceiver(t, nil), newHookReceiver(t, nil), newHookReceiver(t, nil)
		h1 := registerHook(t, s, a.Live, all1.URL, hookEvents...)
		h2 := registerHook(t, s, a.Live, all2.URL, hookEvents...)
		hf := registerHook(t, s, a.Live, failedOnly.URL, "message.failed")
		ht := registerHook(t, s, a.Test, testHook.URL, hookEvents...)
		hb := registerHook(t, s, b.Live, otherTenant.URL, hookEvents...)

		delivered := hookSend(t, s, a.Live, hookDeliveredNumber)
		failed := hookSend(t, s, a.Live, simulator.FailNumber)
		testInbound := hookInbound(t, s, a.Test, "+15005550177", "test mode")
		testSend := hookSend(t, s, a.Test, hookDeliveredNumber)

		events := func(rc *hookReceiver) map[string]string { // message id -> event
			out := map[string]string{}
			for _, h := range rc.requests() {
				p := h.payload(t)
				out[p["message_id"].(string)] = p["event"].(string)
			}
			return out
		}
		eventually(t, 20*time.Second, "every expected delivery", func() bool {
			return all1.count() >= 2 && all2.count() >= 2 && failedOnly.count() >= 1 && testHook.count() >= 2
		})
		want := map[string]string{delivered: "message.delivered", failed: "message.failed"}
		for name, rc := range map[string]*hookReceiver{"first": all1, "second": all2} {
			if got := events(rc); !maps.Equal(got, want) {
				t.Errorf("%s live webhook got %v, want %v", name, got, want)
			}
		}
		if got := events(failedOnly); !maps.Equal(got, map[string]string{failed: "message.failed"}) {
			t.Errorf("message.failed-only webhook got %v", got)
		}
		// Test sends are delivered by the simulator, like live ones.
		testWant := map[string]string{testInbound: "message.received", testSend: "message.delivered"}
		if got := events(testHook); !maps.Equal(got, testWant) {
			t.Errorf("test webhook got %v, want %v", got, testWant)
		}
		// The deliveries were written with the events: the logs are complete now.
		for _, c := range []struct {
			key, hook string
			n         int
		}{{a.Live, h1, 2}, {a.Live, h2, 2}, {a.Live, hf, 1}, {a.Test, ht, 2}, {b.Live, hb, 0}} {
			if ds := hookDeliveries(t, s, c.key, c.hook); len(ds) != c.n {
				t.Errorf("webhook %s has %d deliveries, want %d: %+v", c.hook, len(ds), c.n, ds)
			}
		}
		eventually(t, 10*time.Second, "the logs settled", func() bool {
			for _, c := range [][2]string{{a.Live, h1}, {a.Live, h2}, {a.Live, hf}, {a.Test, ht}} {
				for _, d := range hookDeliveries(t, s, c[0], c[1]) {
					if d.Status != "succeeded" {
						return false
					}
				}
			}
			return true
		})
		if n := otherTenant.count(); n != 0 {
			t.Errorf("another tenant's webhook got %d requests", n)
		}
		for name, rc := range map[string]*hookReceiver{"first": all1, "second": all2, "failed-only": failedOnly, "test": testHook} {
			for _, h := range rc.requests() {
				verifyHookSignatures(t, h, hookSecret)
			}
			if n := map[string]int{"first": 2, "second": 2, "failed-only": 1, "test": 2}[name]; rc.count() != n {
				t.Errorf("%s webhook got %d requests, want %d", name, rc.count(), n)
			}
		}
		// Each webhook's delivery of one event has its own id.
		ids := map[string]bool{}
		for _, rc := range []*hookReceiver{all1, all2} {
			for _, h := range rc.requests() {
				ids[h.Header.Get("X-Service-Delivery")] = true
			}
		}
		if len(ids) != 4 {
			t.Errorf("%d distinct delivery ids over 4 deliveries", len(ids))
		}
	})
}

// TestWebhookRetries sends one event to four endpoints of a tenant, each
// failing in its own way, and follows every delivery through its retries.
// The deliveries run side by side, so the test takes as long as the longest
// (about 15 s), not the sum.
func TestWebhookRetries(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, hookAllowPrivate)
		tn := newTenant(t, db, "--plan", "scale")
		other := newTenant(t, db, "--plan", "scale")
		var mu sync.Mutex
		fixed := false
		always500 := newHookReceiver(t, hookAnswer(http.StatusInternalServerError))
		twice500 := newHookReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n <= 2 {
				w.WriteHeader(http.StatusInternalServerError)
			}
		})
		hangs := newHookReceiver(t, hookHang)
		untilFixed := newHookReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if !fixed {
				w.WriteHeader(http.StatusBadGateway)
			}
		})
		hAlways := registerHook(t, s, tn.Live, always500.URL, "message.received")
		hTwice := registerHook(t, s, tn.Live, twice500.URL, "message.received")
		hHangs := registerHook(t, s, tn.Live, hangs.URL, "message.received")
		hFixed := registerHook(t, s, tn.Live, untilFixed.URL, "message.received")
		otherHook := registerHook(t, s, other.Live, untilFixed.URL, "message.received")
		hookInbound(t, s, tn.Live, "+15005550123", "retry me")

		// Only a failed delivery can be sent again: a pending one, here with
		// its attempt in flight, answers 409 and is not sent a second time
		// at once (checked in "timeout").
		eventually(t, 10*time.Second, "the hanging endpoint's first request", func() bool { return hangs.count() == 1 })
		hung := hangs.requests()[0].Header.Get("X-Service-Delivery")
		if r := s.do(t, "POST", "/v1/webhooks/"+hHangs+"/deliveries/"+hung+"/retry", tn.Live, nil); r.Status != http.StatusConflict || r.Code() != "DELIVERY_NOT_FAILED" {
			t.Errorf("retry of a pending delivery: %d %s, want 409 DELIVERY_NOT_FAILED", r.Status, r.Raw)
		}

		t.Run("two failures then success", func(t *testing.T) {
			d := waitHookDelivery(t, s, tn.Live, hTwice, 30*time.Second, "the delivery to succeed", hookSettled)
			if d.Status != "succeeded" || fmt.Sprint(d.codes()) != "[500 500 200]" || d.Attempts[2].Error != nil || d.NextAttemptAt != nil {
				t.Errorf("delivery %+v (codes %v): want succeeded after 500, 500, 200", d, d.codes())
			}
			// A succeeded delivery is not sent again either.
			if r := s.do(t, "POST", "/v1/webhooks/"+hTwice+"/deliveries/"+d.ID+"/retry", tn.Live, nil); r.Status != http.StatusConflict || r.Code() != "DELIVERY_NOT_FAILED" {
				t.Errorf("retry of a succeeded delivery: %d %s, want 409 DELIVERY_NOT_FAILED", r.Status, r.Raw)
			}
			if n := twice500.count(); n != 3 {
				t.Errorf("receiver got %d requests, want 3", n)
			}
		})

		t.Run("timeout", func(t *testing.T) {
			d := waitHookDelivery(t, s, tn.Live, hHangs, 30*time.Second, "the first attempt to time out", func(d hookDelivery) bool { return len(d.Attempts) >= 1 })
			a := d.Attempts[0]
			if a.StatusCode != nil || a.Error == nil || !strings.Contains(*a.Error, "timeout") || a.DurationMS < 10000 || a.DurationMS > 12000 {
				t.Errorf("attempt %+v: want no status code, an error that mentions timeout, duration_ms about 10000", a)
			}
			if d.Status != "pending" || d.NextAttemptAt == nil {
				t.Errorf("delivery %s (next %v) after one timeout, want pending with a retry", d.Status, d.NextAttemptAt)
			}
			eventually(t, 20*time.Second, "the retry after the timeout", func() bool { return hangs.count() >= 2 })
			reqs := hangs.requests()
			if gap := reqs[1].At.Sub(reqs[0].At); gap < 11500*time.Millisecond {
				t.Errorf("second request %v after the first: want it after the 10 s timeout and the 2 s delay, not on the manual retry sent while the attempt was in flight", gap)
			}
		})

		// The one timing the API fixes: retries 2 s, 4 s and 8 s after
		// the failures, +-0.5 s, measured where they arrive.
		t.Run("schedule", func(t *testing.T) {
			d := waitHookDelivery(t, s, tn.Live, hAlways, 45*time.Second, "the delivery to fail", hookSettled)
			if d.Status != "failed" || len(d.Attempts) != 4 || d.NextAttemptAt != nil {
				t.Fatalf("delivery %+v: want failed after 4 attempts, no next attempt", d)
			}
			for i, a := range d.Attempts {
				if a.StatusCode == nil || *a.StatusCode != 500 || a.Error == nil {
					t.Errorf("attempt %d: %+v, want status_code 500 and an error", i+1, a)
				}
			}
			reqs := always500.requests()
			if len(reqs) != 4 {
				t.Fatalf("receiver got %d requests, want 4", len(reqs))
			}
			for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
				gap := reqs[i+1].At.Sub(reqs[i].At)
				if gap < want-500*time.Millisecond || gap > want+500*time.Millisecond {
					t.Errorf("retry %d arrived %v after the previous attempt, want %v +- 0.5s", i+1, gap, want)
				} else {
					t.Logf("retry %d arrived after %v", i+1, gap.Round(time.Millisecond))
				}
			}
			for i, h := range reqs {
				verifyHookSignatures(t, h, hookSecret)
				if h.Header.Get("X-Service-Delivery") != d.ID || !bytes.Equal(h.Body, reqs[0].Body) {
					t.Errorf("request %d: delivery %q (want %q), same body: %v", i+1, h.Header.Get("X-Service-Delivery"), d.ID, bytes.Equal(h.Body, reqs[0].Body))
				}
			}
		})

		// A failed delivery sent again with POST .../retry gets a fresh
		// cycle, with the same delivery id and body.
		t.Run("manual retry", func(t *testing.T) {
			d := waitHookDelivery(t, s, tn.Live, hFixed, 45*time.Second, "the delivery to fail", hookSettled)
			if d.Status != "failed" || len(d.Attempts) != 4 {
				t.Fatalf("delivery %+v: want failed after 4 attempts", d)
			}
			mu.Lock()
			fixed = true
			mu.Unlock()
			for _, c := range []struct{ key, path string }{
				{tn.Live, "/v1/webhooks/" + hFixed + "/deliveries/01ARZ3NDEKTSV4RRFFQ69G5FAV/retry"},
				{tn.Live, "/v1/webhooks/" + hAlways + "/deliveries/" + d.ID + "/retry"},
				{tn.Live, "/v1/webhooks/" + otherHook + "/deliveries/" + d.ID + "/retry"},
				{other.Live, "/v1/webhooks/" + otherHook + "/deliveries/" + d.ID + "/retry"},
				{other.Live, "/v1/webhooks/" + hFixed + "/deliveries/" + d.ID + "/retry"},
				{tn.Test, "/v1/webhooks/" + hFixed + "/deliveries/" + d.ID + "/retry"},
			} {
				if r := s.do(t, "POST", c.path, c.key, nil); r.Status != http.StatusNotFound || r.Code() != "NOT_FOUND" {
					t.Errorf("POST %s: %d %s, want 404 NOT_FOUND", c.path, r.Status, r.Raw)
				}
			}
			r := s.do(t, "POST", "/v1/webhooks/"+hFixed+"/deliveries/"+d.ID+"/retry", tn.Live, nil)
			if r.Status != http.StatusAccepted || r.Data()["status"] != "pending" || r.Data()["id"] != d.ID {
				t.Fatalf("retry: %d %s, want 202 with the pending delivery", r.Status, r.Raw)
			}
			d = waitHookDelivery(t, s, tn.Live, hFixed, 20*time.Second, "the retried delivery to succeed", hookSettled)
			if d.Status != "succeeded" || fmt.Sprint(d.codes()) != "[502 502 502 502 200]" {
				t.Errorf("after the retry: %+v (codes %v), want succeeded with 5 attempts", d, d.codes())
			}
			if r := s.do(t, "POST", "/v1/webhooks/"+hFixed+"/deliveries/"+d.ID+"/retry", tn.Live, nil); r.Status != http.StatusConflict || r.Code() != "DELIVERY_NOT_FAILED" {
				t.Errorf("a second retry, of the delivery that succeeded: %d %s, want 409 DELIVERY_NOT_FAILED", r.Status, r.Raw)
			}
			reqs := untilFixed.requests()
			if len(reqs) != 5 {
				t.Fatalf("receiver got %d requests, want 5", len(reqs))
			}
			for i, h := range reqs {
				verifyHookSignatures(t, h, hookSecret)
				if h.Header.Get("X-Service-Delivery") != d.ID || !bytes.Equal(h.Body, reqs[0].Body) {
					t.Errorf("request %d: delivery %q, body %s; want %q and the first body", i+1, h.Header.Get("X-Service-Delivery"), h.Body, d.ID)
				}
			}
		})
	})
}

// TestWebhookFailedAttempts: a redirect and a refused connection are
// failures; the redirect is not followed.
func TestWebhookFailedAttempts(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, hookAllowPrivate)
		tn := newTenant(t, db, "--plan", "scale")
		good := newHookReceiver(t, nil)
		redirect := newHookReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, good.URL+"/moved", http.StatusFound)
		})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + ln.Addr().String() + "/hooks"
		ln.Close()

		hr := registerHook(t, s, tn.Live, redirect.URL, "message.received")
		hc := registerHook(t, s, tn.Live, closed, "message.received")
		hookInbound(t, s, tn.Live, "+15005550123", "hello")

		d := waitHookDelivery(t, s, tn.Live, hr, 20*time.Second, "the redirect attempt", func(d hookDelivery) bool { return len(d.Attempts) >= 1 })
		if a := d.Attempts[0]; a.StatusCode == nil || *a.StatusCode != http.StatusFound || a.Error == nil || d.Status != "pending" || d.NextAttemptAt == nil {
			t.Errorf("redirect: %+v (first attempt %+v), want a failed attempt with status_code 302 and a retry scheduled", d, a)
		}
		if n := good.count(); n != 0 {
			t.Errorf("the redirect was followed: its target got %d requests", n)
		}
		d = waitHookDelivery(t, s, tn.Live, hc, 20*time.Second, "the refused attempt", func(d hookDelivery) bool { return len(d.Attempts) >= 1 })
		if a := d.Attempts[0]; a.StatusCode != nil || a.Error == nil || *a.Error == "" || d.Status != "pending" || d.NextAttemptAt == nil {
			t.Errorf("connection refused: %+v (first attempt %+v), want a failed attempt with status_code null and an error", d, a)
		}
	})
}

// TestWebhookIsolation: an endpoint that hangs does not delay deliveries to
// another endpoint of the same tenant, and holds at most its own slots.
func TestWebhookIsolation(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, hookAllowPrivate)
		tn := newTenant(t, db, "--plan", "scale")
		stuck := newHookReceiver(t, hookHang)
		healthy := newHookReceiver(t, nil)
		registerHook(t, s, tn.Live, stuck.URL, hookEvents...)
		hh := registerHook(t, s, tn.Live, healthy.URL, hookEvents...)
		const n = 100
		hookFlood(t, s, tn.Live, "+15005550123", n)
		eventually(t, 15*time.Second, "all deliveries at the healthy endpoint", func() bool { return healthy.count() >= n })
		eventually(t, 10*time.Second, "the healthy endpoint's log all succeeded", func() bool {
			r := s.do(t, "GET", "/v1/webhooks/"+hh+"/deliveries?limit=100", tn.Live, nil)
			for _, d := range r.List() {
				if d["status"] != "succeeded" {
					return false
				}
			}
			return len(r.List()) == n
		})
		stuck.mu.Lock()
		most := stuck.maxInflight
		stuck.mu.Unlock()
		t.Logf("the hanging endpoint held at most %d requests at once", most)
		if most > webhook.DefaultPerEndpoint {
			t.Errorf("the hanging endpoint had %d requests in flight at once, more than its %d slots", most, webhook.DefaultPerEndpoint)
		}
		if n := healthy.count(); n != 100 {
			t.Errorf("the healthy endpoint got %d requests, want 100", n)
		}
	})
}

// TestWebhookTenantFairness: a tenant's backlog on a slow endpoint does not
// hold up another tenant's delivery. Tenant A's endpoint answers nothing
// until tenant B's event has arrived (then it takes 200 ms a request), so B's
// event is sent while A's endpoint has all its slots taken and the rest of A's
// 300 events wait, due, in the queue.
func TestWebhookTenantFairness(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		const backlog = 300
		s := startServer(t, db, hookAllowPrivate)
		a := newTenant(t, db, "--plan", "scale")
		b := newTenant(t, db, "--plan", "scale")
		bArrived := make(chan struct{})
		slow := newHookReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			for _, wait := range []<-chan struct{}{bArrived, hookAfter(200 * time.Millisecond)} {
				select {
				case <-wait:
				case <-r.Context().Done():
					return
				}
			}
		})
		var once sync.Once
		waiting := 0 // tenant A's events not yet at its endpoint when B's arrived
		fast := newHookReceiver(t, func(int, http.ResponseWriter, *http.Request) {
			once.Do(func() {
				waiting = backlog - slow.count()
				close(bArrived)
			})
		})
		registerHook(t, s, a.Live, slow.URL, hookEvents...)
		registerHook(t, s, b.Live, fast.URL, hookEvents...)
		hookFlood(t, s, a.Live, "+15005550123", backlog)
		eventually(t, 10*time.Second, "tenant A's endpoint to have all its slots taken", func() bool { return slow.count() >= webhook.DefaultPerEndpoint })

		sent := time.Now()
		id := hookInbound(t, s, b.Live, "+15005550124", "me first?")
		eventually(t, 5*time.Second, "tenant B's delivery", func() bool { return fast.count() == 1 })
		<-bArrived // closed right after waiting is set
		t.Logf("tenant B's event delivered after %v, while %d of tenant A's %d waited", time.Since(sent).Round(time.Millisecond), waiting, backlog)
		if p := fast.requests()[0].payload(t); p["message_id"] != id {
			t.Errorf("tenant B got %v", p)
		}
		// And the backlog drains.
		eventually(t, 60*time.Second, "tenant A's backlog", func() bool { return slow.count() >= backlog })
	})
}

// hookAfter is time.After for a select over a list of channels.
func hookAfter(d time.Duration) <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(d, func() { close(c) })
	return c
}

// TestWebhookRestartMidRetry: a delivery whose first attempt failed is
// retried by the next server on the same database.
func TestWebhookRestartMidRetry(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		var mu sync.Mutex
		var restarted time.Time
		rc := newHookReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if n == 1 || restarted.IsZero() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		tn := newTenant(t, db, "--plan", "scale")
		s := startServer(t, db, hookAllowPrivate)
		hook := registerHook(t, s, tn.Live, rc.URL, hookEvents...)
		hookInbound(t, s, tn.Live, "+15005550123", "survive a restart")
		first := waitHookDelivery(t, s, tn.Live, hook, 20*time.Second, "the first attempt", func(d hookDelivery) bool { return len(d.Attempts) >= 1 })
		s.stop()

		s = startServer(t, db, hookAllowPrivate)
		mu.Lock()
		restarted = time.Now()
		mu.Unlock()
		d := waitHookDelivery(t, s, tn.Live, hook, 30*time.Second, "the delivery to succeed after the restart", hookSettled)
		codes := d.codes()
		if d.Status != "succeeded" || len(codes) < 2 || codes[0] != 503 || codes[len(codes)-1] != 200 || d.ID != first.ID {
			t.Fatalf("delivery %+v (codes %v): want the first attempt's 503, then 200 after the restart", d, codes)
		}
		reqs := rc.requests()
		last := reqs[len(reqs)-1]
		if last.At.Before(restarted) || last.Header.Get("X-Service-Delivery") != d.ID || !bytes.Equal(last.Body, reqs[0].Body) {
			t.Errorf("the successful request arrived at %v (restart at %v), delivery %q: want the same delivery, from the new server",
				last.At, restarted, last.Header.Get("X-Service-Delivery"))
		}
		if gap := d.Attempts[1].At.Sub(d.Attempts[0].At); gap < 1500*time.Millisecond {
			t.Errorf("the retry came %v after the first attempt, want the 2 s delay kept", gap)
		}
	})
}

// TestWebhookDeliveryLogPagination: the log is newest first, in pages.
func TestWebhookDeliveryLogPagination(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, hookAllowPrivate)
		tn := newTenant(t, db, "--plan", "scale")
		rc := newHookReceiver(t, nil)
		hook := registerHook(t, s, tn.Live, rc.URL, "message.received")
		var msgs []string
		for i := range 5 {
			msgs = append(msgs, hookInbound(t, s, tn.Live, "+15005550123", fmt.Sprintf("page %d", i)))
		}
		var seen []string
		path := "/v1/webhooks/" + hook + "/deliveries?limit=2"
		for pages := 0; path != ""; pages++ {
			if pages == 3 {
				t.Fatalf("more than 3 pages of 2 for 5 deliveries")
			}
			r := s.do(t, "GET", path, tn.Live, nil)
			if r.Status != http.StatusOK || len(r.List()) > 2 {
				t.Fatalf("GET %s: %d %s", path, r.Status, r.Raw)
			}
			for _, d := range r.List() {
				seen = append(seen, d["message_id"].(string))
			}
			path = nextLink(r.Header.Get("Link"))
			if path != "" && !strings.HasPrefix(path, "/v1/webhooks/"+hook+"/deliveries?") {
				t.Fatalf("Link %q", r.Header.Get("Link"))
			}
		}
		slices.Reverse(msgs)
		if !slices.Equal(seen, msgs) {
			t.Errorf("pages listed messages %v, want newest first %v", seen, msgs)
		}
		for _, q := range []string{"limit=0", "limit=101", "limit=x"} {
			if r := s.do(t, "GET", "/v1/webhooks/"+hook+"/deliveries?"+q, tn.Live, nil); r.Status != http.StatusBadRequest || r.Field() != "limit" {
				t.Errorf("%s: %d %s, want 400 field limit", q, r.Status, r.Raw)
			}
		}
	})
}
