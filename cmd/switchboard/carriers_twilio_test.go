package main

// End-to-end tests of the Twilio-compatible carrier link (docs/carriers.md):
// the real server against an HTTP server in the test that implements
// the endpoints of Twilio's API the link uses and makes Twilio's signed
// requests back (provider/twilio/twiliotest).

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/ops"
	"github.com/switchboard/switchboard/provider/twilio"
	"github.com/switchboard/switchboard/provider/twilio/twiliotest"
)

const (
	twilioSID   = "AC0123456789abcdef0123456789abcdef"
	twilioToken = "tw-token-5e1f0c2b9d" // read from TW_TOKEN: never logged
	publicHost  = "switchboard.test"
)

type twilioCase struct {
	fake    *twiliotest.Server
	s       *server
	tn      tenant
	number  string
	phoneID string
}

func (c *twilioCase) smpp() *smppCase {
	return &smppCase{s: c.s, tn: c.tn, number: c.number, phoneID: c.phoneID}
}

func startTwilioCase(t *testing.T, db string) *twilioCase {
	t.Helper()
	c := &twilioCase{fake: &twiliotest.Server{AccountSID: twilioSID, AuthToken: twilioToken}}
	c.fake.Start()
	t.Cleanup(c.fake.Close)
	providers := writeProviders(t, map[string]any{"name": "tw", "type": "twilio", "base_url": c.fake.URL(), "account_sid": twilioSID,
		"auth_token_env": "TW_TOKEN", "window": 4})
	c.tn = newTenant(t, db, "--plan", "scale")
	c.number = ops.SimulatedNumber()
	var ph struct{ ID, Kind string }
	out := cli(t, db, "phone", "add", "--tenant", c.tn.ID, "--number", c.number, "--provider", "tw", "--providers", providers)
	if err := json.Unmarshal([]byte(out), &ph); err != nil || ph.Kind != "twilio" {
		t.Fatalf("phone add printed %s", out)
	}
	c.phoneID = ph.ID
	getenv := func(k string) string {
		if k == "TW_TOKEN" {
			return twilioToken
		}
		return ""
	}
	c.s = startServerEnv(t, db, getenv, "--providers", providers, "--public-url", "http://"+publicHost)
	// Twilio reaches Switchboard at its public URL: map that host onto
	// the test server, as DNS and a proxy would.
	c.fake.Client = twiliotest.MapHost(publicHost+":80", strings.TrimPrefix(c.s.URL, "http://"))
	c.smpp().waitOnline(t, true)
	return c
}

func (c *twilioCase) statusURL(id string) string {
	return "http://" + publicHost + "/api/providers/tw/status/" + id
}

func (c *twilioCase) inboundURL() string { return "http://" + publicHost + "/api/providers/tw/inbound" }

// waitAccepted waits until the fake has the message with body and the
// message is sent.
func (c *twilioCase) waitAccepted(t *testing.T, id, body string) twiliotest.Message {
	t.Helper()
	var m twiliotest.Message
	eventually(t, 30*time.Second, "Twilio took "+body, func() bool {
		var ok bool
		m, ok = c.fake.Find(body)
		return ok
	})
	eventually(t, 30*time.Second, "message sent", func() bool { return c.smpp().message(t, id)["status"] != "queued" })
	return m
}

