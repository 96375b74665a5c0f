package main

// End-to-end tests of POST/GET /v1/messages: the send path and its order of
// checks, delivery through the simulator, quiet hours, idempotency keys,
// listing, the new-contact limit, the chat engine switch and sending phones.
// Helpers shared by templates_test.go and inbound_test.go live here too.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/provider/simulator"
)

// Recipients in several time zones, X a random digit. Quiet hours depend on
// the hour at which the tests run, so a test asks msgAwake for a
// number that is outside quiet hours now, or msgQuiet for one that is
// inside them; the zones are spread so that both always exist.
var msgZonePatterns = []string{
	"+1212555XXXX",  // New York
	"+1213555XXXX",  // Los Angeles
	"+1808956XXXX",  // Honolulu
	"+44207123XXXX", // London
	"+919812XXXXXX", // India
	"+813123XXXXX",  // Tokyo
	"+612912XXXXX",  // Sydney
	"+64930XXXXX",   // Auckland
}

var msgIssued = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// msgFreshNumber fills the X of pattern with random digits, never returning
// the same number twice in this process.
func msgFreshNumber(pattern string) string {
	for {
		var b strings.Builder
		for _, c := range pattern {
			if c == 'X' {
				d, _ := rand.Int(rand.Reader, big.NewInt(10))
				b.WriteByte(byte('0' + d.Int64()))
			} else {
				b.WriteRune(c)
			}
		}
		n := b.String()
		msgIssued.Lock()
		seen := msgIssued.m[n]
		msgIssued.m[n] = true
		msgIssued.Unlock()
		if !seen {
			return n
		}
	}
}

// msgShuffledZones returns msgZonePatterns in random order, so tests spread over
// the zones that qualify.
func msgShuffledZones() []string {
	out := append([]string(nil), msgZonePatterns...)
	for i := len(out) - 1; i > 0; i-- {
		j, _ := rand.Int(rand.Reader, big.NewInt(int64(i+1)))
		out[i], out[j.Int64()] = out[j.Int64()], out[i]
	}
	return out
}

// msgAwake returns a new ordinary recipient (delivered, auto resolves
// to chat) that is outside quiet hours now and for the next 30 minutes, so
// a send to it is answered 202 whenever the test runs.
func msgAwake(t testing.TB) string {
	t.Helper()
	now := time.Now()
	for _, p := range msgShuffledZones() {
		n := msgFreshNumber(p)
		if _, q := phonenum.QuietUntil(n, now); q {
			continue
		}
		if _, q := phonenum.QuietUntil(n, now.Add(30*time.Minute)); q {
			continue
		}
		return n
	}
	t.Fatalf("no test time zone is outside quiet hours at %v", now.UTC())
	return ""
}

// msgQuiet returns a new recipient that is inside quiet hours now and
// stays so for at least five minutes, with the end of its quiet hours.
func msgQuiet(t testing.TB) (string, time.Time) {
	t.Helper()
	now := time.Now()
	extra := []string{"+649XXXXXXX", "+919XXXXXXXXX", "+1808XXXXXXX"}
	for _, p := range append(msgShuffledZones(), extra...) {
		n := msgFreshNumber(p)
		until, q := phonenum.QuietUntil(n, now)
		if q && until.Sub(now) > 5*time.Minute {
			return n, until
		}
	}
	t.Skipf("no test number is in quiet hours at %v", now.UTC())
	return "", time.Time{}
}

// msgTenant creates a tenant on the Scale plan: no per-key rate limit and
// no monthly quota, so tests that poll are never throttled.
func msgTenant(t testing.TB, db string) tenant {
	t.Helper()
	return newTenant(t, db, "--plan", "scale")
}

// msgPlans writes a --plans file and returns its path.
func msgPlans(t testing.TB, js string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// msgAvoidMidnight waits out the last seconds of a UTC day, so that daily
// limits (new contacts, phone limits) do not reset in the middle of a test.
func msgAvoidMidnight(t testing.TB) {
	now := time.Now().UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	if d := next.Sub(now); d < time.Minute {
		t.Logf("waiting %v for the UTC day to change", d)
		time.Sleep(d + time.Second)
	}
}

// msgWantErr asserts an error answer; field, when set, is details.field.
func msgWantErr(t testing.TB, r *response, status int, code, field string) {
	t.Helper()
	if r.Status != status || r.Code() != code {
		t.Fatalf("want %d %s, got %d %s", status, code, r.Status, r.Raw)
	}
	if field != "" && r.Field() != field {
		t.Fatalf("want details.field %q, got %q: %s", field, r.Field(), r.Raw)
	}
}

// msgSend sends and asserts 202; it returns data.
func msgSend(t testing.TB, s *server, key string, body map[string]any, headers ...string) map[string]any {
	t.Helper()
	r := s.do(t, "POST", "/v1/messages", key, body, headers...)
	if r.Status != http.StatusAccepted {
		t.Fatalf("send %v: want 202, got %d %s", body, r.Status, r.Raw)
	}
	d := r.Data()
	if d["status"] != "queued" || d["message_id"] == "" || d["message_id"] == nil {
		t.Fatalf("send: %s", r.Raw)
	}
	return d
}

// msgGet returns GET /v1/messages/{id}, asserting 200.
func msgGet(t testing.TB, s *server, key, id string) map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/messages/"+id, key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("get message %s: %d %s", id, r.Status, r.Raw)
	}
	return r.Data()
}

// msgWait polls the message until it reaches status, failing at once
// if it reaches another final status.
func msgWait(t testing.TB, s *server, key, id, status string) map[string]any {
	t.Helper()
	var m map[string]any
	eventually(t, 30*time.Second, "message "+id+" to be "+status, func() bool {
		m = msgGet(t, s, key, id)
		st, _ := m["status"].(string)
		if st != status && (st == "delivered" || st == "failed") {
			t.Fatalf("message %s became %s, want %s: %v", id, st, status, m)
		}
		return st == status
	})
	return m
}

