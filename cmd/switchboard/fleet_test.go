package main

// End-to-end tests of the fleet (docs/phones.md): a reference device that
// pings its health and whose sends fail on command; the phone record, the
// dashboard, the quarantine and its webhook event, and the way back.

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/provider/android/agent"
)

func TestPhoneFleet(t *testing.T) {
	t.Parallel()
	runShared(t, devArgs, []sharedCase{
		{"health, quarantine and back", func(t *testing.T, s *server, db string) {
			ctx := context.Background()
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			hook := s.do(t, "POST", "/v1/webhooks", tn.Live, map[string]any{"url": "http://127.0.0.1:9/fleet",
				"events": []string{"phone.quarantined", "phone.offline"}, "secret": strings.Repeat("k", 24)})
			if hook.Status != 201 {
				t.Fatalf("webhook: %d %s", hook.Status, hook.Raw)
			}
			id, _, code := devPhone(t, s, tn.Live, nil)
			a, _ := devAgent(t, s, code, agent.Options{}, true)

			// Health: a ping of a battery at 10%, not charging.
			a.SetBattery(10, false)
			if err := a.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			p := phoneGet(t, s, tn.Live, id)
			h, _ := p["health"].(map[string]any)
			if h == nil || h["battery_level"] != 10.0 || h["charging"] != false || h["network"] != "wifi" || h["reported_at"] == nil {
				t.Fatalf("health after a ping: %v", p["health"])
			}
			if tr := p["trouble"].([]any); len(tr) != 1 || tr[0] != "low_battery" {
				t.Fatalf("trouble: %v", p["trouble"])
			}
			dash := dashHTTP(t, s, tn.ID)
			if _, page := dash.get("/dashboard/phones"); !strings.Contains(page, "battery 10%") || !strings.Contains(page, "low battery") {
				t.Errorf("the phones page does not flag the battery:\n%s", page)
			}
			a.SetBattery(80, true)
			a.Ping(ctx)
			if tr := phoneGet(t, s, tn.Live, id)["trouble"].([]any); len(tr) != 0 {
				t.Errorf("trouble after charging: %v", tr)
			}

			// Quarantine: every send fails; five failures of the last ten.
			a.SetFailing(true)
			var ids []string
			for range 5 {
				r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "fleet"})
				if r.Status != 202 {
					t.Fatalf("send: %d %s", r.Status, r.Raw)
				}
				ids = append(ids, r.Data()["message_id"].(string))
			}
			for _, m := range ids {
				msgWait(t, s, tn.Live, m, "failed")
			}
			eventually(t, 10*time.Second, "the phone quarantined", func() bool { return phoneGet(t, s, tn.Live, id)["status"] == "quarantined" })
			p = phoneGet(t, s, tn.Live, id)
			q, _ := p["quarantine"].(map[string]any)
			if q == nil || len(q["reasons"].([]any)) != 1 || q["reasons"].([]any)[0] != agent.FailError {
				t.Fatalf("quarantine: %v", p["quarantine"])
			}
			msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "x"}),
				503, "NO_PHONE_AVAILABLE", "")
			deliveries := s.do(t, "GET", "/v1/webhooks/"+hook.Data()["id"].(string)+"/deliveries", tn.Live, nil).List()
			if len(deliveries) != 1 || deliveries[0]["event"] != "phone.quarantined" || deliveries[0]["phone_id"] != id || deliveries[0]["message_id"] != nil {
				t.Fatalf("deliveries: %v", deliveries)
			}
			_, page := dash.get("/dashboard/phones/" + id)
			if !strings.Contains(page, "Back in rotation") || !strings.Contains(page, agent.FailError) {
				t.Fatalf("the phone page of a quarantined phone:\n%s", page)
			}
			// Back from the dashboard, as PATCH {"status": "online"}.
			a.SetFailing(false)
			dash.postLocation("/dashboard/phones/"+id+"/release", url.Values{})
			p = phoneGet(t, s, tn.Live, id)
			if p["status"] != "online" || p["quarantine"] != nil {
				t.Fatalf("after release: %v %v", p["status"], p["quarantine"])
			}
			r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "back"})
			if r.Status != 202 {
				t.Fatalf("send after release: %d %s", r.Status, r.Raw)
			}
			msgWait(t, s, tn.Live, r.Data()["message_id"].(string), "delivered")
		}},
	})
}
