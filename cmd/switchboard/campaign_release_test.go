package main

import (
	"fmt"
	"testing"
	"time"
)

// TestCampaignCancelReleasesLimits: the messages a cancel withdraws give
// back what they reserved of the daily limits, on every day they were
// deferred to. Before, a canceled campaign kept its future days full, and
// the next campaign to one new recipient waited behind it.
func TestCampaignCancelReleasesLimits(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--plans", tempPlansFile(t, `{"scale": {"new_contacts_per_day": 2}}`))
		day := time.Now().UTC().Truncate(24 * time.Hour)
		dayAt := func(d int) string { return day.AddDate(0, 0, d).Format(time.RFC3339Nano) }
		// The assertions name days from today: a test that runs over
		// midnight UTC cannot make them.
		sameDay := func() bool { return time.Now().UTC().Truncate(24 * time.Hour).Equal(day) }
		// scheduledDays returns the days (0: today) of the queued messages
		// of a campaign, from the 00:00 UTC they were deferred to.
		scheduled := func(key, campaign string) []string {
			r := s.do(t, "GET", "/v1/messages?status=queued&campaign_id="+campaign, key, nil)
			if r.Status != 200 {
				t.Fatalf("list: %d %s", r.Status, r.Raw)
			}
			var out []string
			for _, m := range r.List() {
				out = append(out, fmt.Sprint(m["scheduled_at"]))
			}
			return out
		}
		send := func(key, to string) *response {
			return s.do(t, "POST", "/v1/messages", key, map[string]any{"to": to, "body": "hi"})
		}

		t.Run("new contacts", func(t *testing.T) {
			tn := ctTenant(t, db)
			key := tn.Test
			// Seven new recipients at two a day: two today, two on each of the
			// next two days, one on the third. (The simulator's numbers are
			// never in quiet hours, so the deferred ones wait for 00:00 UTC.)
			to := []string{"+15005550000", "+15005550002", "+15005550005", "+15005550006", "+15005550007", "+15005550008", "+15005550009"}
			a := cmpCreate(t, s, key, map[string]any{"name": "Big", "body": "Sale", "to": to})["id"].(string)
			cmpLaunch(t, s, key, a)
			cmpAwait(t, s, key, a, "two delivered, five deferred", func(c map[string]any) bool {
				n := cmpCounts(c)
				return n["pending"] == 0 && n["delivered"] == 2 && n["deferred_limits"] == 5
			})
			// A recipient deferred to the third day writes in: it is known
			// for good, whatever becomes of the campaign's message to it.
			if r := s.do(t, "POST", "/v1/test/inbound", key, map[string]any{"from": "+15005550009", "body": "hello"}); r.Status != 200 {
				t.Fatalf("inbound: %d %s", r.Status, r.Raw)
			}
			if r := s.do(t, "POST", "/v1/campaigns/"+a+"/cancel", key, nil); r.Status != 200 {
				t.Fatalf("cancel: %d %s", r.Status, r.Raw)
			}
			cmpAwait(t, s, key, a, "five withdrawn", func(c map[string]any) bool { return cmpCounts(c)["canceled"] == 5 })

			// A new campaign to one new recipient goes out tomorrow, the
			// first day with room: the withdrawn messages gave their days
			// back (before, it waited for the third day).
			b := cmpCreate(t, s, key, map[string]any{"name": "Small", "body": "Hello", "to": []string{"+15005550004"}})["id"].(string)
			cmpLaunch(t, s, key, b)
			cmpAwait(t, s, key, b, "the one message deferred", func(c map[string]any) bool { return cmpCounts(c)["deferred_limits"] == 1 })
			got := scheduled(key, b)
			// A withdrawn recipient is unknown again: a direct send to it is
			// a new contact, and today has no room. The one that wrote in
			// stays known.
			r6, r9 := send(key, "+15005550006"), send(key, "+15005550009")
			if !sameDay() {
				t.Skip("the UTC day changed during the test")
			}
			if len(got) != 1 || got[0] != dayAt(1) {
				t.Errorf("the next campaign's message is scheduled at %v, want %s", got, dayAt(1))
			}
			wantError(t, "a direct send to a withdrawn recipient", r6, 429, "NEW_CONTACT_LIMIT")
			if r9.Status != 202 {
				t.Errorf("a direct send to the recipient that wrote in: %d %s, want 202", r9.Status, r9.Raw)
			}
		})

		t.Run("phones", func(t *testing.T) {
			tn := ctTenant(t, db)
			key := tn.Test
			// Known recipients (they wrote in), a phone that sends three a day.
			to := []string{"+15005550000", "+15005550002", "+15005550005", "+15005550006", "+15005550007", "+15005550008", "+15005550009"}
			for _, n := range to {
				if r := s.do(t, "POST", "/v1/test/inbound", key, map[string]any{"from": n, "body": "hi"}); r.Status != 200 {
					t.Fatalf("inbound: %d %s", r.Status, r.Raw)
				}
			}
			if r := s.do(t, "PATCH", "/v1/phones/"+tn.Phone.ID, tn.Live, map[string]any{"daily_limit": 3}); r.Status != 200 {
				t.Fatalf("phone limit: %d %s", r.Status, r.Raw)
			}
			a := cmpCreate(t, s, key, map[string]any{"name": "Big", "body": "Sale", "to": to})["id"].(string)
			cmpLaunch(t, s, key, a)
			cmpAwait(t, s, key, a, "three delivered, four deferred", func(c map[string]any) bool {
				n := cmpCounts(c)
				return n["pending"] == 0 && n["delivered"] == 3 && n["deferred_limits"] == 4
			})
			if got := scheduled(key, a); len(got) != 4 {
				t.Fatalf("deferred: %v", got)
			}
			if r := s.do(t, "POST", "/v1/campaigns/"+a+"/cancel", key, nil); r.Status != 200 {
				t.Fatalf("cancel: %d %s", r.Status, r.Raw)
			}
			cmpAwait(t, s, key, a, "four withdrawn", func(c map[string]any) bool { return cmpCounts(c)["canceled"] == 4 })
			// Three more: today is full, tomorrow has room again for all three
			// (before, one would have waited for the day after).
			b := cmpCreate(t, s, key, map[string]any{"name": "Again", "body": "Hello", "to": to[:3]})["id"].(string)
			cmpLaunch(t, s, key, b)
			cmpAwait(t, s, key, b, "three deferred", func(c map[string]any) bool { return cmpCounts(c)["deferred_limits"] == 3 })
			got := scheduled(key, b)
			if !sameDay() {
				t.Skip("the UTC day changed during the test")
			}
			for _, at := range got {
				if at != dayAt(1) {
					t.Errorf("the next campaign's messages are scheduled at %v, want all at %s", got, dayAt(1))
					break
				}
			}
			if r := s.do(t, "GET", "/v1/phones/"+tn.Phone.ID, key, nil); r.Data()["sent_today"] != 3.0 {
				t.Errorf("phone: %s; want sent_today 3 (the withdrawn messages were tomorrow's and after)", r.Raw)
			}
		})
	})
}
