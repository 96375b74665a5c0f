package main

// End-to-end tests of POST /v1/test/inbound and the STOP/START opt-out it
// drives. Helpers (msgTenant, msgAwake, msgSend, ...) are in messages_test.go.

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// msgInbound simulates recipient from writing body to the tenant and
// asserts 200; it returns the stored message.
func msgInbound(t testing.TB, s *server, key, from, body string) map[string]any {
	t.Helper()
	r := s.do(t, "POST", "/v1/test/inbound", key, map[string]any{"from": from, "body": body})
	if r.Status != http.StatusOK {
		t.Fatalf("inbound %q from %s: %d %s", body, from, r.Status, r.Raw)
	}
	return r.Data()
}

func msgOptedOut(t testing.TB, s *server, key, to string) {
	t.Helper()
	msgWantErr(t, s.do(t, "POST", "/v1/messages", key, map[string]any{"to": to, "body": "are you there?"}), 400, "RECIPIENT_OPTED_OUT", "")
}

func TestInboundMessage(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		from := msgAwake(t)

		m := msgInbound(t, s, tn.Live, from, "Hello there")
		if m["direction"] != "inbound" || m["status"] != "received" || m["from"] != from || m["to"] != tn.Phone.Number ||
			m["body"] != "Hello there" || m["livemode"] != true || m["id"] == "" {
			t.Fatalf("inbound message: %v", m)
		}
		id := m["id"].(string)
		if got := msgGet(t, s, tn.Live, id); got["direction"] != "inbound" || got["status"] != "received" || got["body"] != "Hello there" {
			t.Fatalf("GET inbound: %v", got)
		}
		list := msgList(t, s, tn.Live, "direction=inbound").List()
		if len(list) != 1 || list[0]["id"] != id {
			t.Fatalf("inbound list: %v", list)
		}
		if l := msgList(t, s, tn.Live, "direction=outbound").List(); len(l) != 0 {
			t.Fatalf("outbound list: %v", l)
		}

		// to names one of the tenant's numbers; anything else is refused.
		second := msgAddPhone(t, db, tn.ID)
		r := s.do(t, "POST", "/v1/test/inbound", tn.Live, map[string]any{"from": from, "to": second.Number, "body": "to the second"})
		if r.Status != 200 || r.Data()["to"] != second.Number {
			t.Fatalf("inbound to %s: %d %s", second.Number, r.Status, r.Raw)
		}
		msgWantErr(t, s.do(t, "POST", "/v1/test/inbound", tn.Live, map[string]any{"from": from, "to": "+19995550100", "body": "x"}), 400, "VALIDATION_ERROR", "to")
		other := msgTenant(t, db)
		msgWantErr(t, s.do(t, "POST", "/v1/test/inbound", tn.Live, map[string]any{"from": from, "to": other.Phone.Number, "body": "x"}), 400, "VALIDATION_ERROR", "to")

		for _, c := range []struct {
			name, code, field string
			body              any
		}{
			{"missing from", "VALIDATION_ERROR", "from", map[string]any{"body": "x"}},
			{"missing body", "VALIDATION_ERROR", "body", map[string]any{"from": from}},
			{"empty body", "VALIDATION_ERROR", "body", map[string]any{"from": from, "body": ""}},
			{"body of 1601 characters", "VALIDATION_ERROR", "body", map[string]any{"from": from, "body": strings.Repeat("x", 1601)}},
			{"unknown field", "VALIDATION_ERROR", "channel", map[string]any{"from": from, "body": "x", "channel": "sms"}},
			{"from not E.164", "INVALID_PHONE_NUMBER", "from", map[string]any{"from": "12345", "body": "x"}},
			{"to not E.164", "INVALID_PHONE_NUMBER", "to", map[string]any{"from": from, "to": "+1 212", "body": "x"}},
		} {
			r := s.do(t, "POST", "/v1/test/inbound", tn.Live, c.body)
			if r.Status != 400 || r.Code() != c.code || (c.field != "" && r.Field() != c.field) {
				t.Errorf("%s: want 400 %s %s, got %d %s", c.name, c.code, c.field, r.Status, r.Raw)
			}
		}

		// Test-mode inbound lives in the test environment.
		tm := msgInbound(t, s, tn.Test, from, "test hello")
		if tm["livemode"] != false {
			t.Fatalf("test inbound: %v", tm)
		}
		msgWantErr(t, s.do(t, "GET", "/v1/messages/"+tm["id"].(string), tn.Live, nil), 404, "NOT_FOUND", "")
		if l := msgList(t, s, tn.Test, "direction=inbound&to="+url.QueryEscape(tn.Phone.Number)).List(); len(l) != 1 || l[0]["id"] != tm["id"] {
			t.Fatalf("test inbound list: %v", l)
		}
	})
}