// msgList returns GET /v1/messages?query, asserting 200.
func msgList(t testing.TB, s *server, key, query string) *response {
	t.Helper()
	r := s.do(t, "GET", "/v1/messages?"+query, key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list messages ?%s: %d %s", query, r.Status, r.Raw)
	}
	return r
}

var msgLinkRE = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// msgPages reads a list from path through its Link headers and returns
// every item's id in order and the number of pages.
func msgPages(t testing.TB, s *server, key, path string) (ids []string, pages int) {
	t.Helper()
	for path != "" {
		r := s.do(t, "GET", path, key, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Raw)
		}
		pages++
		for _, it := range r.List() {
			ids = append(ids, it["id"].(string))
		}
		path = ""
		if l := r.Header.Get("Link"); l != "" {
			m := msgLinkRE.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("malformed Link header %q", l)
			}
			path = m[1]
		}
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
	}
	return ids, pages
}

func msgIDs(items []map[string]any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i], _ = it["id"].(string)
	}
	return out
}

func TestMessageSendAndDelivery(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)

		to := msgAwake(t)
		d := msgSend(t, s, tn.Live, map[string]any{"to": to, "body": "hello", "channel": "auto"})
		if d["channel"] != "chat" || d["from"] != tn.Phone.Number || d["to"] != to || d["livemode"] != true || d["scheduled_at"] != nil {
			t.Fatalf("send answer: %v", d)
		}
		id := d["message_id"].(string)
		m := msgWait(t, s, tn.Live, id, "delivered")
		if m["id"] != id || m["direction"] != "outbound" || m["channel"] != "chat" || m["body"] != "hello" ||
			m["from"] != tn.Phone.Number || m["to"] != to || m["livemode"] != true || m["created_at"] != d["created_at"] {
			t.Fatalf("delivered message: %v", m)
		}
		if m["sent_at"] == nil || m["delivered_at"] == nil || m["failed_at"] != nil || m["failure_reason"] != nil ||
			m["error_code"] != nil || m["template"] != nil || m["campaign_id"] != nil || m["scheduled_at"] != nil {
			t.Fatalf("delivered message fields: %v", m)
		}

		// Channel omitted means auto.
		d = msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "default channel"})
		if d["channel"] != "chat" {
			t.Fatalf("default channel resolved to %v", d["channel"])
		}

		// Not reachable on chat: auto resolves to sms.
		d = msgSend(t, s, tn.Live, map[string]any{"to": simulator.SMSOnlyNumber, "body": "sms only"})
		if d["channel"] != "sms" {
			t.Fatalf("%s resolved to %v", simulator.SMSOnlyNumber, d["channel"])
		}
		if m := msgWait(t, s, tn.Live, d["message_id"].(string), "delivered"); m["channel"] != "sms" {
			t.Fatalf("sms-only message: %v", m)
		}

		// Carrier rejection: accepted, then failed.
		d = msgSend(t, s, tn.Live, map[string]any{"to": simulator.FailNumber, "body": "will fail"})
		m = msgWait(t, s, tn.Live, d["message_id"].(string), "failed")
		if m["failure_reason"] != "simulated carrier rejection" || m["error_code"] != "DELIVERY_FAILED" ||
			m["failed_at"] == nil || m["delivered_at"] != nil {
			t.Fatalf("failed message: %v", m)
		}

		// Detection unavailable: auto (explicit or default) is refused, sms is fine.
		for _, body := range []map[string]any{
			{"to": simulator.NoDetectionNumber, "body": "x", "channel": "auto"},
			{"to": simulator.NoDetectionNumber, "body": "x"},
		} {
			msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, body), 503, "DETECTION_UNAVAILABLE", "")
		}
		d = msgSend(t, s, tn.Live, map[string]any{"to": simulator.NoDetectionNumber, "body": "x", "channel": "sms"})
		if d["channel"] != "sms" {
			t.Fatalf("explicit sms: %v", d)
		}
		msgWait(t, s, tn.Live, d["message_id"].(string), "delivered")

		msgWantErr(t, s.do(t, "GET", "/v1/messages/01JUNKJUNKJUNKJUNKJUNKJUNK", tn.Live, nil), 404, "NOT_FOUND", "")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", "", map[string]any{"to": to, "body": "x"}), 401, "INVALID_API_KEY", "")
	})
}

