package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/phonenum"
)

// cmpZonePatterns are numbers (X: a random digit) in time zones spread
// around the world: whatever the hour, some are in quiet hours (21:00 to
// 08:00, eleven hours) with hours to go, as the widest gap between two of
// these zones is under six hours.
var cmpZonePatterns = []string{
	"+1808956XXXX",   // Honolulu, UTC-10
	"+1213555XXXX",   // Los Angeles, UTC-8/-7
	"+1212555XXXX",   // New York, UTC-5/-4
	"+55119XXXXXXXX", // São Paulo, UTC-3
	"+44207123XXXX",  // London, UTC+0/+1
	"+919812XXXXXX",  // India, UTC+5:30
	"+813123XXXXX",   // Tokyo, UTC+9
	"+612912XXXXX",   // Sydney, UTC+10/+11
	"+64930XXXXX",    // Auckland, UTC+12/+13
}

// cmpQuietNumber returns a new number that is in quiet hours now and stays
// so for at least 15 minutes, and when its quiet hours end.
func cmpQuietNumber(t testing.TB) (string, time.Time) {
	t.Helper()
	now := time.Now()
	for _, p := range cmpZonePatterns {
		n := msgFreshNumber(p)
		if until, quiet := phonenum.QuietUntil(n, now); quiet && until.Sub(now) > 15*time.Minute {
			return n, until
		}
	}
	t.Fatalf("no test number is in quiet hours at %v", now.UTC())
	return "", time.Time{}
}

func cmpCreate(t testing.TB, s *server, key string, body map[string]any) map[string]any {
	t.Helper()
	r := s.do(t, "POST", "/v1/campaigns", key, body)
	if r.Status != http.StatusCreated || r.Data()["status"] != "draft" {
		t.Fatalf("create campaign: %d %s", r.Status, r.Raw)
	}
	return r.Data()
}

func cmpGet(t testing.TB, s *server, key, id string) map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/campaigns/"+id, key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("get campaign %s: %d %s", id, r.Status, r.Raw)
	}
	return r.Data()
}

func cmpLaunch(t testing.TB, s *server, key, id string) map[string]any {
	t.Helper()
	r := s.do(t, "POST", "/v1/campaigns/"+id+"/launch", key, nil)
	if r.Status != http.StatusAccepted || r.Data()["status"] != "running" || r.Data()["launched_at"] == nil {
		t.Fatalf("launch campaign %s: %d %s", id, r.Status, r.Raw)
	}
	return r.Data()
}

// cmpCounts returns a campaign's counts as integers.
func cmpCounts(c map[string]any) map[string]int {
	out := map[string]int{}
	for k, v := range c["counts"].(map[string]any) {
		out[k] = int(v.(float64))
	}
	return out
}

// cmpWant reports whether counts has every value of want.
func cmpWant(counts, want map[string]int) bool {
	for k, v := range want {
		if counts[k] != v {
			return false
		}
	}
	return true
}

// cmpAwait polls the campaign until cond holds and returns it.
func cmpAwait(t testing.TB, s *server, key, id, what string, cond func(c map[string]any) bool) map[string]any {
	t.Helper()
	var c map[string]any
	eventually(t, 60*time.Second, what, func() bool {
		c = cmpGet(t, s, key, id)
		return cond(c)
	})
	return c
}

// cmpMessages returns the outbound messages to number.
func cmpMessages(t testing.TB, s *server, key, number string) []map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/messages?direction=outbound&to="+url.QueryEscape(number), key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list messages to %s: %d %s", number, r.Status, r.Raw)
	}
	return r.List()
}

// cmpOnlyMessage returns the one outbound message to number.
func cmpOnlyMessage(t testing.TB, s *server, key, number string) map[string]any {
	t.Helper()
	ms := cmpMessages(t, s, key, number)
	if len(ms) != 1 {
		t.Fatalf("%d messages to %s, want 1: %v", len(ms), number, ms)
	}
	return ms[0]
}

