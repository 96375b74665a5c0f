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

	"github.com/android-sms-gateway/client-go/smsgateway"

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
		{"two SIMs on one device", func(t *testing.T, s *server, db string) {
			ctx := context.Background()
			tn := msgTenant(t, db)
			devOnlyAndroid(t, s, tn)
			first, firstNumber, code := devPhone(t, s, tn.Live, nil) // no SIM of its own: it takes SIM 1
			a, _ := devAgent(t, s, code, agent.Options{}, true)
			eventually(t, 30*time.Second, "the stream", a.Connected)
			msgWantErr(t, s.do(t, "POST", "/v1/phones", tn.Live, map[string]any{"number": msgFreshNumber("+1415XXXXXXX"), "device_phone_id": first}),
				400, "VALIDATION_ERROR", "sim_number")
			msgWantErr(t, s.do(t, "POST", "/v1/phones", tn.Live, map[string]any{"number": msgFreshNumber("+1415XXXXXXX"), "device_phone_id": first, "sim_number": 1}),
				400, "VALIDATION_ERROR", "sim_number")
			msgWantErr(t, s.do(t, "POST", "/v1/phones", tn.Live, map[string]any{"number": msgFreshNumber("+1415XXXXXXX"), "device_phone_id": "nope", "sim_number": 2}),
				400, "VALIDATION_ERROR", "device_phone_id")
			d := phoneCreate(t, s, tn.Live, map[string]any{"number": msgFreshNumber("+1415XXXXXXX"), "device_phone_id": first, "sim_number": 2})
			second, secondNumber := d["id"].(string), d["number"].(string)
			if d["pairing"] != nil || d["device_phone_id"] != first || d["device"] == nil || d["device"].(map[string]any)["sim_number"] != 2.0 {
				t.Fatalf("the phone of SIM 2: %v", d)
			}
			if p := phoneGet(t, s, tn.Live, first); p["device"].(map[string]any)["sim_number"] != 1.0 {
				t.Fatalf("the first phone did not take SIM 1: %v", p["device"])
			}
			eventually(t, 10*time.Second, "SIM 2's phone online", func() bool { return phoneGet(t, s, tn.Live, second)["status"] == "online" })
			// Messages go with their phone's SIM, whichever phone.
			sims := map[string]int{}
			for i := range 6 {
				from := firstNumber
				if i%2 == 1 {
					from = secondNumber
				}
				id := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "sim", "from": from})["message_id"].(string)
				m := devHeld(t, a, id)
				if m.SimNumber == nil {
					t.Fatalf("message %d handed without simNumber", i)
				}
				sims[from] = int(*m.SimNumber)
				if want := 1 + i%2; int(*m.SimNumber) != want {
					t.Fatalf("a message from %s carries simNumber %d, want %d", from, *m.SimNumber, want)
				}
				msgWait(t, s, tn.Live, id, "delivered")
			}
			// A text received on SIM 2 is the second phone's.
			sender := msgAwake(t)
			if _, err := a.InboundSIM(ctx, sender, "hello two", 2); err != nil {
				t.Fatal(err)
			}
			if _, err := a.InboundSIM(ctx, sender, "hello one", 1); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "the inbound texts", func() bool { return len(msgList(t, s, tn.Live, "direction=inbound").List()) == 2 })
			for _, m := range msgList(t, s, tn.Live, "direction=inbound").List() {
				want := firstNumber
				if m["body"] == "hello two" {
					want = secondNumber
				}
				if m["to"] != want {
					t.Errorf("%q went to %v, want %s", m["body"], m["to"], want)
				}
			}
			// Priority: high tells the app to skip its limits and delays.
			msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": msgAwake(t), "body": "x", "priority": "urgent"}),
				400, "VALIDATION_ERROR", "priority")
			high := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "now", "priority": "high"})["message_id"].(string)
			normal := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "later", "priority": "normal"})["message_id"].(string)
			if got := devHeld(t, a, high).Priority; got != smsgateway.PriorityBypassThreshold {
				t.Errorf("a high-priority message carries priority %d, want %d", got, smsgateway.PriorityBypassThreshold)
			}
			if got := devHeld(t, a, normal).Priority; got != smsgateway.PriorityDefault {
				t.Errorf("a normal message carries priority %d", got)
			}
			// The record says it, alone and in the list.
			if got := msgGet(t, s, tn.Live, high)["priority"]; got != "high" {
				t.Errorf("GET a high-priority message: priority %v", got)
			}
			if got := msgGet(t, s, tn.Live, normal)["priority"]; got != "normal" {
				t.Errorf("GET a normal message: priority %v", got)
			}
			listed := map[string]any{}
			for _, m := range msgList(t, s, tn.Live, "limit=100").List() {
				listed[m["id"].(string)] = m["priority"]
			}
			if listed[high] != "high" || listed[normal] != "normal" {
				t.Errorf("the list says priority %v and %v", listed[high], listed[normal])
			}
			// A ping's health is the device's: both phones show it.
			a.SetBattery(42, false)
			a.Ping(ctx)
			if h, _ := phoneGet(t, s, tn.Live, second)["health"].(map[string]any); h == nil || h["battery_level"] != 42.0 {
				t.Errorf("SIM 2's phone health: %v", h)
			}
		}},
	})
}
