package main

// GET and PATCH /v1/webhooks/{id} (url, events, secret rotation with 24
// hours in which both secrets sign) and GET of one delivery.

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/webhook/sign"
)

// TestWebhookGetAndUpdate: a webhook can be read, and its url and events
// changed; changes are checked like a registration's; another tenant's or
// environment's webhook is not found.
func TestWebhookGetAndUpdate(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, hookAllowPrivate)
		tn, other := newTenant(t, db), newTenant(t, db)
		first, second := newHookReceiver(t, nil), newHookReceiver(t, nil)
		id := registerHook(t, s, tn.Test, first.URL, "message.delivered")

		r := s.do(t, "GET", "/v1/webhooks/"+id, tn.Test, nil)
		if r.Status != 200 || r.Data()["id"] != id || r.Data()["url"] != first.URL || r.Data()["environment"] != "test" ||
			r.Data()["previous_secret_expires_at"] != nil || strings.Contains(string(r.Raw), hookSecret) {
			t.Fatalf("get: %d %s", r.Status, r.Raw)
		}
		for _, key := range []string{tn.Live, other.Test} { // the other environment, another tenant
			msgWantErr(t, s.do(t, "GET", "/v1/webhooks/"+id, key, nil), 404, "NOT_FOUND", "")
			msgWantErr(t, s.do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"url": second.URL}), 404, "NOT_FOUND", "")
		}

		hookSend(t, s, tn.Test, hookDeliveredNumber)
		eventually(t, 10*time.Second, "the first delivery", func() bool { return first.count() == 1 })

		// Move it and listen to failures as well.
		r = s.do(t, "PATCH", "/v1/webhooks/"+id, tn.Test, map[string]any{"url": second.URL, "events": []string{"message.failed", "message.delivered", "message.failed"}})
		if r.Status != 200 || r.Data()["url"] != second.URL || strings.Join(toStrings(r.Data()["events"]), ",") != "message.failed,message.delivered" ||
			r.Data()["previous_secret_expires_at"] != nil {
			t.Fatalf("patch url and events: %d %s", r.Status, r.Raw)
		}
		if got := s.do(t, "GET", "/v1/webhooks/"+id, tn.Test, nil); got.Data()["url"] != second.URL {
			t.Fatalf("get after patch: %s", got.Raw)
		}
		hookSend(t, s, tn.Test, hookDeliveredNumber)
		hookSend(t, s, tn.Test, "+15005550001") // fails
		eventually(t, 10*time.Second, "both deliveries at the new url", func() bool { return second.count() == 2 })
		if first.count() != 1 {
			t.Errorf("the old url got %d deliveries after the move", first.count())
		}
		for _, h := range second.requests() {
			verifyHookSignatures(t, h, hookSecret) // the secret did not change
		}

		// Checked as a registration; none of them changes anything.
		for body, field := range map[string]string{
			`{"url": null}`:                  "url",
			`{"url": ""}`:                    "url",
			`{"url": "ftp://example.com/x"}`: "url",
			`{"events": []}`:                 "events",
			`{"events": null}`:               "events",
			`{"events": ["message.sent"]}`:   "events",
			`{"secret": "short"}`:            "secret",
			`{"secret": null}`:               "secret",
			`{"secret": 12345678901234567}`:  "secret",
			`{"enabled": false}`:             "enabled",
			`{"retry_policy": "weekly"}`:     "retry_policy",
			`{"retry_policy": null}`:         "retry_policy",
		} {
			msgWantErr(t, s.do(t, "PATCH", "/v1/webhooks/"+id, tn.Test, body), 400, "VALIDATION_ERROR", field)
		}
		if got := s.do(t, "GET", "/v1/webhooks/"+id, tn.Test, nil); got.Data()["url"] != second.URL || len(toStrings(got.Data()["events"])) != 2 {
			t.Fatalf("refused patches changed the webhook: %s", got.Raw)
		}
		// An empty patch changes nothing and answers the webhook.
		if r := s.do(t, "PATCH", "/v1/webhooks/"+id, tn.Test, `{}`); r.Status != 200 || r.Data()["url"] != second.URL {
			t.Errorf("empty patch: %d %s", r.Status, r.Raw)
		}

		// One delivery of the log, with its attempts.
		ds := hookDeliveries(t, s, tn.Test, id)
		if len(ds) != 3 {
			t.Fatalf("%d deliveries in the log, want 3", len(ds))
		}
		r = s.do(t, "GET", "/v1/webhooks/"+id+"/deliveries/"+ds[0].ID, tn.Test, nil)
		if r.Status != 200 || r.Data()["id"] != ds[0].ID || r.Data()["event"] != ds[0].Event || len(r.Data()["attempts"].([]any)) != len(ds[0].Attempts) {
			t.Errorf("get delivery: %d %s, want %+v", r.Status, r.Raw, ds[0])
		}
		msgWantErr(t, s.do(t, "GET", "/v1/webhooks/"+id+"/deliveries/01ARZ3NDEKTSV4RRFFQ69G5FAV", tn.Test, nil), 404, "NOT_FOUND", "")
		otherHook := registerHook(t, s, tn.Test, first.URL, "message.received")
		msgWantErr(t, s.do(t, "GET", "/v1/webhooks/"+otherHook+"/deliveries/"+ds[0].ID, tn.Test, nil), 404, "NOT_FOUND", "")
		msgWantErr(t, s.do(t, "GET", "/v1/webhooks/"+id+"/deliveries/"+ds[0].ID, other.Test, nil), 404, "NOT_FOUND", "")
	})
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// rotatedSignatures returns the secrets whose signatures a delivery carries,
// among candidates, in the order of its X-Service-Signature values, and
// checks that webhook-signature carries the same ones in the same order.
func rotatedSignatures(t testing.TB, h hookRequest, candidates ...string) []string {
	t.Helper()
	vals := strings.Split(h.Header.Get(sign.HeaderSignature), ", ")
	std := strings.Split(h.Header.Get(sign.HeaderStandardSignature), " ")
	if len(vals) != len(std) {
		t.Fatalf("%d X-Service-Signature values, %d webhook-signature entries: %v", len(vals), len(std), h.Header)
	}
	var out []string
	for i, v := range vals {
		found := ""
		for _, c := range candidates {
			if v == sign.Signature([]byte(c), h.Body) {
				found = c
			}
		}
		if found == "" {
			t.Fatalf("X-Service-Signature value %q is none of the secrets' signatures", v)
		}
		ts := h.Header.Get(sign.HeaderStandardTimestamp)
		if err := sign.VerifyStandard([]byte(found), h.Header.Get(sign.HeaderStandardID), ts, h.Body, std[i], time.Now(), 0); err != nil {
			t.Fatalf("webhook-signature entry %d does not verify with the same secret as X-Service-Signature value %d: %v", i, i, err)
		}
		out = append(out, found)
	}
	return out
}