func TestCampaignCreateValidation(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := ctTenant(t, db)
		key := tn.Test
		if r := s.do(t, "POST", "/v1/templates", key, map[string]any{"name": "greet", "body": "Hi {{name}} at {{ phone }}"}); r.Status != 201 {
			t.Fatalf("template: %d %s", r.Status, r.Raw)
		}
		c1 := ctCreate(t, s, key, map[string]any{"phone": "+15005550000"})["id"].(string)
		liveContact := ctCreate(t, s, tn.Live, map[string]any{"phone": "+15005550000"})["id"].(string)
		to := []string{"+15005550000"}
		for _, tc := range []struct {
			what        string
			body        any
			status      int
			code, field string
		}{
			{"no name", map[string]any{"body": "hi", "to": to}, 400, "VALIDATION_ERROR", "name"},
			{"long name", map[string]any{"name": strings.Repeat("n", 101), "body": "hi", "to": to}, 400, "VALIDATION_ERROR", "name"},
			{"no content", map[string]any{"name": "x", "to": to}, 400, "VALIDATION_ERROR", "body"},
			{"body and template", map[string]any{"name": "x", "body": "hi", "template": "greet", "to": to}, 400, "VALIDATION_ERROR", "body"},
			{"empty body", map[string]any{"name": "x", "body": "", "to": to}, 400, "VALIDATION_ERROR", "body"},
			{"data with body", map[string]any{"name": "x", "body": "hi", "data": map[string]any{"a": "b"}, "to": to}, 400, "VALIDATION_ERROR", "data"},
			{"object in data", map[string]any{"name": "x", "template": "greet", "data": map[string]any{"a": map[string]any{}}, "to": to}, 400, "VALIDATION_ERROR", "data.a"},
			{"bad channel", map[string]any{"name": "x", "body": "hi", "channel": "fax", "to": to}, 400, "VALIDATION_ERROR", "channel"},
			{"no recipients", map[string]any{"name": "x", "body": "hi"}, 400, "VALIDATION_ERROR", "contact_ids"},
			{"two recipient kinds", map[string]any{"name": "x", "body": "hi", "to": to, "all_contacts": true}, 400, "VALIDATION_ERROR", "contact_ids"},
			{"all_contacts false", map[string]any{"name": "x", "body": "hi", "all_contacts": false}, 400, "VALIDATION_ERROR", "all_contacts"},
			{"empty to", map[string]any{"name": "x", "body": "hi", "to": []string{}}, 400, "VALIDATION_ERROR", "to"},
			{"to not a list", map[string]any{"name": "x", "body": "hi", "to": "+15005550000"}, 400, "VALIDATION_ERROR", "to"},
			{"empty contact_ids", map[string]any{"name": "x", "body": "hi", "contact_ids": []string{}}, 400, "VALIDATION_ERROR", "contact_ids"},
			{"empty contact id", map[string]any{"name": "x", "body": "hi", "contact_ids": []string{c1, ""}}, 400, "VALIDATION_ERROR", "contact_ids[1]"},
			{"unknown field", map[string]any{"name": "x", "body": "hi", "to": to, "from": "+15005550000"}, 400, "VALIDATION_ERROR", "from"},
			{"bad number", map[string]any{"name": "x", "body": "hi", "to": []string{"+15005550000", "5005550001"}}, 400, "INVALID_PHONE_NUMBER", "to[1]"},
			{"unknown template", map[string]any{"name": "x", "template": "nope", "to": to}, 400, "INVALID_TEMPLATE", ""},
			{"missing variable", map[string]any{"name": "x", "template": "greet", "to": to}, 400, "MISSING_TEMPLATE_VAR", "data.name"},
			{"unknown contact", map[string]any{"name": "x", "body": "hi", "contact_ids": []string{c1, "01HZZZZZZZZZZZZZZZZZZZZZZZ"}}, 404, "CONTACT_NOT_FOUND", "contact_ids[1]"},
			{"contact of the other environment", map[string]any{"name": "x", "body": "hi", "contact_ids": []string{liveContact}}, 404, "CONTACT_NOT_FOUND", "contact_ids[0]"},
		} {
			ctWantErr(t, tc.what, s.do(t, "POST", "/v1/campaigns", key, tc.body), tc.status, tc.code, tc.field)
		}
		if r := s.do(t, "GET", "/v1/campaigns", key, nil); len(r.List()) != 0 {
			t.Fatalf("a refused campaign was stored: %s", r.Raw)
		}

		// Repeated numbers count once; phone is a variable of every recipient.
		c := cmpCreate(t, s, key, map[string]any{"name": "Greeting", "template": "greet", "data": map[string]any{"name": "friend", "n": 3},
			"to": []string{"+15005550000", "+15005550002", "+15005550000"}})
		if c["audience"] != "to" || c["template"] != "greet" || c["body"] != nil || c["channel"] != "auto" ||
			c["launched_at"] != nil || c["completed_at"] != nil || c["canceled_at"] != nil {
			t.Fatalf("created: %v", c)
		}
		if d := c["data"].(map[string]any); d["name"] != "friend" || d["n"] != "3" {
			t.Fatalf("data: %v", c["data"])
		}
		if !cmpWant(cmpCounts(c), map[string]int{"total": 2, "pending": 2, "queued": 0, "delivered": 0}) {
			t.Fatalf("counts: %v", c["counts"])
		}
		// An all-contacts draft previews the contacts there are now.
		all := cmpCreate(t, s, key, map[string]any{"name": "All", "body": "hi", "channel": "sms", "all_contacts": true})
		if all["audience"] != "all_contacts" || all["channel"] != "sms" || cmpCounts(all)["total"] != 1 {
			t.Fatalf("all contacts: %v", all)
		}
		ctCreate(t, s, key, map[string]any{"phone": "+15005550002"})
		if got := cmpCounts(cmpGet(t, s, key, all["id"].(string))); got["total"] != 2 || got["pending"] != 2 {
			t.Fatalf("all contacts after a new contact: %v", got)
		}
		byIDs := cmpCreate(t, s, key, map[string]any{"name": "Some", "body": "hi", "contact_ids": []string{c1, c1}})
		if byIDs["audience"] != "contact_ids" || cmpCounts(byIDs)["total"] != 1 {
			t.Fatalf("contact ids: %v", byIDs)
		}
	})
}

