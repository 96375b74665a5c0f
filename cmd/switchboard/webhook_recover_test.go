package main

// End-to-end tests of the extended retry policy (its first retry stored a
// minute out, kept across a restart) and of recovering failed deliveries
// in bulk.

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// A webhook with the extended policy: the first failure schedules the
// retry exactly a minute after the attempt ended, and a restart keeps it
// there (neither lost nor made due early).
func TestWebhookExtendedRetryPolicy(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		rc := newHookReceiver(t, hookAnswer(http.StatusServiceUnavailable))
		tn := newTenant(t, db, "--plan", "scale")
		s := startServer(t, db, hookAllowPrivate)
		r := s.do(t, "POST", "/v1/webhooks", tn.Live, map[string]any{"url": rc.URL, "events": hookEvents, "secret": hookSecret, "retry_policy": "extended"})
		if r.Status != http.StatusCreated || r.Data()["retry_policy"] != "extended" {
			t.Fatalf("register: %d %s", r.Status, r.Raw)
		}
		hook := r.Data()["id"].(string)
		hookInbound(t, s, tn.Live, "+15005550123", "retry me for a day")
		d := waitHookDelivery(t, s, tn.Live, hook, 20*time.Second, "the first attempt", func(d hookDelivery) bool { return len(d.Attempts) == 1 })
		if d.Status != "pending" || d.NextAttemptAt == nil {
			t.Fatalf("after the first failure: %+v", d)
		}
		a := d.Attempts[0]
		// duration_ms is whole milliseconds, rounded down.
		wait := d.NextAttemptAt.Sub(a.At.Add(time.Duration(a.DurationMS) * time.Millisecond))
		if wait < time.Minute || wait >= time.Minute+time.Millisecond {
			t.Errorf("the first retry is due %v after the failed attempt ended, want 1m0s", wait)
		}
		s.stop()

		s = startServer(t, db, hookAllowPrivate)
		got := hookDeliveries(t, s, tn.Live, hook)
		if len(got) != 1 || got[0].Status != "pending" || got[0].NextAttemptAt == nil || !got[0].NextAttemptAt.Equal(*d.NextAttemptAt) {
			t.Fatalf("after a restart: %+v, want the retry still due at %v", got, d.NextAttemptAt)
		}
		if r := s.do(t, "GET", "/v1/webhooks/"+hook, tn.Live, nil); r.Data()["retry_policy"] != "extended" {
			t.Errorf("after a restart: %s", r.Raw)
		}
		if n := rc.count(); n != 1 {
			t.Errorf("the receiver got %d requests, want only the first attempt", n)
		}
	})
}

// Recovering a webhook sends again each failed delivery of events since a
// time, once: the same delivery, a fresh cycle; older ones, pending and
// succeeded ones are left alone, and another tenant or environment cannot
// recover the webhook.
func TestWebhookRecover(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		var up atomic.Bool
		rc := newHookReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			if !up.Load() {
				w.WriteHeader(http.StatusInternalServerError)
			}
		})
		tn, other := newTenant(t, db, "--plan", "scale"), newTenant(t, db, "--plan", "scale")
		s := startServer(t, db, hookAllowPrivate)
		hook := registerHook(t, s, tn.Live, rc.URL, "message.received")
		var msgs []string
		for _, body := range []string{"first", "second", "third"} {
			msgs = append(msgs, hookInbound(t, s, tn.Live, "+15005550123", body))
		}
		byMessage := map[string]hookDelivery{}
		eventually(t, 60*time.Second, "the three deliveries to fail", func() bool {
			ds := hookDeliveries(t, s, tn.Live, hook)
			for _, d := range ds {
				byMessage[d.MessageID] = d
			}
			for _, d := range ds {
				if d.Status != "failed" {
					return false
				}
			}
			return len(ds) == 3
		})
		since := byMessage[msgs[1]].CreatedAt
		path := "/v1/webhooks/" + hook + "/recover"

		for body, field := range map[string]string{
			`{}`:                     "since",
			`{"since": "yesterday"}`: "since",
			`{"since": null}`:        "since",
			`{"since": "2026-01-31T12:00:00Z", "until": "2026-01-31T11:00:00Z"}`: "since",
			`{"since": "2026-01-31T12:00:00Z", "until": "noon"}`:                 "until",
			`{"since": "2026-01-31T12:00:00Z", "status": "failed"}`:              "status",
		} {
			msgWantErr(t, s.do(t, "POST", path, tn.Live, body), 400, "VALIDATION_ERROR", field)
		}
		for _, key := range []string{tn.Test, other.Live} {
			msgWantErr(t, s.do(t, "POST", path, key, map[string]any{"since": since}), 404, "NOT_FOUND", "")
		}

		up.Store(true)
		r := s.do(t, "POST", path, tn.Live, map[string]any{"since": since})
		if r.Status != http.StatusAccepted || r.Data()["recovered"] != float64(2) || r.Data()["webhook_id"] != hook {
			t.Fatalf("recover since the second event: %d %s, want 202 with 2 recovered", r.Status, r.Raw)
		}
		eventually(t, 20*time.Second, "the two recovered deliveries to succeed", func() bool {
			n := 0
			for _, d := range hookDeliveries(t, s, tn.Live, hook) {
				byMessage[d.MessageID] = d
				if d.Status == "succeeded" {
					n++
				}
			}
			return n == 2
		})
		for i, m := range msgs {
			d := byMessage[m]
			want, attempts := "succeeded", 5
			if i == 0 {
				want, attempts = "failed", 4
			}
			if d.Status != want || len(d.Attempts) != attempts {
				t.Errorf("delivery of event %d: %s with %d attempts, want %s with %d", i+1, d.Status, len(d.Attempts), want, attempts)
			}
		}
		// Again, from before the first: only the first is still failed.
		r = s.do(t, "POST", path, tn.Live, map[string]any{"since": byMessage[msgs[0]].CreatedAt.Add(-time.Second)})
		if r.Status != http.StatusAccepted || r.Data()["recovered"] != float64(1) {
			t.Fatalf("recover since the first event: %d %s, want 1 recovered", r.Status, r.Raw)
		}
		eventually(t, 20*time.Second, "the first delivery to succeed", func() bool {
			for _, d := range hookDeliveries(t, s, tn.Live, hook) {
				if d.MessageID == msgs[0] {
					return d.Status == "succeeded"
				}
			}
			return false
		})
		if n := rc.count(); n != 12+3 {
			t.Errorf("the receiver got %d requests, want 12 failed attempts and 3 that succeeded", n)
		}
		r = s.do(t, "POST", path, tn.Live, map[string]any{"since": "2000-01-01T00:00:00Z"})
		if r.Status != http.StatusAccepted || r.Data()["recovered"] != float64(0) {
			t.Errorf("recover with nothing failed: %d %s", r.Status, r.Raw)
		}
	})
}