func TestInboundOptOut(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		r := msgAwake(t)
		msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "before"})

		msgInbound(t, s, tn.Live, r, " stop ")
		msgOptedOut(t, s, tn.Live, r)
		// Template sends too, once the template checks pass.
		msgCreateTemplate(t, s, tn.Live, "promo", "Hi {{name}}")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": r, "template": "promo", "data": map[string]any{"name": "x"}}),
			400, "RECIPIENT_OPTED_OUT", "")
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": r, "template": "promo"}), 400, "MISSING_TEMPLATE_VAR", "data.name")
		// Another message that is not a keyword changes nothing.
		msgInbound(t, s, tn.Live, r, "why did I stop?")
		msgOptedOut(t, s, tn.Live, r)

		msgInbound(t, s, tn.Live, r, "Start")
		msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "welcome back"})

		// "STOP please" is not the keyword.
		msgInbound(t, s, tn.Live, r, "STOP please")
		msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "still here"})
	})
}

func TestInboundOptOutKeywords(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		for _, out := range []string{"STOP", "stopall", "Unsubscribe", "CANCEL", "end", "QUIT", "\tStop\n"} {
			for _, in := range []string{"START", "unstop"} {
				r := msgAwake(t)
				msgInbound(t, s, tn.Live, r, out)
				msgOptedOut(t, s, tn.Live, r)
				msgInbound(t, s, tn.Live, r, in)
				msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "back after " + in})
			}
		}
		for _, body := range []string{"STOP please", "stop it", "S T O P", "STOPP", "please unsubscribe", "ending", "🛑"} {
			r := msgAwake(t)
			msgInbound(t, s, tn.Live, r, body)
			msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "not opted out by " + body})
		}
	})
}

func TestInboundOptOutScope(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		a := msgTenant(t, db)
		b := msgTenant(t, db)
		r := msgAwake(t)

		msgInbound(t, s, a.Live, r, "STOP")
		msgOptedOut(t, s, a.Live, r)
		// Per tenant: tenant B can still send to r.
		msgSend(t, s, b.Live, map[string]any{"to": r, "body": "from B"})
		// Per environment: the test environment has not seen the STOP.
		msgSend(t, s, a.Test, map[string]any{"to": r, "body": "test mode"})

		// And a STOP in test mode does not reach live data.
		r2 := msgAwake(t)
		msgInbound(t, s, a.Test, r2, "STOP")
		msgOptedOut(t, s, a.Test, r2)
		msgSend(t, s, a.Live, map[string]any{"to": r2, "body": "live"})
	})
}

func TestInboundOptOutSurvivesRestart(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		r, back := msgAwake(t), msgAwake(t)
		msgInbound(t, s, tn.Live, r, "STOP")
		msgInbound(t, s, tn.Live, back, "STOP")
		msgInbound(t, s, tn.Live, back, "START")
		msgOptedOut(t, s, tn.Live, r)
		s.stop()

		s = startServer(t, db)
		msgOptedOut(t, s, tn.Live, r)
		msgSend(t, s, tn.Live, map[string]any{"to": back, "body": "opted back in before the restart"})
		msgInbound(t, s, tn.Live, r, "START")
		msgSend(t, s, tn.Live, map[string]any{"to": r, "body": "after restart"})
	})
}