func TestCampaignLifecycle(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn, other := ctTenant(t, db), ctTenant(t, db)
		key := tn.Live
		numbers := []string{"+15005550000", "+15005550002", "+15005550001", "+15005550004", "+15005550003"}
		c := cmpCreate(t, s, key, map[string]any{"name": "Launch day", "body": "We are live!", "to": numbers})
		id := c["id"].(string)
		if got := cmpGet(t, s, key, id); got["status"] != "draft" || got["name"] != "Launch day" || got["body"] != "We are live!" {
			t.Fatalf("get draft: %v", got)
		}
		if r := s.do(t, "GET", "/v1/campaigns", key, nil); len(r.List()) != 1 || r.List()[0]["id"] != id {
			t.Fatalf("list: %s", r.Raw)
		}
		launched := cmpLaunch(t, s, key, id)
		if cmpCounts(launched)["total"] != 5 {
			t.Fatalf("launched: %v", launched)
		}
		ctWantErr(t, "launch twice", s.do(t, "POST", "/v1/campaigns/"+id+"/launch", key, nil), 409, "CAMPAIGN_NOT_DRAFT", "")

		done := cmpAwait(t, s, key, id, "the campaign to complete", func(c map[string]any) bool { return c["status"] == "completed" })
		want := map[string]int{"total": 5, "pending": 0, "queued": 0, "sent": 0, "delivered": 4, "failed": 1, "canceled": 0,
			"skipped_opted_out": 0, "skipped_invalid": 0, "deferred_quiet_hours": 0, "deferred_limits": 0}
		if got := cmpCounts(done); !cmpWant(got, want) || done["completed_at"] == nil {
			t.Fatalf("completed campaign: %v, want %v", done, want)
		}
		// Its messages are ordinary messages with campaign_id; channels as
		// for a direct send, except that an unavailable detection means sms.
		for number, channel := range map[string]string{"+15005550000": "chat", "+15005550004": "sms", "+15005550003": "sms"} {
			m := cmpOnlyMessage(t, s, key, number)
			if m["campaign_id"] != id || m["channel"] != channel || m["status"] != "delivered" || m["body"] != "We are live!" ||
				m["livemode"] != true || m["from"] != tn.Phone.Number {
				t.Fatalf("message to %s: %v", number, m)
			}
		}
		if m := cmpOnlyMessage(t, s, key, "+15005550001"); m["status"] != "failed" || m["error_code"] != "DELIVERY_FAILED" {
			t.Fatalf("failed message: %v", m)
		}
		// Cancelling a completed campaign changes nothing.
		if r := s.do(t, "POST", "/v1/campaigns/"+id+"/cancel", key, nil); r.Status != 200 || r.Data()["status"] != "completed" || r.Data()["canceled_at"] != nil {
			t.Fatalf("cancel completed: %d %s", r.Status, r.Raw)
		}

		// Unknown ids, another tenant's and the other environment's: 404.
		for _, tc := range []struct{ key, id string }{{key, "01HZZZZZZZZZZZZZZZZZZZZZZZ"}, {other.Live, id}, {tn.Test, id}} {
			ctWantErr(t, "get", s.do(t, "GET", "/v1/campaigns/"+tc.id, tc.key, nil), 404, "CAMPAIGN_NOT_FOUND", "")
			ctWantErr(t, "launch", s.do(t, "POST", "/v1/campaigns/"+tc.id+"/launch", tc.key, nil), 404, "CAMPAIGN_NOT_FOUND", "")
			ctWantErr(t, "cancel", s.do(t, "POST", "/v1/campaigns/"+tc.id+"/cancel", tc.key, nil), 404, "CAMPAIGN_NOT_FOUND", "")
		}
		if r := s.do(t, "GET", "/v1/campaigns", other.Live, nil); len(r.List()) != 0 {
			t.Fatalf("another tenant's list: %s", r.Raw)
		}

		// A draft can be canceled; a canceled campaign cannot be launched.
		d := cmpCreate(t, s, key, map[string]any{"name": "Never", "body": "x", "to": numbers[:1]})["id"].(string)
		r := s.do(t, "POST", "/v1/campaigns/"+d+"/cancel", key, nil)
		if r.Status != 200 || r.Data()["status"] != "canceled" || r.Data()["canceled_at"] == nil {
			t.Fatalf("cancel draft: %d %s", r.Status, r.Raw)
		}
		ctWantErr(t, "launch canceled", s.do(t, "POST", "/v1/campaigns/"+d+"/launch", key, nil), 409, "CAMPAIGN_NOT_DRAFT", "")
		if r := s.do(t, "POST", "/v1/campaigns/"+d+"/cancel", key, nil); r.Status != 200 || r.Data()["status"] != "canceled" {
			t.Fatalf("cancel twice: %d %s", r.Status, r.Raw)
		}

		// The list pages newest first.
		third := cmpCreate(t, s, key, map[string]any{"name": "Third", "body": "x", "to": numbers[:1]})["id"].(string)
		r = s.do(t, "GET", "/v1/campaigns?limit=2", key, nil)
		if r.Status != 200 || len(r.List()) != 2 || r.List()[0]["id"] != third || r.List()[1]["id"] != d {
			t.Fatalf("first page: %d %s", r.Status, r.Raw)
		}
		if r.List()[0]["status"] != "draft" || r.List()[1]["status"] != "canceled" {
			t.Fatalf("statuses: %s", r.Raw)
		}
		r = s.do(t, "GET", nextLink(r.Header.Get("Link")), key, nil)
		if r.Status != 200 || len(r.List()) != 1 || r.List()[0]["id"] != id || r.Header.Get("Link") != "" {
			t.Fatalf("second page: %d %s", r.Status, r.Raw)
		}
		if got := cmpCounts(r.List()[0]); !cmpWant(got, want) {
			t.Fatalf("counts in the list: %v", got)
		}
		ctWantErr(t, "bad limit", s.do(t, "GET", "/v1/campaigns?limit=500", key, nil), 400, "VALIDATION_ERROR", "limit")
	})
}