func TestMessageValidation(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		to := msgAwake(t)

		long := strings.Repeat("x", 1601)
		cases := []struct {
			name  string
			body  any
			code  string
			field string
		}{
			{"missing to", map[string]any{"body": "hi"}, "VALIDATION_ERROR", "to"},
			{"empty to", map[string]any{"to": "", "body": "hi"}, "VALIDATION_ERROR", "to"},
			{"body and template", map[string]any{"to": to, "body": "hi", "template": "t"}, "VALIDATION_ERROR", "body"},
			{"neither body nor template", map[string]any{"to": to}, "VALIDATION_ERROR", "body"},
			{"empty body", map[string]any{"to": to, "body": ""}, "VALIDATION_ERROR", "body"},
			{"body of 1601 characters", map[string]any{"to": to, "body": long}, "VALIDATION_ERROR", "body"},
			{"empty template", map[string]any{"to": to, "template": ""}, "VALIDATION_ERROR", "template"},
			{"channel fax", map[string]any{"to": to, "body": "hi", "channel": "fax"}, "VALIDATION_ERROR", "channel"},
			{"data without template", map[string]any{"to": to, "body": "hi", "data": map[string]any{"a": "b"}}, "VALIDATION_ERROR", "data"},
			{"data value object", map[string]any{"to": to, "template": "t", "data": map[string]any{"x": map[string]any{"y": 1}}}, "VALIDATION_ERROR", "data.x"},
			{"data value array", map[string]any{"to": to, "template": "t", "data": map[string]any{"x": []int{1}}}, "VALIDATION_ERROR", "data.x"},
			{"data value null", map[string]any{"to": to, "template": "t", "data": map[string]any{"x": nil}}, "VALIDATION_ERROR", "data.x"},
			{"unknown field", map[string]any{"to": to, "body": "hi", "colour": "red"}, "VALIDATION_ERROR", "colour"},
			{"field name in another case", map[string]any{"To": to, "body": "hi"}, "VALIDATION_ERROR", "To"},
			{"to of wrong type", map[string]any{"to": 12125550123, "body": "hi"}, "VALIDATION_ERROR", "to"},
			{"body of wrong type", map[string]any{"to": to, "body": 5}, "VALIDATION_ERROR", "body"},
			{"data of wrong type", map[string]any{"to": to, "template": "t", "data": "x"}, "VALIDATION_ERROR", "data"},
			{"channel of wrong type", map[string]any{"to": to, "body": "hi", "channel": true}, "VALIDATION_ERROR", "channel"},
			{"malformed JSON", `{"to": "` + to + `", "body": `, "VALIDATION_ERROR", "body"},
			{"not an object", `["to"]`, "VALIDATION_ERROR", "body"},
			{"empty request body", "", "VALIDATION_ERROR", "body"},
			{"phone without plus", map[string]any{"to": "12345", "body": "hi"}, "INVALID_PHONE_NUMBER", "to"},
			{"phone too short", map[string]any{"to": "+123", "body": "hi"}, "INVALID_PHONE_NUMBER", "to"},
			{"phone of 16 digits", map[string]any{"to": "+1234567890123456", "body": "hi"}, "INVALID_PHONE_NUMBER", "to"},
			{"phone with spaces", map[string]any{"to": "+1 212 555 0123", "body": "hi"}, "INVALID_PHONE_NUMBER", "to"},
			{"from not E.164", map[string]any{"to": to, "body": "hi", "from": "555-0100"}, "INVALID_PHONE_NUMBER", "from"},
			// Field rules come before the phone number rule.
			{"invalid phone and missing body", map[string]any{"to": "12345"}, "VALIDATION_ERROR", "body"},
			{"invalid phone and bad channel", map[string]any{"to": "+123", "body": "hi", "channel": "fax"}, "VALIDATION_ERROR", "channel"},
			{"from not a tenant number", map[string]any{"to": to, "body": "hi", "from": "+19995550100"}, "VALIDATION_ERROR", "from"},
		}
		for _, c := range cases {
			r := s.do(t, "POST", "/v1/messages", tn.Live, c.body)
			if r.Status != 400 || r.Code() != c.code || (c.field != "" && r.Field() != c.field) {
				t.Errorf("%s: want 400 %s field %q, got %d %s", c.name, c.code, c.field, r.Status, r.Raw)
			}
		}

		// A form (curl -d without a JSON Content-Type): the answer says JSON
		// is expected, naming the header, not the message's body field.
		form := "to=%2B15005550000&body=hello"
		for _, ct := range []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
			r := s.do(t, "POST", "/v1/messages", tn.Live, form, "Content-Type", ct)
			msgWantErr(t, r, 400, "VALIDATION_ERROR", "Content-Type")
			if msg := r.Body["error"].(string); !strings.Contains(msg, "must be JSON") || !strings.Contains(msg, "application/json") {
				t.Errorf("%s body: %q, want it to say the body must be JSON", ct, msg)
			}
		}
		// Other routes say the same; JSON sent with a form's Content-Type is read.
		msgWantErr(t, s.do(t, "POST", "/v1/contacts", tn.Live, "phone=%2B15005550000", "Content-Type", "application/x-www-form-urlencoded"), 400, "VALIDATION_ERROR", "Content-Type")
		if r := s.do(t, "POST", "/v1/messages", tn.Test, `{"to": "`+to+`", "body": "json with a form's type"}`, "Content-Type", "application/x-www-form-urlencoded"); r.Status != http.StatusAccepted {
			t.Errorf("JSON with Content-Type application/x-www-form-urlencoded: %d %s", r.Status, r.Raw)
		}

		// Over 1 MiB: 413.
		huge := `{"to": "` + to + `", "body": "` + strings.Repeat("x", 1<<20) + `"}`
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, huge), 413, "PAYLOAD_TOO_LARGE", "")

		// 1600 characters (not bytes) is the longest body.
		d := msgSend(t, s, tn.Live, map[string]any{"to": to, "body": strings.Repeat("é", 1600)})
		m := msgGet(t, s, tn.Live, d["message_id"].(string))
		if m["body"] != strings.Repeat("é", 1600) {
			t.Fatalf("1600-character body not stored as sent")
		}

		// from: one of the tenant's numbers is used.
		d = msgSend(t, s, tn.Live, map[string]any{"to": to, "body": "from mine", "from": tn.Phone.Number})
		if d["from"] != tn.Phone.Number {
			t.Fatalf("from: %v", d)
		}

		// Rejected sends store nothing.
		r := msgList(t, s, tn.Live, "limit=100")
		if n := len(r.List()); n != 2 {
			t.Fatalf("want the 2 accepted messages stored, got %d: %s", n, r.Raw)
		}
	})
}