// TestWebhookSecretRotation: a new secret signs from now on, and the one it
// replaced signs beside it until previous_secret_expires_at (24 hours), so
// a receiver with either verifies every delivery; after that, only the new
// one signs.
func TestWebhookSecretRotation(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, hookAllowPrivate)
		tn := newTenant(t, db)
		rc := newHookReceiver(t, nil)
		id := registerHook(t, s, tn.Test, rc.URL, "message.delivered")
		deliver := func(n int) hookRequest {
			t.Helper()
			hookSend(t, s, tn.Test, hookDeliveredNumber)
			eventually(t, 10*time.Second, "a delivery", func() bool { return rc.count() == n })
			return rc.requests()[n-1]
		}
		const b, c = "the-second-secret-0123456789", "the-third-secret-0123456789"
		if got := rotatedSignatures(t, deliver(1), hookSecret, b, c); len(got) != 1 || got[0] != hookSecret {
			t.Fatalf("before any rotation signed by %v", got)
		}

		before := time.Now()
		r := s.do(t, "PATCH", "/v1/webhooks/"+id, tn.Test, map[string]any{"secret": b})
		after := time.Now()
		if r.Status != 200 || strings.Contains(string(r.Raw), b) || strings.Contains(string(r.Raw), hookSecret) {
			t.Fatalf("rotate: %d %s", r.Status, r.Raw)
		}
		exp, _ := r.Data()["previous_secret_expires_at"].(string)
		expires, err := time.Parse(time.RFC3339Nano, exp)
		if err != nil || expires.Before(before.Add(24*time.Hour).Truncate(time.Microsecond)) || expires.After(after.Add(24*time.Hour)) {
			t.Fatalf("previous_secret_expires_at %v (%v), want 24 hours from the rotation", r.Data()["previous_secret_expires_at"], err)
		}
		h := deliver(2)
		if got := rotatedSignatures(t, h, hookSecret, b, c); len(got) != 2 || got[0] != b || got[1] != hookSecret {
			t.Fatalf("during the overlap signed by %v, want the new secret then the old", got)
		}
		// Receivers with either secret accept it, through the package a
		// receiver in Go would use.
		for _, secret := range []string{hookSecret, b} {
			if !sign.Verify([]byte(secret), h.Body, h.Header.Get(sign.HeaderSignature)) {
				t.Errorf("a receiver with %q rejects the delivery", secret)
			}
		}

		// The current secret again: nothing changes.
		r = s.do(t, "PATCH", "/v1/webhooks/"+id, tn.Test, map[string]any{"secret": b})
		if r.Status != 200 || r.Data()["previous_secret_expires_at"] != expires.Format(time.RFC3339Nano) {
			t.Fatalf("the same secret again: %d %s, want the expiry unchanged (%v)", r.Status, r.Raw, expires)
		}
		// Another rotation within the 24 hours: the secret replaced last
		// signs beside the new one; the first stops at once.
		if r := s.do(t, "PATCH", "/v1/webhooks/"+id, tn.Test, map[string]any{"secret": c}); r.Status != 200 {
			t.Fatalf("second rotation: %d %s", r.Status, r.Raw)
		}
		if got := rotatedSignatures(t, deliver(3), hookSecret, b, c); len(got) != 2 || got[0] != c || got[1] != b {
			t.Fatalf("after a second rotation signed by %v, want the third secret then the second", got)
		}

		// Once the overlap is over (made so in the database: 24 hours are
		// not waited for), only the current secret signs, and the record
		// no longer shows an expiry.
		dbtest.Exec(t, db, `UPDATE webhooks SET previous_secret_expires_at = ? WHERE id = ?`, time.Now().Add(-time.Second).UnixMicro(), id)
		if got := rotatedSignatures(t, deliver(4), hookSecret, b, c); len(got) != 1 || got[0] != c {
			t.Fatalf("after the overlap signed by %v, want the third secret alone", got)
		}
		if r := s.do(t, "GET", "/v1/webhooks/"+id, tn.Test, nil); r.Data()["previous_secret_expires_at"] != nil {
			t.Errorf("after the overlap: %s", r.Raw)
		}
		for _, h := range rc.requests() {
			if h.Header.Get("X-Service-Delivery") == "" || strings.Count(h.Header.Get(sign.HeaderSignature), "sha256=") > 2 {
				t.Errorf("delivery headers: %v", h.Header)
			}
		}
	})
}