// hookSink collects the webhook events it receives.
type cmpHookSink struct {
	mu     sync.Mutex
	events []map[string]any
}

func (h *cmpHookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev map[string]any
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &ev)
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
}

// count returns how many events of type event about a message to number
// (any, when empty) arrived, with error_code code when not empty.
func (h *cmpHookSink) count(event, number, code string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ev := range h.events {
		if ev["event"] == event && (number == "" || ev["to"] == number) && (code == "" || ev["error_code"] == code) {
			n++
		}
	}
	return n
}

// TestCampaignRules: a campaign over contacts of which some opted out, some
// are in quiet hours and some are new beyond the daily limit: the opted-out
// ones are skipped, the others deferred, the rest delivered; a cancel then
// withdraws the deferred messages, with their webhooks.
func TestCampaignRules(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--plans", tempPlansFile(t, `{"scale": {"new_contacts_per_day": 5}}`), "--allow-private-webhooks")
		tn := ctTenant(t, db)
		key := tn.Test
		sink := &cmpHookSink{}
		hooks := httptest.NewServer(sink)
		t.Cleanup(hooks.Close)
		r := s.do(t, "POST", "/v1/webhooks", key, map[string]any{"url": hooks.URL, "events": []string{"message.delivered", "message.failed"},
			"secret": "a-secret-of-sixteen-or-more"})
		if r.Status != 201 {
			t.Fatalf("webhook: %d %s", r.Status, r.Raw)
		}
		inbound := func(from, body string) {
			t.Helper()
			if r := s.do(t, "POST", "/v1/test/inbound", key, map[string]any{"from": from, "body": body}); r.Status != 200 {
				t.Fatalf("inbound: %d %s", r.Status, r.Raw)
			}
		}
		contact := func(phone string) string {
			t.Helper()
			return ctCreate(t, s, key, map[string]any{"phone": phone})["id"].(string)
		}
		opted1, opted2 := msgFreshNumber("+1415555XXXX"), msgFreshNumber("+44207123XXXX")
		quiet1, until1 := cmpQuietNumber(t)
		quiet2, until2 := cmpQuietNumber(t)
		inbound(opted1, "STOP")
		inbound(opted2, "stop")
		inbound("+15005550009", "Hello") // known: not limited by the new-contact limit
		// In order: 2 opted out, 2 in quiet hours and 3 more new recipients
		// (the day's 5), 2 new beyond the limit, 1 known, 1 deleted.
		ids := []string{contact(opted1), contact(opted2), contact(quiet1), contact(quiet2),
			contact("+15005550000"), contact("+15005550002"), contact("+15005550005"),
			contact("+15005550006"), contact("+15005550007"), contact("+15005550009"), contact("+15005550008")}
		c := cmpCreate(t, s, key, map[string]any{"name": "Rules", "body": "Spring sale", "contact_ids": ids})
		id := c["id"].(string)
		if r := s.do(t, "DELETE", "/v1/contacts/"+ids[len(ids)-1], key, nil); r.Status != 200 {
			t.Fatalf("delete contact: %d %s", r.Status, r.Raw)
		}
		cmpLaunch(t, s, key, id)

		want := map[string]int{"total": 11, "pending": 0, "skipped_opted_out": 2, "skipped_invalid": 1,
			"deferred_quiet_hours": 2, "deferred_limits": 2, "queued": 4, "sent": 0, "delivered": 4, "failed": 0, "canceled": 0}
		got := cmpAwait(t, s, key, id, "the campaign's messages to be delivered or deferred", func(c map[string]any) bool {
			n := cmpCounts(c)
			return n["pending"] == 0 && n["delivered"] == 4
		})
		if !cmpWant(cmpCounts(got), want) || got["status"] != "running" {
			t.Fatalf("campaign: %v, want %v", got, want)
		}
		for _, n := range []string{"+15005550000", "+15005550002", "+15005550005", "+15005550009"} {
			if m := cmpOnlyMessage(t, s, key, n); m["status"] != "delivered" || m["campaign_id"] != id || m["scheduled_at"] != nil {
				t.Fatalf("message to %s: %v", n, m)
			}
		}
		for _, n := range []string{opted1, opted2, "+15005550008"} {
			if ms := cmpMessages(t, s, key, n); len(ms) != 0 {
				t.Fatalf("skipped recipient %s got messages: %v", n, ms)
			}
		}
		// Quiet hours: scheduled for their end.
		for n, until := range map[string]time.Time{quiet1: until1, quiet2: until2} {
			m := cmpOnlyMessage(t, s, key, n)
			at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(m["scheduled_at"]))
			if m["status"] != "queued" || !at.Equal(until) {
				t.Fatalf("message in quiet hours to %s: %v, want scheduled at %v", n, m, until)
			}
		}
		// Beyond the limit: scheduled for the next UTC day.
		for _, n := range []string{"+15005550006", "+15005550007"} {
			m := cmpOnlyMessage(t, s, key, n)
			created, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(m["created_at"]))
			at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(m["scheduled_at"]))
			if next := created.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour); m["status"] != "queued" || !at.Equal(next) {
				t.Fatalf("message beyond the limit to %s: %v, want scheduled at %v", n, m, next)
			}
		}
		// The campaign used up the day's new contacts: a direct send to a new
		// recipient is refused (unless the UTC day changed meanwhile).
		r = s.do(t, "POST", "/v1/messages", key, map[string]any{"to": "+15005550004", "body": "hi"})
		if now := time.Now().UTC(); r.Code() != "NEW_CONTACT_LIMIT" && now.Add(-time.Minute).Day() == now.Day() {
			t.Fatalf("direct send after the campaign: %d %s", r.Status, r.Raw)
		}
		eventually(t, 30*time.Second, "message.delivered for the 4 delivered messages", func() bool {
			return sink.count("message.delivered", "", "") == 4
		})

		// Cancel: the 4 deferred messages are withdrawn, with message.failed.
		r = s.do(t, "POST", "/v1/campaigns/"+id+"/cancel", key, nil)
		if r.Status != 200 || r.Data()["status"] != "canceled" || r.Data()["canceled_at"] == nil {
			t.Fatalf("cancel: %d %s", r.Status, r.Raw)
		}
		want["queued"], want["canceled"] = 0, 4
		got = cmpAwait(t, s, key, id, "the deferred messages to be withdrawn", func(c map[string]any) bool {
			return cmpCounts(c)["canceled"] == 4
		})
		if !cmpWant(cmpCounts(got), want) || got["status"] != "canceled" {
			t.Fatalf("canceled campaign: %v, want %v", got, want)
		}
		m := cmpOnlyMessage(t, s, key, "+15005550006")
		if m["status"] != "failed" || m["error_code"] != "CAMPAIGN_CANCELED" || m["failure_reason"] == nil {
			t.Fatalf("withdrawn message: %v", m)
		}
		eventually(t, 30*time.Second, "message.failed for the 4 withdrawn messages", func() bool {
			return sink.count("message.failed", "", "CAMPAIGN_CANCELED") == 4
		})
	})
}