func TestMessageQuietHours(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		to, until := msgQuiet(t)

		r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "body": "good morning"}, "Idempotency-Key", "quiet-1")
		if r.Status != http.StatusOK || r.Code() != "QUIET_HOURS" {
			t.Fatalf("want 200 QUIET_HOURS, got %d %s", r.Status, r.Raw)
		}
		d := r.Data()
		if d["status"] != "queued" {
			t.Fatalf("quiet send: %s", r.Raw)
		}
		sched, err := time.Parse(time.RFC3339Nano, fmt.Sprint(d["scheduled_at"]))
		if err != nil || !sched.Equal(until) {
			t.Fatalf("scheduled_at %v, want %v (QuietUntil)", d["scheduled_at"], until.UTC())
		}
		id := d["message_id"].(string)

		// The replay of a quiet-hours answer is the same 200, byte for byte.
		rr := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "body": "good morning"}, "Idempotency-Key", "quiet-1")
		if rr.Status != 200 || !bytes.Equal(rr.Raw, r.Raw) || rr.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %q %s", rr.Status, rr.Header.Get("Idempotent-Replayed"), rr.Raw)
		}

		// A message to an awake recipient sent afterwards is delivered; the
		// quiet one is still waiting.
		other := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "now"})
		msgWait(t, s, tn.Live, other["message_id"].(string), "delivered")
		m := msgGet(t, s, tn.Live, id)
		if m["status"] != "queued" || m["scheduled_at"] != d["scheduled_at"] || m["sent_at"] != nil {
			t.Fatalf("quiet message: %v", m)
		}
		queued := msgList(t, s, tn.Live, "status=queued")
		if got := msgIDs(queued.List()); len(got) != 1 || got[0] != id {
			t.Fatalf("queued list: %v", got)
		}

		// Magic numbers are never in quiet hours.
		msgSend(t, s, tn.Live, map[string]any{"to": "+15005550000", "body": "magic"})
	})
}

func TestMessageIdempotency(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		a := msgTenant(t, db)
		b := msgTenant(t, db)
		to := msgAwake(t)
		body := map[string]any{"to": to, "body": "order shipped"}

		r1 := s.do(t, "POST", "/v1/messages", a.Live, body, "Idempotency-Key", "order-1")
		if r1.Status != 202 || r1.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first: %d %v %s", r1.Status, r1.Header, r1.Raw)
		}
		id := r1.Data()["message_id"].(string)
		r2 := s.do(t, "POST", "/v1/messages", a.Live, body, "Idempotency-Key", "order-1")
		if r2.Status != 202 || !bytes.Equal(r1.Raw, r2.Raw) || r2.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %q\nfirst  %s\nsecond %s", r2.Status, r2.Header.Get("Idempotent-Replayed"), r1.Raw, r2.Raw)
		}
		if got := msgIDs(msgList(t, s, a.Live, "to="+url.QueryEscape(to)).List()); len(got) != 1 || got[0] != id {
			t.Fatalf("messages to %s: %v, want only %s", to, got, id)
		}

		// Same key, different body.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", a.Live, map[string]any{"to": to, "body": "other"}, "Idempotency-Key", "order-1"),
			409, "IDEMPOTENCY_CONFLICT", "")

		// Key length: 255 is fine, 256 is not.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", a.Live, body, "Idempotency-Key", strings.Repeat("k", 256)), 400, "VALIDATION_ERROR", "Idempotency-Key")
		msgSend(t, s, a.Live, body, "Idempotency-Key", strings.Repeat("k", 255))

		// Only accepted sends are stored: a rejected request does not use up the key.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", a.Live, map[string]any{"to": to}, "Idempotency-Key", "order-2"), 400, "VALIDATION_ERROR", "body")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", a.Live, map[string]any{"to": simulator.NoDetectionNumber, "body": "x"}, "Idempotency-Key", "order-2"),
			503, "DETECTION_UNAVAILABLE", "")
		if r := s.do(t, "POST", "/v1/messages", a.Live, body, "Idempotency-Key", "order-2"); r.Status != 202 || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("key after rejected requests: %d %s", r.Status, r.Raw)
		}

		// Keys are per tenant and per environment.
		rb := s.do(t, "POST", "/v1/messages", b.Live, body, "Idempotency-Key", "order-1")
		if rb.Status != 202 || rb.Header.Get("Idempotent-Replayed") != "" || rb.Data()["message_id"] == id {
			t.Fatalf("other tenant, same key: %d %s", rb.Status, rb.Raw)
		}
		rt := s.do(t, "POST", "/v1/messages", a.Test, body, "Idempotency-Key", "order-1")
		if rt.Status != 202 || rt.Header.Get("Idempotent-Replayed") != "" || rt.Data()["message_id"] == id || rt.Data()["livemode"] != false {
			t.Fatalf("test key, same key: %d %s", rt.Status, rt.Raw)
		}
		if n := len(msgList(t, s, a.Live, "to="+url.QueryEscape(to)).List()); n != 3 {
			t.Fatalf("tenant A live: %d messages to %s, want 3", n, to)
		}
	})
}

func TestMessageIdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		to := msgAwake(t)
		const n = 10
		bodies := make([]map[string]any, n)
		for i := range bodies {
			bodies[i] = map[string]any{"to": to, "body": "exactly once"}
		}
		results := msgSendAll(t, s, tn.Live, bodies, "Idempotency-Key", "concurrent-key")

		defer func() {
			if t.Failed() {
				t.Logf("server log:\n%s", s.logs.String())
			}
		}()
		var first []byte
		replays := 0
		for i, r := range results {
			if r.Status != 202 {
				t.Fatalf("request %d: %d %s", i, r.Status, r.Raw)
			}
			if first == nil {
				first = r.Raw
			} else if !bytes.Equal(first, r.Raw) {
				t.Fatalf("answers differ:\n%s\n%s", first, r.Raw)
			}
			if r.Header.Get("Idempotent-Replayed") == "true" {
				replays++
			}
		}
		if replays != n-1 {
			t.Errorf("%d answers marked Idempotent-Replayed, want %d", replays, n-1)
		}
		if got := msgList(t, s, tn.Live, "to="+url.QueryEscape(to)).List(); len(got) != 1 {
			t.Fatalf("%d messages stored, want 1", len(got))
		}
	})
}

