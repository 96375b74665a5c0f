package main

// End-to-end tests of the chat channel (docs/chat.md): the real server with
// a providers file whose RBM agents are the fake of provider/rbm/rbmtest,
// a real HTTP server on loopback, and an SMS number at the fake Twilio of
// provider/twilio/twiliotest for what goes by SMS.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/ops"
	"github.com/switchboard/switchboard/provider/rbm"
	"github.com/switchboard/switchboard/provider/rbm/rbmtest"
	"github.com/switchboard/switchboard/provider/twilio/twiliotest"
)

const (
	rbmAgent = "switchboard-test-agent"
	rbmToken = "rbm-client-token-7d1e4a" // read from RBM_TOKEN: never logged
	// Recipients: never in quiet hours (the simulator's magic numbers, which
	// live traffic sends to the fakes like any other).
	rcsCapable    = "+15005550001"
	rcsNotCapable = "+15005550002"
)

type chatCase struct {
	rbm       *rbmtest.Server
	tw        *twiliotest.Server
	s         *server
	providers string
}

// startChatCase starts the fake RBM API and Twilio, and the server with a
// providers file of three links: "rcs", an RBM agent tenants may bind
// themselves; "private", another only the operator binds; "tw", Twilio.
// extra are more serve flags.
func startChatCase(t *testing.T, db string, extra ...string) *chatCase {
	t.Helper()
	c := &chatCase{rbm: rbmtest.New(rbmAgent), tw: &twiliotest.Server{AccountSID: twilioSID, AuthToken: twilioToken}}
	t.Cleanup(c.rbm.Close)
	c.tw.Start()
	t.Cleanup(c.tw.Close)
	key := filepath.Join(t.TempDir(), "rbm-key.json")
	if err := os.WriteFile(key, c.rbm.KeyFile(), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := func(name string, bindable bool) map[string]any {
		l := map[string]any{"name": name, "type": "rbm", "agent_id": rbmAgent, "base_url": c.rbm.URL,
			"service_account_file_env": "RBM_SA", "webhook_client_token_env": "RBM_TOKEN"}
		if bindable {
			l["tenants_may_bind"] = true
		}
		return l
	}
	c.providers = writeProviders(t, agent("rcs", true), agent("private", false),
		map[string]any{"name": "tw", "type": "twilio", "base_url": c.tw.URL(), "account_sid": twilioSID, "auth_token_env": "TW_TOKEN"})
	env := map[string]string{"RBM_SA": key, "RBM_TOKEN": rbmToken, "TW_TOKEN": twilioToken}
	c.s = startServerEnv(t, db, func(k string) string { return env[k] },
		append([]string{"--providers", c.providers, "--public-url", "http://" + publicHost, hookAllowPrivate}, extra...)...)
	c.tw.Client = twiliotest.MapHost(publicHost+":80", strings.TrimPrefix(c.s.URL, "http://"))
	return c
}

// phoneAdd binds number to link for tenant with the operator's command,
// and returns the phone's id.
func (c *chatCase) phoneAdd(t *testing.T, db, tenantID, number, link string, args ...string) string {
	t.Helper()
	var ph struct{ ID, Kind string }
	out := cli(t, db, append([]string{"phone", "add", "--tenant", tenantID, "--number", number, "--provider", link, "--providers", c.providers}, args...)...)
	if err := json.Unmarshal([]byte(out), &ph); err != nil || ph.ID == "" {
		t.Fatalf("phone add printed %s", out)
	}
	return ph.ID
}

// waitPhone waits until the tenant's phone is online.
func (c *chatCase) waitPhone(t *testing.T, key, id string) map[string]any {
	t.Helper()
	var d map[string]any
	eventually(t, 30*time.Second, "phone "+id+" online", func() bool {
		r := c.s.do(t, "GET", "/v1/phones/"+id, key, nil)
		d = r.Data()
		return r.Status == http.StatusOK && d["status"] == "online"
	})
	return d
}

// Binding a chat engine through the API: only an engine the operator lets
// tenants bind; the same answer for an unknown name, an engine only the
// operator binds, and a carrier link; Android-only fields refused; the
// number unique within the tenant only; a test key refused.
func TestChatEngineBinding(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		c := startChatCase(t, db)
		s := c.s
		tn, other := msgTenant(t, db), msgTenant(t, db)
		number := msgFreshNumber("+1650555XXXX")

		d := phoneCreate(t, s, tn.Live, map[string]any{"number": number, "provider": "rcs"})
		if d["kind"] != "rbm" || d["provider"] != "rcs" || d["number"] != number || d["pairing"] != nil || d["device"] != nil ||
			len(d["channels"].([]any)) != 1 || d["channels"].([]any)[0] != "chat" || d["daily_limit"] != 1000.0 {
			t.Fatalf("bound: %v", d)
		}
		id := d["id"].(string)
		if got := c.waitPhone(t, tn.Live, id); got["kind"] != "rbm" || got["provider"] != "rcs" {
			t.Errorf("GET: %v", got)
		}
		awaitLog(t, s, "chat engine bound by its tenant", map[string]any{"tenant_id": tn.ID, "phone_id": id, "link": "rcs"})

		// One answer for what is not an engine the tenant may bind.
		var first string
		for _, p := range []string{"private", "tw", "nope", ""} {
			r := s.do(t, "POST", "/v1/phones", tn.Live, map[string]any{"number": msgFreshNumber("+1650555XXXX"), "provider": p})
			msgWantErr(t, r, 400, "VALIDATION_ERROR", "provider")
			msg, _ := r.Body["error"].(string)
			if !strings.Contains(msg, "rcs") || strings.Contains(msg, "private") || strings.Contains(msg, `"tw"`) {
				t.Errorf("provider %q: %q (want the engines there are, rcs, and no other link)", p, msg)
			}
			if first == "" {
				first = msg
			} else if msg != first {
				t.Errorf("provider %q answers %q, provider private %q: the answers tell them apart", p, msg, first)
			}
		}
		for _, f := range []map[string]any{{"sim_number": 1}, {"warmup": map[string]any{"start": 5, "days": 3}},
			{"quarantine_policy": nil}, {"device_phone_id": id}} {
			body := map[string]any{"number": msgFreshNumber("+1650555XXXX"), "provider": "rcs"}
			var field string
			for k, v := range f {
				body[k], field = v, k
			}
			msgWantErr(t, s.do(t, "POST", "/v1/phones", tn.Live, body), 400, "VALIDATION_ERROR", field)
		}
		msgWantErr(t, s.do(t, "POST", "/v1/phones", tn.Live, map[string]any{"number": "+1650", "provider": "rcs"}), 400, "INVALID_PHONE_NUMBER", "number")
		msgWantErr(t, s.do(t, "POST", "/v1/phones", tn.Test, map[string]any{"number": msgFreshNumber("+1650555XXXX"), "provider": "rcs"}), 403, "FORBIDDEN", "")

		// The number again: 409 naming the phone; another tenant binds it.
		r := s.do(t, "POST", "/v1/phones", tn.Live, map[string]any{"number": number, "provider": "rcs"})
		msgWantErr(t, r, 409, "DUPLICATE_PHONE", "")
		if det, _ := r.Body["details"].(map[string]any); det["existing_id"] != id {
			t.Errorf("details: %v", r.Body)
		}
		if d := phoneCreate(t, s, other.Live, map[string]any{"number": number, "provider": "rcs", "daily_limit": nil, "rate_limit": 30}); d["kind"] != "rbm" ||
			d["daily_limit"] != nil || d["rate_limit"] != 30.0 {
			t.Errorf("another tenant's binding of the number: %v", d)
		}
		// Another tenant's carrier number: the answer never tells it exists.
		carrierNumber := ops.SimulatedNumber()
		c.phoneAdd(t, db, other.ID, carrierNumber, "tw")
		phoneCreate(t, s, tn.Live, map[string]any{"number": carrierNumber, "provider": "rcs"})
		// A test key reads the phone.
		if got := phoneGet(t, s, tn.Test, id); got["provider"] != "rcs" {
			t.Errorf("with the test key: %v", got)
		}

		// The dashboard's phones page offers the same engines, in live mode.
		dash := dashHTTP(t, s, tn.ID)
		csrf := dash.csrf
		if code, page := dash.get("/dashboard/phones"); code != 200 || !strings.Contains(page, `id="bind-form"`) ||
			!strings.Contains(page, `<option value="rcs"`) || strings.Contains(page, `value="private"`) || strings.Contains(page, `value="tw"`) {
			t.Errorf("the phones page: %d, offers rcs only? %v", code, strings.Contains(page, `<option value="rcs"`))
		}
		if code, page := dash.get("/dashboard/test/phones"); code != 200 || strings.Contains(page, `id="bind-form"`) {
			t.Errorf("the test-mode phones page (%d) offers to bind a number", code)
		}
		if res := dash.postAsIs("/dashboard/test/phones/bind", url.Values{"csrf": {csrf}, "number": {msgFreshNumber("+1650555XXXX")}, "provider": {"rcs"}}); res.StatusCode != http.StatusForbidden {
			t.Errorf("binding in test mode: %d", res.StatusCode)
		}
		for _, p := range []string{"private", "tw", "nope"} {
			if res := dash.postAsIs("/dashboard/phones/bind", url.Values{"csrf": {csrf}, "number": {msgFreshNumber("+1650555XXXX")}, "provider": {p}}); res.StatusCode != http.StatusBadRequest {
				t.Errorf("the dashboard binds provider %q: %d", p, res.StatusCode)
			}
		}
		// Refused, the page says why above the binding form and keeps what
		// was typed.
		req, _ := http.NewRequest("POST", s.URL+"/dashboard/phones/bind",
			strings.NewReader(url.Values{"csrf": {csrf}, "number": {number}, "provider": {"rcs"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if res, page := dash.do(req); res.StatusCode != http.StatusBadRequest || !strings.Contains(page, `value="`+strings.Replace(number, "+", "&#43;", 1)+`"`) ||
			!regexp.MustCompile(`id="form-error">[^<]+</p>\s*<form[^>]*id="bind-form"`).MatchString(page) {
			t.Errorf("the dashboard binds a number the tenant has: %d\n%s", res.StatusCode, page)
		}
		dashNumber := msgFreshNumber("+1650555XXXX")
		res := dash.postAsIs("/dashboard/phones/bind", url.Values{"csrf": {csrf}, "number": {dashNumber}, "provider": {"rcs"}})
		if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/dashboard/phones/") {
			t.Fatalf("bind on the dashboard: %d, Location %q", res.StatusCode, loc)
		}
		var bound map[string]any
		for _, p := range s.do(t, "GET", "/v1/phones", tn.Live, nil).List() {
			if p["number"] == dashNumber {
				bound = p
			}
		}
		if bound == nil || bound["kind"] != "rbm" || bound["provider"] != "rcs" || bound["channels"].([]any)[0] != "chat" {
			t.Errorf("bound on the dashboard: %v", bound)
		}
	})
}

// A tenant bound to an RBM agent (through the operator's command, or
// through the API) and with an SMS number: chat goes through the agent,
// auto asks the agent about each recipient and goes by SMS where RCS does
// not reach, chat to a number RCS does not reach fails; the agent's signed
// DELIVERED and READ events deliver the message and set read_at, and the
// webhooks fire; switchboard_messages_total counts by engine.
func TestChatEngineEndToEnd(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		c := startChatCase(t, db)
		s := c.s
		c.rbm.Script(rcsCapable, rbmtest.Capable)
		c.rbm.Script(rcsNotCapable, rbmtest.NotCapable)

		for _, via := range []string{"cli", "api"} {
			t.Run(via, func(t *testing.T) {
				tn := msgTenant(t, db)
				chatNumber, smsNumber := msgFreshNumber("+1650555XXXX"), ops.SimulatedNumber()
				link := "private"
				var chatID string
				if via == "cli" {
					chatID = c.phoneAdd(t, db, tn.ID, chatNumber, link, "--channels", "chat")
				} else {
					link = "rcs"
					chatID = phoneCreate(t, s, tn.Live, map[string]any{"number": chatNumber, "provider": link})["id"].(string)
				}
				smsID := c.phoneAdd(t, db, tn.ID, smsNumber, "tw")
				if p := c.waitPhone(t, tn.Live, chatID); p["kind"] != "rbm" || p["provider"] != link {
					t.Fatalf("chat phone: %v", p)
				}
				c.waitPhone(t, tn.Live, smsID)
				hooks := newHookReceiver(t, nil)
				registerHook(t, s, tn.Live, hooks.URL, hookEvents...)

				send := func(to, channel, body string) map[string]any {
					t.Helper()
					r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": to, "body": body, "channel": channel})
					if r.Status != http.StatusAccepted {
						t.Fatalf("send %s to %s: %d %s", channel, to, r.Status, r.Raw)
					}
					return r.Data()
				}
				get := func(id string) map[string]any {
					t.Helper()
					r := s.do(t, "GET", "/v1/messages/"+id, tn.Live, nil)
					if r.Status != http.StatusOK {
						t.Fatalf("get %s: %d %s", id, r.Status, r.Raw)
					}
					return r.Data()
				}
				agentSent := func(body string) rbmtest.Sent {
					t.Helper()
					var got rbmtest.Sent
					eventually(t, 30*time.Second, "the agent to send "+body, func() bool {
						for _, m := range c.rbm.Sent() {
							if m.Text == body {
								got = m
								return true
							}
						}
						return false
					})
					return got
				}

				// chat and auto to an RCS-capable number: the agent.
				chatBody, autoBody := "chat via "+via, "auto chat via "+via
				explicit, auto := send(rcsCapable, "chat", chatBody), send(rcsCapable, "auto", autoBody)
				for _, m := range []map[string]any{explicit, auto} {
					if m["channel"] != "chat" || m["from"] != chatNumber {
						t.Errorf("to an RCS number: %v", m)
					}
				}
				// auto to a number RCS does not reach: SMS, from the SMS number.
				smsBody := "auto sms via " + via
				bySMS := send(rcsNotCapable, "auto", smsBody)
				if bySMS["channel"] != "sms" || bySMS["from"] != smsNumber {
					t.Errorf("auto to a number without RCS: %v", bySMS)
				}
				eventually(t, 30*time.Second, "Twilio to take "+smsBody, func() bool { _, ok := c.tw.Find(smsBody); return ok })
				if got := get(bySMS["message_id"].(string)); got["engine"] != "twilio" || got["channel"] != "sms" {
					t.Errorf("the SMS: %v", got)
				}
				// chat to a number RCS does not reach: the agent's 404 fails it.
				failBody := "chat nowhere via " + via
				nowhere := send(rcsNotCapable, "chat", failBody)
				nowhereID := nowhere["message_id"].(string)
				eventually(t, 30*time.Second, "the chat message to a number without RCS to fail", func() bool { return get(nowhereID)["status"] == "failed" })

				// The agent sent both chat messages with their ids as UUIDs.
				ids := map[string]string{}
				for _, m := range []struct {
					msg  map[string]any
					body string
				}{{explicit, chatBody}, {auto, autoBody}} {
					id := m.msg["message_id"].(string)
					sent := agentSent(m.body)
					if sent.To != rcsCapable || sent.MessageID != rbm.MessageUUID(id) {
						t.Errorf("the agent sent %+v for %s", sent, id)
					}
					ids[id] = sent.MessageID
					eventually(t, 30*time.Second, "message "+id+" sent", func() bool { return get(id)["status"] == "sent" })
				}

				// The user's phone reports them delivered, then read.
				events := s.URL + "/api/providers/" + link + "/events"
				for _, kind := range []string{"DELIVERED", "READ"} {
					for _, uuid := range ids {
						if code, err := rbmtest.Post(events, rbmToken, c.rbm.UserEvent(kind, rcsCapable, uuid)); err != nil || code != http.StatusOK {
							t.Fatalf("%s event: %d %v", kind, code, err)
						}
					}
				}
				// A forged event changes nothing.
				if code, _ := rbmtest.Post(events, "not-the-token", c.rbm.UserEvent("READ", rcsNotCapable, rbm.MessageUUID(nowhereID))); code != http.StatusForbidden {
					t.Errorf("a forged event: %d, want 403", code)
				}
				for id := range ids {
					got := get(id)
					if got["status"] != "delivered" || got["engine"] != "rbm" || got["channel"] != "chat" || got["read_at"] == nil ||
						got["delivered_at"] == nil || got["from"] != chatNumber || got["fallback"] != nil {
						t.Errorf("after DELIVERED and READ: %v", got)
					}
				}
				if got := get(nowhereID); got["engine"] != "rbm" || got["read_at"] != nil {
					t.Errorf("the failed chat message: %v", got)
				}

				// The webhooks: delivered for both chat messages, failed for the one.
				want := map[string]string{nowhereID: "message.failed"}
				for id := range ids {
					want[id] = "message.delivered"
				}
				eventually(t, 30*time.Second, "the webhooks", func() bool {
					got := map[string]string{}
					for _, r := range hooks.requests() {
						p := r.payload(t)
						id, _ := p["message_id"].(string)
						if _, ok := want[id]; ok {
							got[id], _ = p["event"].(string)
							if p["from"] != chatNumber || p["channel"] != "chat" {
								t.Errorf("webhook payload: %v", p)
							}
						}
					}
					for id, ev := range want {
						if got[id] != ev {
							return false
						}
					}
					return true
				})
			})
		}
		awaitMetric(t, s, `switchboard_messages_total{engine="rbm",outcome="delivered"}`, 4)
		awaitMetric(t, s, `switchboard_messages_total{engine="rbm",outcome="failed"}`, 2)
		if got := metric(scrape(t, s), `switchboard_messages_total{engine="simulator",outcome="delivered"}`); got != 0 {
			t.Errorf("simulator deliveries: %v", got)
		}
		if strings.Contains(s.logs.String(), rbmToken) {
			t.Error("the log shows the RBM client token")
		}
	})
}