// TestCampaignTemplate: each contact's fields fill the template, over the
// campaign's data; a contact without a value for a variable is skipped.
func TestCampaignTemplate(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := ctTenant(t, db)
		key := tn.Live
		if r := s.do(t, "POST", "/v1/templates", key, map[string]any{"name": "offer", "body": "Hi {{name}}, code {{code}} at {{ shop }} for {{phone}}"}); r.Status != 201 {
			t.Fatalf("template: %d %s", r.Status, r.Raw)
		}
		ctCreate(t, s, key, map[string]any{"phone": "+15005550000", "name": "Ada", "fields": map[string]any{"code": "A1"}})
		ctCreate(t, s, key, map[string]any{"phone": "+15005550002", "name": "Bob", "fields": map[string]any{"code": "B2", "shop": "Bob's", "name": "Robert"}})
		ctCreate(t, s, key, map[string]any{"phone": "+15005550005", "fields": map[string]any{"code": "C3"}}) // no name
		c := cmpCreate(t, s, key, map[string]any{"name": "Offer", "template": "offer", "data": map[string]any{"shop": "Acme", "code": "none"},
			"all_contacts": true})
		id := c["id"].(string)
		if cmpCounts(c)["total"] != 3 {
			t.Fatalf("draft: %v", c)
		}
		cmpLaunch(t, s, key, id)
		ctCreate(t, s, key, map[string]any{"phone": "+15005550006", "name": "Late", "fields": map[string]any{"code": "D4"}}) // after launch
		done := cmpAwait(t, s, key, id, "the campaign to complete", func(c map[string]any) bool { return c["status"] == "completed" })
		if want := map[string]int{"total": 3, "pending": 0, "delivered": 2, "skipped_invalid": 1}; !cmpWant(cmpCounts(done), want) {
			t.Fatalf("completed: %v, want %v", done["counts"], want)
		}
		for number, body := range map[string]string{
			"+15005550000": "Hi Ada, code A1 at Acme for +15005550000",
			"+15005550002": "Hi Robert, code B2 at Bob's for +15005550002", // a field named name wins over the contact's name
		} {
			if m := cmpOnlyMessage(t, s, key, number); m["body"] != body || m["template"] != "offer" || m["campaign_id"] != id {
				t.Fatalf("message to %s: %v, want body %q", number, m, body)
			}
		}
		for _, n := range []string{"+15005550005", "+15005550006"} {
			if ms := cmpMessages(t, s, key, n); len(ms) != 0 {
				t.Fatalf("messages to %s: %v", n, ms)
			}
		}

		// A list of numbers: data and phone are the variables.
		c = cmpCreate(t, s, key, map[string]any{"name": "To", "template": "offer", "data": map[string]any{"name": "you", "code": 7, "shop": "S"},
			"to": []string{"+15005550007"}})
		cmpLaunch(t, s, key, c["id"].(string))
		cmpAwait(t, s, key, c["id"].(string), "the second campaign to complete", func(c map[string]any) bool { return c["status"] == "completed" })
		if m := cmpOnlyMessage(t, s, key, "+15005550007"); m["body"] != "Hi you, code 7 at S for +15005550007" {
			t.Fatalf("message: %v", m)
		}
	})
}