func TestMessageList(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		a := msgTenant(t, db)
		b := msgTenant(t, db)

		r1, r2 := msgAwake(t), msgAwake(t)
		var sent []string // oldest first
		for _, to := range []string{r1, r2, r1} {
			sent = append(sent, msgSend(t, s, a.Live, map[string]any{"to": to, "body": "list me"})["message_id"].(string))
		}
		failed := msgSend(t, s, a.Live, map[string]any{"to": simulator.FailNumber, "body": "fails"})["message_id"].(string)
		sent = append(sent, failed)
		in := s.do(t, "POST", "/v1/test/inbound", a.Live, map[string]any{"from": r2, "body": "hello back"})
		if in.Status != 200 {
			t.Fatalf("inbound: %d %s", in.Status, in.Raw)
		}
		inbound := in.Data()["id"].(string)
		sent = append(sent, inbound)
		for _, id := range sent[:3] {
			msgWait(t, s, a.Live, id, "delivered")
		}
		msgWait(t, s, a.Live, failed, "failed")

		// Newest first.
		all := msgIDs(msgList(t, s, a.Live, "").List())
		if len(all) != 5 {
			t.Fatalf("list: %v", all)
		}
		for i := range all {
			if all[i] != sent[len(sent)-1-i] {
				t.Fatalf("list order %v, want newest first of %v", all, sent)
			}
		}

		// Filters.
		check := func(query string, want ...string) {
			t.Helper()
			got := msgIDs(msgList(t, s, a.Live, query).List())
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("?%s: got %v, want %v", query, got, want)
			}
		}
		check("to="+url.QueryEscape(r1), sent[2], sent[0])
		check("direction=inbound", inbound)
		check("direction=outbound", failed, sent[2], sent[1], sent[0])
		check("status=failed", failed)
		check("status=received", inbound)
		check("status=delivered&to="+url.QueryEscape(r1), sent[2], sent[0])
		check("status=queued")
		check("direction=inbound&to=" + url.QueryEscape(r2)) // the inbound message is to the tenant's phone

		for q, field := range map[string]string{
			"status=bogus": "status", "direction=sideways": "direction",
			"limit=0": "limit", "limit=101": "limit", "limit=x": "limit", "limit=-1": "limit",
		} {
			msgWantErr(t, s.do(t, "GET", "/v1/messages?"+q, a.Live, nil), 400, "VALIDATION_ERROR", field)
		}
		msgWantErr(t, s.do(t, "GET", "/v1/messages?to=12345", a.Live, nil), 400, "INVALID_PHONE_NUMBER", "")
		if n := len(msgList(t, s, a.Live, "limit=100").List()); n != 5 {
			t.Fatalf("limit=100: %d", n)
		}
		if r := msgList(t, s, a.Live, "limit=5"); len(r.List()) != 5 || r.Header.Get("Link") != "" {
			t.Fatalf("exactly one full page: %d items, Link %q", len(r.List()), r.Header.Get("Link"))
		}

		// Cursor pagination through Link.
		first := msgList(t, s, a.Live, "limit=2")
		if l := first.Header.Get("Link"); !strings.Contains(l, "after="+all[1]) || !strings.Contains(l, "limit=2") || !msgLinkRE.MatchString(l) {
			t.Fatalf("first page Link %q", l)
		}
		got, pages := msgPages(t, s, a.Live, "/v1/messages?limit=2")
		if strings.Join(got, ",") != strings.Join(all, ",") || pages != 3 {
			t.Fatalf("pages: %v in %d pages, want %v in 3", got, pages, all)
		}
		// Filters are kept in the Link.
		got, pages = msgPages(t, s, a.Live, "/v1/messages?to="+url.QueryEscape(r1)+"&limit=1")
		if strings.Join(got, ",") != sent[2]+","+sent[0] || pages != 2 {
			t.Fatalf("filtered pages: %v in %d pages", got, pages)
		}

		// Tenant isolation.
		for _, id := range all {
			msgWantErr(t, s.do(t, "GET", "/v1/messages/"+id, b.Live, nil), 404, "NOT_FOUND", "")
		}
		bm := msgSend(t, s, b.Live, map[string]any{"to": r1, "body": "tenant b"})["message_id"].(string)
		if got := msgIDs(msgList(t, s, b.Live, "").List()); len(got) != 1 || got[0] != bm {
			t.Fatalf("tenant B sees %v", got)
		}
		if got := msgIDs(msgList(t, s, a.Live, "").List()); strings.Contains(strings.Join(got, ","), bm) {
			t.Fatalf("tenant A sees tenant B's message")
		}

		// Test and live data are separate; test messages are delivered by the simulator.
		tm := msgSend(t, s, a.Test, map[string]any{"to": r1, "body": "test mode"})
		if tm["livemode"] != false {
			t.Fatalf("test send: %v", tm)
		}
		tid := tm["message_id"].(string)
		m := msgWait(t, s, a.Test, tid, "delivered")
		if m["livemode"] != false || m["delivered_at"] == nil {
			t.Fatalf("test message: %v", m)
		}
		msgWantErr(t, s.do(t, "GET", "/v1/messages/"+tid, a.Live, nil), 404, "NOT_FOUND", "")
		msgWantErr(t, s.do(t, "GET", "/v1/messages/"+sent[0], a.Test, nil), 404, "NOT_FOUND", "")
		if got := msgIDs(msgList(t, s, a.Test, "").List()); len(got) != 1 || got[0] != tid {
			t.Fatalf("test list: %v", got)
		}
		if got := msgIDs(msgList(t, s, a.Live, "").List()); len(got) != 5 {
			t.Fatalf("live list after a test send: %v", got)
		}
	})
}

func TestMessageTestKeysUseNoQuota(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--plans", msgPlans(t, `{"trial": {"monthly_calls": 2}}`))
		tn := newTenant(t, db)
		for range 5 {
			msgSend(t, s, tn.Test, map[string]any{"to": msgAwake(t), "body": "free"})
		}
		for range 2 {
			msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "paid"})
		}
		r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "over quota"})
		msgWantErr(t, r, 429, "QUOTA_EXCEEDED", "")
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("QUOTA_EXCEEDED without Retry-After")
		}
		msgWantErr(t, s.do(t, "GET", "/v1/messages", tn.Live, nil), 429, "QUOTA_EXCEEDED", "")
		msgSend(t, s, tn.Test, map[string]any{"to": msgAwake(t), "body": "still free"})
		if n := len(msgList(t, s, tn.Test, "").List()); n != 6 {
			t.Fatalf("test messages: %d, want 6", n)
		}
	})
}

