package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/provider/smpp/smsc"
)

// TestProvidersFileRefused: serve refuses a providers file with a problem,
// with one line that names it, and no secret in it.
func TestProvidersFileRefused(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-secret-value"
	getenv := func(k string) string {
		if k == "C1_PASSWORD" || k == "TW_TOKEN" {
			return secret
		}
		return ""
	}
	smppOK := `{"name": "c1", "type": "smpp", "addr": "127.0.0.1:2775", "system_id": "acme", "password_env": "C1_PASSWORD"}`
	twOK := `{"name": "tw", "type": "twilio", "base_url": "https://api.twilio.com", "account_sid": "AC1", "auth_token_env": "TW_TOKEN", "tps": 10}`
	cases := []struct {
		name, file string
		args       []string
		want       string
	}{
		{"unknown field", `{"links": [{"name": "c1", "type": "smpp", "addr": "127.0.0.1:2775", "system_id": "acme", "passwrd": "x"}]}`, nil,
			`providers file: links[0] ("c1"): unknown field "passwrd" for a smpp link`},
		{"a twilio field on an smpp link", `{"links": [{"name": "c1", "type": "smpp", "addr": "h:1", "system_id": "a", "base_url": "https://x"}]}`, nil,
			`unknown field "base_url" for a smpp link`},
		{"unknown top-level field", `{"links": [], "version": 2}`, nil, `providers file: unknown field "version"`},
		{"duplicate name", `{"links": [` + smppOK + `, ` + smppOK + `]}`, nil, `providers file: links[1] ("c1"): duplicate name "c1" (links[0] has it too)`},
		{"missing environment variable", `{"links": [{"name": "c1", "type": "smpp", "addr": "h:1", "system_id": "a", "password_env": "C9_PASSWORD"}]}`, nil,
			`providers file: links[0] ("c1"): password_env: the environment variable C9_PASSWORD is not set`},
		{"no auth_token_env", `{"links": [{"name": "tw", "type": "twilio", "base_url": "https://api.twilio.com", "account_sid": "AC1"}]}`, nil,
			`auth_token_env is required`},
		{"unknown type", `{"links": [{"name": "x", "type": "smtp"}]}`, nil, `links[0] ("x"): "type" must be "smpp", "twilio", "rbm" or "imessage"`},
		{"bad name", `{"links": [{"name": "Carrier One", "type": "smpp"}]}`, nil, `links[0]: name "Carrier One"`},
		{"tps not a whole number", `{"links": [{"name": "c1", "type": "smpp", "addr": "h:1", "system_id": "a", "tps": 2.5}]}`, nil,
			`field "tps" must be a whole number`},
		{"not JSON", `{"links": [`, nil, `providers file: not a JSON object`},
		{"twilio without --public-url", `{"links": [` + twOK + `]}`, nil, `the twilio link "tw" needs --public-url`},
		{"twilio over plain http", `{"links": [{"name": "tw", "type": "twilio", "base_url": "http://api.twilio.example", "account_sid": "AC1", "auth_token_env": "TW_TOKEN"}]}`,
			[]string{"--public-url", "https://sms.example.com"}, `providers file: links[0] ("tw"): base_url http://api.twilio.example is plain http`},
		{"no such file", "", []string{"--providers", "/nonexistent/providers.json"}, `--providers: open /nonexistent/providers.json`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				path := filepath.Join(t.TempDir(), "providers.json")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append([]string{"--providers", path}, args...)
			}
			var stderr syncBuffer // the process default logger: see idp_test.go
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--database", sqliteURL(t)}, args...), getenv, &stderr, &stderr)
			if err == nil {
				t.Fatal("serve started")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q, want one line with %q", msg, tc.want)
			}
			if strings.Contains(msg+stderr.String(), secret) {
				t.Fatal("a secret was shown")
			}
		})
	}
}