// TestCampaignResume: a server killed (SIGKILL) while a campaign is being
// expanded, and started again on the same database, finishes the campaign
// with one message per recipient: the progress is stored with each chunk.
func TestCampaignResume(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		plans := tempPlansFile(t, `{"scale": {"new_contacts_per_day": 0}}`)
		tn := ctTenant(t, db)
		p := startProcess(t, db, "--plans", plans)
		s := &server{t: t, URL: p.URL}
		const n = 10_000
		to := make([]string, n)
		for i := range to {
			to[i] = fmt.Sprintf("+1500%07d", i) // non-geographic: one zone (UTC), quiet or not, for all
		}
		id := cmpCreate(t, s, tn.Test, map[string]any{"name": "Big", "body": "Hello", "to": to})["id"].(string)
		cmpLaunch(t, s, tn.Test, id)
		cmpAwait(t, s, tn.Test, id, "expansion to start", func(c map[string]any) bool { return cmpCounts(c)["pending"] < n })
		p.kill()

		s = startServer(t, db, "--plans", plans)
		pending := cmpCounts(cmpGet(t, s, tn.Test, id))["pending"]
		// 10,000 messages: under -race on a loaded machine that takes
		// longer than cmpAwait's minute.
		var c map[string]any
		eventually(t, 5*time.Minute, "expansion to finish after the restart", func() bool {
			c = cmpGet(t, s, tn.Test, id)
			return cmpCounts(c)["pending"] == 0
		})
		got := cmpCounts(c)
		messages := got["queued"] + got["sent"] + got["delivered"] + got["failed"]
		if got["total"] != n || messages != n || got["skipped_opted_out"]+got["skipped_invalid"] != 0 {
			t.Fatalf("after the restart: %v, want %d messages", got, n)
		}
		t.Logf("killed with %d of %d recipients pending", pending, n)
	})
}