func TestMessageNewContactLimit(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		msgAvoidMidnight(t)
		plans := msgPlans(t, `{"trial": {"new_contacts_per_day": 2}}`)
		s := startServer(t, db, "--plans", plans)
		tn := newTenant(t, db, "--plans", plans)

		r1, r2 := msgAwake(t), msgAwake(t)
		msgSend(t, s, tn.Live, map[string]any{"to": r1, "body": "1"})
		msgSend(t, s, tn.Live, map[string]any{"to": r2, "body": "2"})
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "3"}), 429, "NEW_CONTACT_LIMIT", "")
		// Known recipients are not limited.
		msgSend(t, s, tn.Live, map[string]any{"to": r1, "body": "again"})
		// A recipient known through an inbound message only is known.
		r4 := msgAwake(t)
		if r := s.do(t, "POST", "/v1/test/inbound", tn.Live, map[string]any{"from": r4, "body": "hi there"}); r.Status != 200 {
			t.Fatalf("inbound: %d %s", r.Status, r.Raw)
		}
		msgSend(t, s, tn.Live, map[string]any{"to": r4, "body": "reply"})
		// The limit comes before channel detection.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": simulator.NoDetectionNumber, "body": "x"}), 429, "NEW_CONTACT_LIMIT", "")
		// ... and after the template and opt-out checks.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "template": "nope"}), 400, "INVALID_TEMPLATE", "")
		// The test environment has its own count.
		msgSend(t, s, tn.Test, map[string]any{"to": msgAwake(t), "body": "test"})
	})
}

func TestMessageCheckOrder(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		// Opt-out comes before channel detection.
		if r := s.do(t, "POST", "/v1/test/inbound", tn.Live, map[string]any{"from": simulator.NoDetectionNumber, "body": "STOP"}); r.Status != 200 {
			t.Fatalf("inbound: %d %s", r.Status, r.Raw)
		}
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": simulator.NoDetectionNumber, "body": "x", "channel": "auto"}),
			400, "RECIPIENT_OPTED_OUT", "")
		// Template errors come before opt-out.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": simulator.NoDetectionNumber, "template": "missing"}),
			400, "INVALID_TEMPLATE", "")
		// Field errors come before everything else.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": simulator.NoDetectionNumber, "template": "missing", "channel": "fax"}),
			400, "VALIDATION_ERROR", "channel")
		// Opt-out comes before the chat engine and phone checks.
		cli(t, db, "phone", "offline", tn.Phone.ID)
		if r := s.do(t, "POST", "/v1/test/simulator", tn.Live, map[string]any{"chat_engine": "down"}); r.Status != 200 {
			t.Fatalf("simulator: %d %s", r.Status, r.Raw)
		}
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": simulator.NoDetectionNumber, "body": "x", "channel": "chat"}),
			400, "RECIPIENT_OPTED_OUT", "")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": simulator.NoDetectionNumber, "body": "x", "channel": "sms"}),
			400, "RECIPIENT_OPTED_OUT", "")
		// Detection comes before phone availability.
		if r := s.do(t, "POST", "/v1/test/inbound", tn.Live, map[string]any{"from": simulator.NoDetectionNumber, "body": "START"}); r.Status != 200 {
			t.Fatalf("inbound: %d %s", r.Status, r.Raw)
		}
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": simulator.NoDetectionNumber, "body": "x"}), 503, "DETECTION_UNAVAILABLE", "")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": simulator.NoDetectionNumber, "body": "x", "channel": "sms"}), 503, "NO_PHONE_AVAILABLE", "")
	})
}

func TestMessageChatEngine(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		a := msgTenant(t, db)
		b := msgTenant(t, db)
		setChat := func(key, state string) {
			t.Helper()
			r := s.do(t, "POST", "/v1/test/simulator", key, map[string]any{"chat_engine": state})
			if r.Status != 200 || r.Data()["chat_engine"] != state {
				t.Fatalf("chat_engine %s: %d %s", state, r.Status, r.Raw)
			}
		}
		for _, body := range []any{map[string]any{"chat_engine": "sideways"}, map[string]any{}, map[string]any{"chat": "down"}} {
			msgWantErr(t, s.do(t, "POST", "/v1/test/simulator", a.Test, body), 400, "VALIDATION_ERROR", "")
		}

		// A test key's switch takes the test environment's chat engine down,
		// and only that: live traffic never sees it.
		setChat(a.Test, "down")
		to := msgAwake(t)
		msgWantErr(t, s.do(t, "POST", "/v1/messages", a.Test, map[string]any{"to": to, "body": "x", "channel": "chat"}), 503, "CHANNEL_UNAVAILABLE", "")
		if d := msgSend(t, s, a.Test, map[string]any{"to": to, "body": "x", "channel": "auto"}); d["channel"] != "sms" {
			t.Fatalf("test auto while the test chat engine is down: %v", d)
		}
		if d := msgSend(t, s, a.Live, map[string]any{"to": to, "body": "x", "channel": "chat"}); d["channel"] != "chat" {
			t.Fatalf("live chat while the test chat engine is down: %v", d)
		}

		setChat(a.Live, "down")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", a.Live, map[string]any{"to": to, "body": "x", "channel": "chat"}), 503, "CHANNEL_UNAVAILABLE", "")
		d := msgSend(t, s, a.Live, map[string]any{"to": to, "body": "x", "channel": "auto"})
		if d["channel"] != "sms" {
			t.Fatalf("auto while chat is down: %v", d)
		}
		msgWait(t, s, a.Live, d["message_id"].(string), "delivered")
		msgSend(t, s, a.Live, map[string]any{"to": to, "body": "x", "channel": "sms"})

		// Another tenant's chat engine is unaffected.
		if d := msgSend(t, s, b.Live, map[string]any{"to": to, "body": "x", "channel": "chat"}); d["channel"] != "chat" {
			t.Fatalf("tenant B: %v", d)
		}

		setChat(a.Live, "up")
		if d := msgSend(t, s, a.Live, map[string]any{"to": to, "body": "x", "channel": "chat"}); d["channel"] != "chat" {
			t.Fatalf("chat up: %v", d)
		}
		if d := msgSend(t, s, a.Live, map[string]any{"to": to, "body": "x"}); d["channel"] != "chat" {
			t.Fatalf("auto with chat up: %v", d)
		}
		// Still down in the test environment until its own switch.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", a.Test, map[string]any{"to": to, "body": "x", "channel": "chat"}), 503, "CHANNEL_UNAVAILABLE", "")
		setChat(a.Test, "up")
		if d := msgSend(t, s, a.Test, map[string]any{"to": to, "body": "x", "channel": "chat"}); d["channel"] != "chat" {
			t.Fatalf("test chat up: %v", d)
		}
	})
}