func TestTwilioLink(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		c := startTwilioCase(t, db)
		sc := c.smpp()
		ctx := context.Background()

		var mu sync.Mutex
		tries := map[string]int{}
		triedAt := map[string][]time.Time{}
		c.fake.OnMessage = func(m *twiliotest.Message) twiliotest.Reply {
			mu.Lock()
			tries[m.Body]++
			n := tries[m.Body]
			triedAt[m.Body] = append(triedAt[m.Body], time.Now())
			mu.Unlock()
			switch {
			case strings.HasPrefix(m.Body, "invalid-to"):
				return twiliotest.Reply{Status: 400, Code: 21211, Text: "The 'To' number " + m.To + " is not a valid phone number."}
			case strings.HasPrefix(m.Body, "throttled") && n == 1:
				return twiliotest.Reply{Status: 429, Code: 20429, Text: "Too Many Requests", RetryAfter: 1}
			case strings.HasPrefix(m.Body, "server error") && n <= 2:
				return twiliotest.Reply{Status: 503, Code: 20500, Text: "Service Unavailable"}
			case strings.HasPrefix(m.Body, "callback first"):
				// Twilio's callback can come before its answer.
				return twiliotest.Reply{Before: func(sid string) {
					code, err := c.fake.Callback(ctx, twiliotest.Message{SID: sid, To: m.To, From: m.From, StatusCallback: m.StatusCallback}, "delivered", "")
					if err != nil || code != http.StatusNoContent {
						t.Errorf("early callback: %d %v", code, err)
					}
				}}
			}
			return twiliotest.Reply{}
		}

		t.Run("success", func(t *testing.T) {
			id := sc.send(t, "+15005550000", "Your Twilio code is 4711")
			m := c.waitAccepted(t, id, "Your Twilio code is 4711")
			if m.To != "+15005550000" || m.From != c.number || m.StatusCallback != c.statusURL(id) {
				t.Fatalf("Twilio got %+v", m)
			}
			if got := sc.message(t, id); got["status"] != "sent" || got["sent_at"] == nil {
				t.Fatalf("after the 201: %v", got)
			}
			for _, st := range []string{"sent", "delivered"} {
				if code, err := c.fake.Callback(ctx, m, st, ""); err != nil || code != http.StatusNoContent {
					t.Fatalf("callback %s: %d %v", st, code, err)
				}
			}
			if got := sc.message(t, id); got["status"] != "delivered" || got["delivered_at"] == nil {
				t.Fatalf("after delivered: %v", got)
			}
		})

		t.Run("a 4xx fails the message with Twilio's error", func(t *testing.T) {
			id := sc.send(t, "+15005550002", "invalid-to number")
			m := sc.waitFinal(t, id, 30*time.Second)
			want := "Twilio error 21211 (invalid 'To' phone number): The 'To' number [number] is not a valid phone number."
			if m["status"] != "failed" || m["failure_reason"] != want || m["error_code"] != "DELIVERY_FAILED" {
				t.Fatalf("message: %v", m)
			}
		})

		t.Run("429 is retried after Retry-After", func(t *testing.T) {
			id := sc.send(t, "+15005550003", "throttled once")
			c.waitAccepted(t, id, "throttled once")
			mu.Lock()
			at := triedAt["throttled once"]
			mu.Unlock()
			if len(at) != 2 || at[1].Sub(at[0]) < 900*time.Millisecond {
				t.Fatalf("tries at %v: want a second try at least 1 s (Retry-After) after the 429", at)
			}
		})

		t.Run("5xx is retried with a back-off", func(t *testing.T) {
			id := sc.send(t, "+15005550004", "server error twice")
			m := c.waitAccepted(t, id, "server error twice")
			mu.Lock()
			n := tries["server error twice"]
			mu.Unlock()
			if n != 3 {
				t.Fatalf("%d tries, want 3", n)
			}
			if l := logLines(t, c.s, "Twilio request failed: retrying"); len(l) < 2 || l[0]["level"] != "WARN" {
				t.Errorf("the failed requests' log lines: %v, want them at WARN", l)
			}
			if code, _ := c.fake.Callback(ctx, m, "delivered", ""); code != http.StatusNoContent {
				t.Fatalf("callback: %d", code)
			}
			if got := sc.message(t, id); got["status"] != "delivered" {
				t.Fatalf("message: %v", got)
			}
		})

		t.Run("undelivered with an error code", func(t *testing.T) {
			id := sc.send(t, "+15005550005", "to a handset that is off")
			m := c.waitAccepted(t, id, "to a handset that is off")
			c.fake.Callback(ctx, m, "sent", "")
			if code, _ := c.fake.Callback(ctx, m, "undelivered", "30003"); code != http.StatusNoContent {
				t.Fatalf("callback: %d", code)
			}
			got := sc.message(t, id)
			if got["status"] != "failed" || got["failure_reason"] != "Twilio status undelivered: error 30003 (unreachable destination handset)" {
				t.Fatalf("message: %v", got)
			}
		})

		t.Run("callbacks out of order", func(t *testing.T) {
			// delivered before Twilio's answer, then sent and failed late.
			id := sc.send(t, "+15005550006", "callback first")
			m := sc.waitFinal(t, id, 30*time.Second)
			if m["status"] != "delivered" {
				t.Fatalf("message: %v", m)
			}
			tm, _ := c.fake.Find("callback first")
			for _, st := range []string{"sent", "queued", "failed"} {
				if code, _ := c.fake.Callback(ctx, tm, st, "30008"); code != http.StatusNoContent {
					t.Fatalf("late %s: %d", st, code)
				}
			}
			if got := sc.message(t, id); got["status"] != "delivered" || got["failure_reason"] != nil {
				t.Fatalf("a late callback changed a delivered message: %v", got)
			}
			// delivered, then the earlier statuses.
			id2 := sc.send(t, "+15005550007", "out of order")
			m2 := c.waitAccepted(t, id2, "out of order")
			for _, st := range []string{"delivered", "sending", "sent"} {
				c.fake.Callback(ctx, m2, st, "")
			}
			if got := sc.message(t, id2); got["status"] != "delivered" {
				t.Fatalf("message: %v", got)
			}
		})

		t.Run("forged callbacks are refused and store nothing", func(t *testing.T) {
			id := sc.send(t, "+15005550008", "forgery target")
			m := c.waitAccepted(t, id, "forgery target")
			form := url.Values{"MessageSid": {m.SID}, "MessageStatus": {"delivered"}, "AccountSid": {twilioSID}}
			// Signed with another token.
			if code, _, _ := c.fake.Post(ctx, c.statusURL(id), form, "not-the-token"); code != http.StatusForbidden {
				t.Fatalf("wrong token: %d", code)
			}
			// Signed for another message's URL, replayed to this one.
			other := sc.send(t, "+15005550008", "another message")
			c.waitAccepted(t, other, "another message")
			req, _ := http.NewRequest("POST", c.statusURL(id), strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Twilio-Signature", signedFor(c.statusURL(other), form))
			if res, err := c.fake.Client.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
				t.Fatalf("replayed signature: %v %v", res, err)
			}
			// No signature at all.
			req, _ = http.NewRequest("POST", c.statusURL(id), strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if res, err := c.fake.Client.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
				t.Fatalf("unsigned: %v %v", res, err)
			}
			if got := sc.message(t, id); got["status"] != "sent" {
				t.Fatalf("a forged callback changed the message: %v", got)
			}
			// A forged inbound text stores nothing.
			before := len(inbound(t, c))
			code, _, _ := c.fake.Inbound(ctx, c.inboundURL(), "+15005550009", c.number, "forged STOP", "not-the-token")
			if code != http.StatusForbidden {
				t.Fatalf("forged inbound: %d", code)
			}
			if after := len(inbound(t, c)); after != before {
				t.Fatalf("a forged inbound text was stored")
			}
		})

		t.Run("inbound texts", func(t *testing.T) {
			from := "+15005550009"
			form := url.Values{"MessageSid": {"SMfeedface00000000000000000000001"}, "AccountSid": {twilioSID}, "From": {from},
				"To": {c.number}, "Body": {"Hello from a handset"}, "NumMedia": {"0"}}
			for range 2 { // Twilio retries: the same MessageSid stores one text
				code, body, err := c.fake.InboundForm(ctx, c.inboundURL(), form)
				if err != nil || code != http.StatusOK || !strings.Contains(body, "<Response></Response>") {
					t.Fatalf("inbound: %d %q %v", code, body, err)
				}
			}
			got := 0
			for _, m := range inbound(t, c) {
				if m["from"] == from && m["body"] == "Hello from a handset" {
					got++
					if m["to"] != c.number || m["status"] != "received" {
						t.Errorf("inbound: %v", m)
					}
				}
			}
			if got != 1 {
				t.Fatalf("%d inbound texts stored, want 1", got)
			}
			if code, _, _ := c.fake.Inbound(ctx, c.inboundURL(), from, c.number, "STOP", ""); code != http.StatusOK {
				t.Fatalf("STOP: %d", code)
			}
			r := c.s.do(t, "POST", "/v1/messages", c.tn.Live, map[string]any{"to": from, "body": "after stop", "from": c.number, "channel": "sms"})
			if r.Code() != "RECIPIENT_OPTED_OUT" {
				t.Fatalf("send after STOP: %d %s", r.Status, r.Raw)
			}
		})

		t.Run("no secret in the logs", func(t *testing.T) {
			if strings.Contains(c.s.logs.String(), twilioToken) {
				t.Fatal("the server logged the auth token")
			}
			if !strings.Contains(c.s.logs.String(), `"msg":"Twilio link up"`) {
				t.Fatal("no info line for the link")
			}
		})
	})
}

func signedFor(target string, form url.Values) string {
	return twilio.Signature(twilioToken, target, form)
}

func inbound(t *testing.T, c *twilioCase) []map[string]any {
	t.Helper()
	r := c.s.do(t, "GET", "/v1/messages?direction=inbound&limit=100", c.tn.Live, nil)
	return r.List()
}