// TestPhoneAddProvider: phone add --provider binds a number to a link of
// the providers file; the phone's kind is the link's type.
func TestPhoneAddProvider(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	tn := newTenant(t, db)
	providers := writeProviders(t, smppLink("127.0.0.1:1", nil),
		map[string]any{"name": "tw", "type": "twilio", "base_url": "https://api.twilio.com", "account_sid": "AC1", "auth_token_env": "TW_TOKEN"},
		map[string]any{"name": "rcs", "type": "rbm", "agent_id": "agent-1", "service_account_file_env": "RBM_SA", "webhook_client_token_env": "RBM_TOKEN"})
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"phone", "add", "--tenant", tn.ID, "--number", "+15550100001", "--provider", "tw", "--providers", providers,
		"--database", db}, noEnv, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	// It holds no link, so it does not say the phone is online.
	out := stdout.String()
	for _, want := range []string{`"kind":"twilio"`, `"provider":"tw"`, `"channels":["sms"]`, `"status":"offline"`} {
		if !strings.Contains(out, want) {
			t.Errorf("phone add printed %s, want %s", out, want)
		}
	}
	if note := stderr.String(); !strings.Contains(note, `serve's link "tw" is up`) || !strings.Contains(note, "GET /v1/phones") || strings.Count(note, "\n") != 1 {
		t.Errorf("phone add --provider said %q, want one line on where to see the phone's status", note)
	}
	// A chat engine's phone: the tenant's number, sending chat.
	out = cli(t, db, "phone", "add", "--tenant", tn.ID, "--number", "+15550100003", "--provider", "rcs", "--providers", providers, "--channels", "chat")
	for _, want := range []string{`"kind":"rbm"`, `"provider":"rcs"`, `"channels":["chat"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("phone add printed %s, want %s", out, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "c2", "--providers", providers}, `--provider "c2" is not a link of`},
		{[]string{"--provider", "c1"}, `--provider needs the providers file`},
		{[]string{"--provider", "c1", "--providers", providers, "--channels", "sms,chat"}, `a carrier phone sends sms only`},
		{[]string{"--provider", "rcs", "--providers", providers, "--channels", "sms"}, `its phones send chat only`},
	} {
		_, err := cliErr(db, append([]string{"phone", "add", "--tenant", tn.ID, "--number", "+15550100002"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("phone add %v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestSMPPLinkDown: while its link is down a carrier phone is offline,
// sends from it answer 503 NO_PHONE_AVAILABLE, and what was queued for it
// stays queued and goes out once the SMSC is back.
func TestSMPPLinkDown(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	c := startSMPPCase(t, db, nil)
	addr := c.smsc.Addr()
	// Messages the SMSC takes but does not answer before it goes away.
	c.smsc.SetOnSubmit(func(*smsc.Submit) smsc.Action { return smsc.Action{Lose: true} })
	id := c.send(t, "+15005550000", "queued while down")
	c.smsc.Close()
	c.waitOnline(t, false)
	r := c.s.do(t, "POST", "/v1/messages", c.tn.Live, map[string]any{"to": "+15005550000", "body": "x", "from": c.number, "channel": "sms"})
	if r.Status != http.StatusServiceUnavailable || r.Code() != "NO_PHONE_AVAILABLE" {
		t.Fatalf("send while down: %d %s", r.Status, r.Raw)
	}
	if m := c.message(t, id); m["status"] != "queued" {
		t.Fatalf("a message waiting for the link: %v", m)
	}
	// A link's failures are warnings for the operator.
	if l := logLines(t, c.s, "SMPP link down"); len(l) == 0 || l[0]["level"] != "WARN" {
		t.Fatalf("the drop's log lines: %v, want one at WARN", l)
	}
	back := &smsc.Server{SystemID: smscSystemID, Password: smscPassword}
	var err error
	for range 50 { // the port is free again once the old listener closed
		if err = back.StartAt(addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	c.waitOnline(t, true)
	if m := c.waitFinal(t, id, 90*time.Second); m["status"] != "delivered" {
		t.Fatalf("message: %v", m)
	}
	if n := textsOf(back.Submits())["queued while down"]; n != 1 {
		t.Fatalf("the SMSC that came back got the text %d times", n)
	}
	for _, l := range logLines(t, c.s, "SMPP bind failed; binding again") {
		if l["level"] != "WARN" {
			t.Errorf("a failed bind logged at %v, want WARN", l["level"])
		}
	}
}