type msgPhone struct {
	ID     string `json:"id"`
	Number string `json:"number"`
}

func msgAddPhone(t testing.TB, db, tenantID string, args ...string) msgPhone {
	t.Helper()
	var p msgPhone
	number := msgFreshNumber("+1555XXXXXXX")
	out := cli(t, db, append([]string{"phone", "add", "--tenant", tenantID, "--number", number}, args...)...)
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.ID == "" || p.Number != number {
		t.Fatalf("phone add printed %q: %v", out, err)
	}
	return p
}

func TestMessagePhoneAvailability(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		msgAvoidMidnight(t)
		s := startServer(t, db)
		tn := msgTenant(t, db)
		limited := msgAddPhone(t, db, tn.ID, "--daily-limit", "2")
		cli(t, db, "phone", "offline", tn.Phone.ID)

		for range 2 {
			if d := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x"}); d["from"] != limited.Number {
				t.Fatalf("sent from %v, want the only online phone %s", d["from"], limited.Number)
			}
		}
		// The limited phone's limit starts again at the next UTC day: the
		// answer says to wait until then (the other phone was switched off
		// by the operator, which waiting does not undo).
		for _, from := range []string{"", limited.Number} { // naming the limited phone does not help
			body := map[string]any{"to": msgAwake(t), "body": "x"}
			if from != "" {
				body["from"] = from
			}
			before := time.Now()
			r := s.do(t, "POST", "/v1/messages", tn.Live, body)
			after := time.Now()
			msgWantErr(t, r, 503, "NO_PHONE_AVAILABLE", "")
			wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
			if err != nil || wait < secondsToMidnight(after) || wait > secondsToMidnight(before) {
				t.Errorf("from %q: Retry-After %q, want the seconds to the next UTC day (%d to %d)", from, r.Header.Get("Retry-After"),
					secondsToMidnight(after), secondsToMidnight(before))
			}
		}

		// Naming the phone the operator switched off: no Retry-After, though
		// another phone's limit starts again at midnight.
		r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "x", "from": tn.Phone.Number})
		msgWantErr(t, r, 503, "NO_PHONE_AVAILABLE", "")
		if v, ok := r.Header["Retry-After"]; ok {
			t.Errorf("from the phone switched off: Retry-After %v, want none", v)
		}

		// Every phone switched off: no Retry-After, since waiting does not help.
		cli(t, db, "phone", "offline", limited.ID)
		r = s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "x"})
		msgWantErr(t, r, 503, "NO_PHONE_AVAILABLE", "")
		if v, ok := r.Header["Retry-After"]; ok {
			t.Errorf("every phone switched off: Retry-After %v, want none", v)
		}
		// Back online.
		cli(t, db, "phone", "online", tn.Phone.ID)
		if d := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x"}); d["from"] != tn.Phone.Number {
			t.Fatalf("sent from %v, want %s", d["from"], tn.Phone.Number)
		}
		// An offline phone named by from is not used.
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "x", "from": limited.Number}), 503, "NO_PHONE_AVAILABLE", "")
	})
}

// secondsToMidnight is the whole seconds, rounded up, from t to the next
// UTC day.
func secondsToMidnight(t time.Time) int {
	t = t.UTC()
	next := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
	return int((next.Sub(t) + time.Second - 1) / time.Second)
}

func TestMessageStickyPhone(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		second := msgAddPhone(t, db, tn.ID, "--daily-limit", "0")
		phones := map[string]string{tn.Phone.Number: tn.Phone.ID, second.Number: second.ID}

		r := msgAwake(t)
		first := msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "1"})["from"].(string)
		if phones[first] == "" {
			t.Fatalf("sent from %s, not a tenant phone", first)
		}
		if from := msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "2"})["from"]; from != first {
			t.Fatalf("second message from %v, want the sticky %s", from, first)
		}
		// Other recipients spread over the phones; r keeps its phone even
		// when it is the busier one.
		other := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "3"})["from"].(string)
		if phones[other] == "" {
			t.Fatalf("sent from %s, not a tenant phone", other)
		}
		if other == first {
			t.Logf("a new recipient also got %s", first)
		}
		if from := msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "4"})["from"]; from != first {
			t.Fatalf("third message from %v, want the sticky %s", from, first)
		}
		// The sticky phone offline: r gets the other one; back online: the sticky one again.
		cli(t, db, "phone", "offline", phones[first])
		var alt string
		for n := range phones {
			if n != first {
				alt = n
			}
		}
		if from := msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "5"})["from"]; from != alt {
			t.Fatalf("with %s offline, sent from %v, want %s", first, from, alt)
		}
		cli(t, db, "phone", "online", phones[first])
		if from := msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "6"})["from"]; from != first {
			t.Fatalf("back online: sent from %v, want %s", from, first)
		}
		// A recipient who wrote to a phone first keeps that phone.
		w := msgAwake(t)
		if r := s.do(t, "POST", "/v1/test/inbound", tn.Live, map[string]any{"from": w, "to": second.Number, "body": "hello"}); r.Status != 200 {
			t.Fatalf("inbound: %d %s", r.Status, r.Raw)
		}
		for range 2 {
			if from := msgSend(t, s, tn.Live, map[string]any{"to": w, "body": "reply"})["from"]; from != second.Number {
				t.Fatalf("reply sent from %v, want %s (the number written to)", from, second.Number)
			}
		}
		// Its phone gone, a recipient sticks to the next phone used for it,
		// even when a less used phone comes.
		if r := s.do(t, "DELETE", "/v1/phones/"+second.ID, tn.Live, nil); r.Status != 200 {
			t.Fatalf("delete: %d %s", r.Status, r.Raw)
		}
		if from := msgSend(t, s, tn.Live, map[string]any{"to": w, "body": "after"})["from"]; from != tn.Phone.Number {
			t.Fatalf("after its phone was deleted: sent from %v, want %s", from, tn.Phone.Number)
		}
		third := msgAddPhone(t, db, tn.ID, "--daily-limit", "0")
		if from := msgSend(t, s, tn.Live, map[string]any{"to": w, "body": "again"})["from"]; from != tn.Phone.Number {
			t.Fatalf("with a new, unused phone %s: sent from %v, want the new sticky %s", third.Number, from, tn.Phone.Number)
		}
	})
}

func TestMessagePhoneChannels(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		smsOnly := msgAddPhone(t, db, tn.ID, "--channels", "sms")
		cli(t, db, "phone", "offline", tn.Phone.ID)

		to := msgAwake(t)
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "body": "x", "channel": "chat"}), 503, "NO_PHONE_AVAILABLE", "")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "body": "x", "channel": "chat", "from": smsOnly.Number}), 503, "NO_PHONE_AVAILABLE", "")
		d := msgSend(t, s, tn.Live, map[string]any{"to": to, "body": "x", "channel": "sms"})
		if d["from"] != smsOnly.Number || d["channel"] != "sms" {
			t.Fatalf("sms send: %v", d)
		}
		msgWait(t, s, tn.Live, d["message_id"].(string), "delivered")
		cli(t, db, "phone", "online", tn.Phone.ID)
		if d := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "x", "channel": "chat"}); d["from"] != tn.Phone.Number {
			t.Fatalf("chat send from %v, want the chat-capable %s", d["from"], tn.Phone.Number)
		}
	})
}

// msgSendAll sends every body at once, each from its own goroutine, and
// returns the answers in order, checked against the envelope rules and the
// OpenAPI document.
func msgSendAll(t *testing.T, s *server, key string, bodies []map[string]any, headers ...string) []*response {
	t.Helper()
	type result struct {
		req *http.Request
		res *response
		err error
	}
	results := make([]result, len(bodies))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, body := range bodies {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", s.URL+"/v1/messages", bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for j := 0; j+1 < len(headers); j += 2 {
			req.Header.Set(headers[j], headers[j+1])
		}
		wg.Go(func() {
			<-start
			res, err := httpClient.Do(req)
			if err != nil {
				results[i] = result{req: req, err: err}
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			results[i] = result{req: req, res: &response{Status: res.StatusCode, Header: res.Header, Raw: b}, err: err}
		})
	}
	close(start)
	wg.Wait()
	out := make([]*response, len(bodies))
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		checkEnvelope(t, r.req, r.res)
		out[i] = r.res
	}
	return out
}

// TestMessageLimitsUnderConcurrency sends at once what the limits allow and
// more: on PostgreSQL several writers accept sends in parallel, and no
// limit may be passed, and no send may fail, because two of them raced.
func TestMessageLimitsUnderConcurrency(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		msgAvoidMidnight(t)
		s := startServer(t, db, "--plans", msgPlans(t, `{"trial": {"new_contacts_per_day": 3, "rate_limit": 1000}}`))
		count := func(rs []*response, status int, code string) int {
			n := 0
			for _, r := range rs {
				if r.Status == status && r.Code() == code {
					n++
				}
			}
			return n
		}

		// The daily new-contact limit.
		tn := newTenant(t, db)
		var bodies []map[string]any
		for range 20 {
			bodies = append(bodies, map[string]any{"to": msgAwake(t), "body": "new"})
		}
		rs := msgSendAll(t, s, tn.Live, bodies)
		if ok, limited := count(rs, 202, ""), count(rs, 429, "NEW_CONTACT_LIMIT"); ok != 3 || limited != 17 {
			t.Fatalf("new-contact limit 3: %d accepted, %d NEW_CONTACT_LIMIT of 20", ok, limited)
		}

		// Many sends to one new recipient at once: all accepted, one new contact.
		tn = newTenant(t, db)
		r := msgAwake(t)
		bodies = bodies[:0]
		for range 10 {
			bodies = append(bodies, map[string]any{"to": r, "body": "same recipient"})
		}
		rs = msgSendAll(t, s, tn.Live, bodies)
		if ok := count(rs, 202, ""); ok != 10 {
			for _, x := range rs {
				t.Logf("%d %s", x.Status, x.Raw)
			}
			t.Fatalf("10 sends to one new recipient: %d accepted", ok)
		}
		msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "second new contact"})
		msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "third new contact"})
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "fourth"}), 429, "NEW_CONTACT_LIMIT", "")

		// A phone's daily limit.
		tn = msgTenant(t, db)
		limited := msgAddPhone(t, db, tn.ID, "--daily-limit", "4")
		cli(t, db, "phone", "offline", tn.Phone.ID)
		bodies = bodies[:0]
		for range 12 {
			bodies = append(bodies, map[string]any{"to": msgAwake(t), "body": "phone limit"})
		}
		rs = msgSendAll(t, s, tn.Live, bodies)
		if ok, none := count(rs, 202, ""), count(rs, 503, "NO_PHONE_AVAILABLE"); ok != 4 || none != 8 {
			t.Fatalf("phone limit 4: %d accepted, %d NO_PHONE_AVAILABLE of 12", ok, none)
		}
		for _, x := range rs {
			if x.Status == 202 && x.Data()["from"] != limited.Number {
				t.Fatalf("sent from %v", x.Data()["from"])
			}
		}
	})
}
