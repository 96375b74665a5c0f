package main

// The dashboard's pages of a console: sending a message, templates,
// contacts and phones changed and deleted, a webhook changed, its secret
// rotated, a test event, recovery and the bodies in its log; times in the
// browser's zone; the same pages without JavaScript; and every page of
// another tenant or environment not found.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// submit clicks the submit button of the form whose action ends with
// action, and waits for next on the page that answers (the notices and
// errors of the page before are removed first, so that they are not
// taken for the answer's).
func (b *tab) submit(action, next string) {
	b.t.Helper()
	b.do("clear the notices", chromedp.Evaluate[chromedp.Void](`document.querySelectorAll(".notice, .error").forEach(e => e.remove())`))
	b.click(`form[method=post][action$="`+action+`"] button[type=submit]`, next)
}

// fill types v into the field sel, replacing what it holds.
func (b *tab) fill(sel, v string) {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	steps := []chromedp.Action[chromedp.Void]{chromedp.Evaluate[chromedp.Void](`document.querySelector(` + string(q) + `).value = ""`)}
	if v != "" {
		steps = append(steps, chromedp.SendKeys(chromedp.CSS(sel), v))
	}
	b.do("fill "+sel, steps...)
}

// Sending from the dashboard: the API's rules and errors, then the
// message's page, which follows it to delivered.
func dashSend(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	s.do(t, "POST", "/v1/templates", tn.Test, map[string]any{"name": "shipped", "body": "Hi {{name}}, your order has shipped."})
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/test/send", `#send-form`)
	b.fill("#s-to", "12345")
	b.fill("#s-body", "hello")
	b.submit("/send", ".error")
	if msg := b.text(".error"); !strings.Contains(msg, "E.164") {
		t.Errorf("an invalid number: %q", msg)
	}
	if v := eval[string](b, `document.querySelector("#s-body").value`); v != "hello" {
		t.Errorf("the form lost what was typed: %q", v)
	}
	// A template with a missing value: the API's MISSING_TEMPLATE_VAR.
	b.fill("#s-to", "+15005550006")
	b.fill("#s-body", "")
	b.do("choose the template", chromedp.SetValue(chromedp.CSS("#s-template"), "shipped"))
	b.submit("/send", ".error")
	if msg := b.text(".error"); !strings.Contains(msg, "{{name}}") {
		t.Errorf("a missing template value: %q", msg)
	}
	b.fill("#s-data", "name=Ada")
	b.submit("/send", "#message-status")
	if n := b.text(".notice"); !strings.Contains(n, "accepted") {
		t.Errorf("after sending: %q", n)
	}
	// The message's page says what carried it.
	if ch, eng := b.text("#message-channel"), b.text("#message-engine"); ch == "" || eng != "simulator" {
		t.Errorf("the message's channel %q and engine %q", ch, eng)
	}
	id := strings.TrimPrefix(eval[string](b, `location.pathname`), "/dashboard/test/messages/")
	m := s.do(t, "GET", "/v1/messages/"+id, tn.Test, nil)
	if m.Status != http.StatusOK || m.Data()["body"] != "Hi Ada, your order has shipped." || m.Data()["template"] != "shipped" {
		t.Fatalf("the message sent: %d %s", m.Status, m.Raw)
	}
	b.shoot("send-sent")
	eventually(t, 30*time.Second, "the message to be delivered", func() bool {
		return s.do(t, "GET", "/v1/messages/"+id, tn.Test, nil).Data()["status"] == "delivered"
	})
	// Sent from a live session, it is a live message of the tenant's phone.
	b.open("/dashboard/send?to=%2B15005550006", `#send-form`)
	b.fill("#s-body", "live from the dashboard")
	b.do("choose the phone", chromedp.SetValue(chromedp.CSS("#s-from"), tn.Phone.Number))
	b.submit("/send", "#message-status")
	id = strings.TrimPrefix(eval[string](b, `location.pathname`), "/dashboard/messages/")
	if m := s.do(t, "GET", "/v1/messages/"+id, tn.Live, nil); m.Data()["from"] != tn.Phone.Number || m.Data()["livemode"] != true {
		t.Errorf("the live message: %s", m.Raw)
	}
}

// Templates: created, listed, deleted; a bad one is refused with the
// API's reason.
func dashTemplates(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/test/templates", `#templates`)
	b.fill("#t-name", "welcome")
	b.fill("#t-body", "Hello {{ first name")
	b.submit("/templates", ".error")
	if msg := b.text(".error"); !strings.Contains(msg, "not a valid template") {
		t.Errorf("a bad template: %q", msg)
	}
	b.fill("#t-body", "Hello {{first_name}}, welcome aboard.")
	b.submit("/templates", ".notice")
	if row := b.text("#templates tbody"); !strings.Contains(row, "welcome") || !strings.Contains(row, "first_name") {
		t.Errorf("the templates: %q", row)
	}
	l := s.do(t, "GET", "/v1/templates", tn.Test, nil).List()
	if len(l) != 1 || l[0]["name"] != "welcome" {
		t.Fatalf("the API's templates: %v", l)
	}
	b.shoot("templates")
	if n := len(s.do(t, "GET", "/v1/templates", tn.Live, nil).List()); n != 0 {
		t.Errorf("a test template is among the live ones")
	}
	b.click(`#templates a[href$="/delete"]`, `form[action$="/delete"] button.danger`)
	b.click(`form[action$="/delete"] button.danger`, ".notice")
	if n := len(s.do(t, "GET", "/v1/templates", tn.Test, nil).List()); n != 0 {
		t.Errorf("%d templates after the delete", n)
	}
}

// Contacts: added, changed, deleted by clicking; a duplicate names the
// contact that has the phone.
func dashContactPages(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/test/contacts", `#contacts`)
	b.fill("#c-phone", "+1 500 555 0030")
	b.fill("#c-name", "Ada")
	b.fill("#c-fields", "plan=gold\ncity=London")
	b.submit("/contacts", "#opted-out")
	path := eval[string](b, `location.pathname`)
	id := strings.TrimPrefix(path, "/dashboard/test/contacts/")
	c := s.do(t, "GET", "/v1/contacts/"+id, tn.Test, nil).Data()
	if c["phone"] != "+15005550030" || c["name"] != "Ada" || c["fields"].(map[string]any)["city"] != "London" {
		t.Fatalf("the contact added: %v", c)
	}
	b.shoot("contact")
	b.fill("#c-name", "Ada Lovelace")
	b.fill("#c-fields", "plan=platinum")
	b.submit("/contacts/"+id, ".notice")
	c = s.do(t, "GET", "/v1/contacts/"+id, tn.Test, nil).Data()
	if c["name"] != "Ada Lovelace" || len(c["fields"].(map[string]any)) != 1 || c["fields"].(map[string]any)["plan"] != "platinum" {
		t.Fatalf("the contact changed: %v", c)
	}
	// A second contact with the same phone.
	b.open("/dashboard/test/contacts", `#contacts`)
	b.fill("#c-phone", "+15005550030")
	b.submit("/contacts", ".error")
	if msg := b.text(".error"); !strings.Contains(msg, id) {
		t.Errorf("a duplicate phone: %q, want the existing contact's id", msg)
	}
	b.open(path+"/delete", `form[action$="/delete"] button.danger`)
	b.click(`form[action$="/delete"] button.danger`, ".notice")
	if r := s.do(t, "GET", "/v1/contacts/"+id, tn.Test, nil); r.Status != http.StatusNotFound {
		t.Errorf("the deleted contact: %d", r.Status)
	}
}

// Phones: limits changed and the phone deleted, through the API's store
// calls; the test environment cannot change them.
func dashPhoneEdit(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/phones", `#phones`)
	b.click(`#phones a[href="/dashboard/phones/`+tn.Phone.ID+`"]`, `#ph-daily`)
	b.fill("#ph-daily", "0")
	b.submit("/phones/"+tn.Phone.ID, ".error")
	b.fill("#ph-daily", "250")
	b.fill("#ph-rate", "20")
	b.submit("/phones/"+tn.Phone.ID, ".notice")
	p := s.do(t, "GET", "/v1/phones/"+tn.Phone.ID, tn.Live, nil).Data()
	if p["daily_limit"] != 250.0 || p["rate_limit"] != 20.0 {
		t.Fatalf("the phone's limits: %v", p)
	}
	b.shoot("phone")
	b.fill("#ph-daily", "")
	b.submit("/phones/"+tn.Phone.ID, ".notice")
	if p := s.do(t, "GET", "/v1/phones/"+tn.Phone.ID, tn.Live, nil).Data(); p["daily_limit"] != nil {
		t.Errorf("an empty daily limit: %v, want none", p["daily_limit"])
	}
	b.open("/dashboard/test/phones/"+tn.Phone.ID, `#phone-status`)
	if n := eval[int](b, `document.querySelectorAll("#ph-daily").length`); n != 0 {
		t.Errorf("the test environment offers to change a phone")
	}
	b.open("/dashboard/phones/"+tn.Phone.ID+"/delete", `form[action$="/delete"] button.danger`)
	b.click(`form[action$="/delete"] button.danger`, ".notice")
	if r := s.do(t, "GET", "/v1/phones/"+tn.Phone.ID, tn.Live, nil); r.Status != http.StatusNotFound {
		t.Errorf("the deleted phone: %d", r.Status)
	}
}

// A webhook's page: changed (url, events, retry policy), its secret
// rotated and shown once, a test event delivered with its request and
// response bodies in the log, failed deliveries recovered.
func dashWebhookPage(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	var up atomic.Bool
	var got atomic.Value
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got.Store(r.Header.Get("X-Service-Event") + " " + string(body))
		if !up.Load() {
			http.Error(w, `{"error":"maintenance until noon"}`, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"received":true}`)
	}))
	defer hook.Close()
	id := s.do(t, "POST", "/v1/webhooks", tn.Test, map[string]any{"url": hook.URL + "/old", "events": []string{"message.failed"},
		"secret": "a-secret-of-20-chars"}).Data()["id"].(string)

	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/test/webhooks/"+id, `#log`)
	b.fill("#wh-url", hook.URL+"/hooks")
	b.do("choose the events and policy", chromedp.Click(chromedp.CSS(`#ev-message\.received`)), chromedp.Click(chromedp.CSS(`#rp-extended`)))
	b.submit("/webhooks/"+id, ".notice")
	w := s.do(t, "GET", "/v1/webhooks/"+id, tn.Test, nil).Data()
	if w["url"] != hook.URL+"/hooks" || w["retry_policy"] != "extended" || len(w["events"].([]any)) != 2 {
		t.Fatalf("the webhook changed: %v", w)
	}

	// A test event, which the endpoint refuses: its request body, and what
	// the endpoint answered, are in the log.
	b.do("choose the test event", chromedp.SetValue(chromedp.CSS("#test-event"), "message.received"))
	b.submit("/test", ".notice")
	b.do("wait for the attempt", chromedp.WaitVisible(chromedp.CSS(`#log details.response`)))
	log := eval[string](b, `document.querySelector("#log").textContent`)
	for _, want := range []string{"test event", `"event":"message.received"`, "maintenance until noon", "503"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not show %q: %s", want, log)
		}
	}
	if ev, _ := got.Load().(string); !strings.HasPrefix(ev, "message.received {") {
		t.Errorf("the endpoint got %q", ev)
	}
	b.shoot("webhook-test-event")

	// Rotate the secret: the new one is shown once, and both sign.
	b.submit("/secret", "#new-secret")
	secret := eval[string](b, `document.querySelector("#new-secret").value`)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the new secret: %q", secret)
	}
	if w := s.do(t, "GET", "/v1/webhooks/"+id, tn.Test, nil).Data(); w["previous_secret_expires_at"] == nil {
		t.Errorf("after a rotation the old secret does not sign: %v", w)
	}
	b.shoot("webhook-secret")
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#log")))
	if n := eval[int](b, `document.querySelectorAll("#new-secret").length`); n != 0 {
		t.Errorf("the secret is shown again after a reload")
	}

	// A failed delivery (standard retries, to end fast), then recovered.
	s.do(t, "PATCH", "/v1/webhooks/"+id, tn.Test, map[string]any{"retry_policy": "standard"})
	s.do(t, "POST", "/v1/test/inbound", tn.Test, map[string]any{"from": "+15005550123", "body": "hello"})
	var failed string
	eventually(t, 60*time.Second, "the delivery to fail", func() bool {
		for _, d := range s.do(t, "GET", "/v1/webhooks/"+id+"/deliveries", tn.Test, nil).List() {
			if d["status"] == "failed" && d["event"] == "message.received" {
				failed = d["id"].(string)
			}
		}
		return failed != ""
	})
	up.Store(true)
	b.do("choose the window", chromedp.SetValue(chromedp.CSS("#recover-since"), "1h"))
	b.submit("/recover", ".notice")
	if n := b.text(".notice"); !regexp.MustCompile(`^\d+ failed deliver(y is|ies are) being sent again`).MatchString(n) {
		t.Errorf("after recovering: %q", n)
	}
	eventually(t, 30*time.Second, "the recovered delivery to succeed", func() bool {
		for _, d := range s.do(t, "GET", "/v1/webhooks/"+id+"/deliveries", tn.Test, nil).List() {
			if d["id"] == failed {
				return d["status"] == "succeeded"
			}
		}
		return false
	})
	b.open("/dashboard/test/webhooks/"+id, "#log")
	b.shoot("webhook-page")
}

// Times are written in UTC, and shown in the browser's zone when the
// script runs; without it every page still works: the forms, with their
// redirects, and times in UTC.
func dashTimesAndNoScript(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	if _, err := chromedp.Call(b.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"}); err != nil {
		t.Fatal(err)
	}
	b.signInByLink(tn.ID)
	b.open("/dashboard/keys", `#keys time`)
	shown := b.text(`#keys time`)
	utc := eval[string](b, `document.querySelector("#keys time").getAttribute("data-utc")`)
	if !strings.HasSuffix(utc, " UTC") || !strings.Contains(shown, "GMT+9") {
		t.Errorf("a time in Tokyo shows %q (UTC %q)", shown, utc)
	}

	nojs := newTab(t, browser, s)
	if _, err := chromedp.Call(nojs.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	nojs.signInByLink(tn.ID)
	nojs.open("/dashboard/keys", `#keys time`)
	if shown := nojs.text(`#keys time`); !strings.HasSuffix(shown, " UTC") {
		t.Errorf("without script a time shows %q, want UTC", shown)
	}
	nojs.fill("#key-name", "no script")
	nojs.submit("/keys", "#new-key")
	if visible := eval[bool](nojs, `!document.querySelector("button[data-copy]").hidden`); visible {
		t.Errorf("without script the copy button shows, and cannot work")
	}
	if key := eval[string](nojs, `document.querySelector("#new-key").value`); !strings.HasPrefix(key, "svc_live_") {
		t.Errorf("without script the new key: %q", key)
	}
	nojs.open("/dashboard/test/send", `#send-form`)
	nojs.fill("#s-to", "+15005550006")
	nojs.fill("#s-body", "sent without script")
	nojs.submit("/send", "#message-status")
	nojs.shoot("message-no-script")
}

// Every page and form of a tenant's resource answers not found to another
// tenant and to the other environment, and changes nothing.
func dashIsolationPages(t *testing.T, _ context.Context, s *server) {
	mine, theirs := newTenant(t, s.DB), newTenant(t, s.DB)
	tpl := s.do(t, "POST", "/v1/templates", theirs.Test, map[string]any{"name": "theirs", "body": "theirs"}).Data()["id"].(string)
	contact := s.do(t, "POST", "/v1/contacts", theirs.Test, map[string]any{"phone": "+15005550040", "name": "theirs"}).Data()["id"].(string)
	hook := s.do(t, "POST", "/v1/webhooks", theirs.Test, map[string]any{"url": "http://127.0.0.1:9/theirs", "events": []string{"message.failed"},
		"secret": "their-secret-0123456789"}).Data()["id"].(string)
	key := s.do(t, "POST", "/v1/api-keys", theirs.Live, map[string]any{"name": "theirs"}).Data()["id"].(string)
	ownContact := s.do(t, "POST", "/v1/contacts", mine.Live, map[string]any{"phone": "+15005550041", "name": "mine, live"}).Data()["id"].(string)
	ownHook := s.do(t, "POST", "/v1/webhooks", mine.Live, map[string]any{"url": "http://127.0.0.1:9/mine", "events": []string{"message.failed"},
		"secret": "my-secret-0123456789ab"}).Data()["id"].(string)

	c := dashHTTP(t, s, mine.ID)
	for _, path := range []string{
		"/dashboard/test/templates/" + tpl + "/delete", "/dashboard/test/contacts/" + contact, "/dashboard/test/contacts/" + contact + "/delete",
		"/dashboard/test/webhooks/" + hook, "/dashboard/test/webhooks/" + hook + "/log", "/dashboard/test/webhooks/" + hook + "/delete",
		"/dashboard/phones/" + theirs.Phone.ID, "/dashboard/phones/" + theirs.Phone.ID + "/delete", "/dashboard/keys/" + key + "/revoke",
		// The other environment of my own.
		"/dashboard/test/contacts/" + ownContact, "/dashboard/test/webhooks/" + ownHook, "/dashboard/test/keys/" + dashKeyID(t, s, mine.Live) + "/revoke",
	} {
		if code, body := c.get(path); code != http.StatusNotFound || strings.Contains(body, "theirs") || strings.Contains(body, "mine, live") {
			t.Errorf("GET %s: %d, want 404 showing nothing", path, code)
		}
	}
	for path, form := range map[string]url.Values{
		"/dashboard/test/templates/" + tpl + "/delete":      {},
		"/dashboard/test/contacts/" + contact:               {"phone": {"+15005550042"}, "name": {"mine now"}},
		"/dashboard/test/contacts/" + contact + "/delete":   {},
		"/dashboard/test/webhooks/" + hook:                  {"url": {"http://127.0.0.1:9/mine"}, "events": {"message.failed"}, "retry_policy": {"standard"}},
		"/dashboard/test/webhooks/" + hook + "/secret":      {},
		"/dashboard/test/webhooks/" + hook + "/test":        {"event": {"message.failed"}},
		"/dashboard/test/webhooks/" + hook + "/recover":     {"since": {"24h"}},
		"/dashboard/test/webhooks/" + hook + "/delete":      {},
		"/dashboard/phones/" + theirs.Phone.ID:              {"daily_limit": {"1"}},
		"/dashboard/phones/" + theirs.Phone.ID + "/delete":  {},
		"/dashboard/phones/" + theirs.Phone.ID + "/pairing": {},
		"/dashboard/keys/" + key + "/revoke":                {},
		"/dashboard/test/contacts/" + ownContact:            {"phone": {"+15005550043"}},
		"/dashboard/test/webhooks/" + ownHook + "/test":     {"event": {"message.failed"}},
	} {
		if code, _ := c.post(path, form); code != http.StatusNotFound {
			t.Errorf("POST %s: %d, want 404", path, code)
		}
	}
	// Nothing changed.
	if r := s.do(t, "GET", "/v1/templates/"+tpl, theirs.Test, nil); r.Status != http.StatusOK {
		t.Errorf("their template: %d", r.Status)
	}
	if r := s.do(t, "GET", "/v1/contacts/"+contact, theirs.Test, nil); r.Data()["name"] != "theirs" {
		t.Errorf("their contact: %s", r.Raw)
	}
	if r := s.do(t, "GET", "/v1/contacts/"+ownContact, mine.Live, nil); r.Data()["phone"] != "+15005550041" {
		t.Errorf("my live contact, through the test pages: %s", r.Raw)
	}
	if r := s.do(t, "GET", "/v1/webhooks/"+hook, theirs.Test, nil); r.Status != http.StatusOK || r.Data()["previous_secret_expires_at"] != nil {
		t.Errorf("their webhook: %s", r.Raw)
	}
	if n := len(s.do(t, "GET", "/v1/webhooks/"+hook+"/deliveries", theirs.Test, nil).List()); n != 0 {
		t.Errorf("their webhook got %d deliveries", n)
	}
	if n := len(s.do(t, "GET", "/v1/webhooks/"+ownHook+"/deliveries", mine.Live, nil).List()); n != 0 {
		t.Errorf("my live webhook got %d deliveries from the test pages", n)
	}
	if r := s.do(t, "GET", "/v1/phones/"+theirs.Phone.ID, theirs.Live, nil); r.Status != http.StatusOK || r.Data()["daily_limit"] == 1.0 {
		t.Errorf("their phone: %s", r.Raw)
	}
	if dashKeyNamed(t, s, theirs.Live, "theirs") == nil {
		t.Errorf("their key was revoked")
	}
	// My pages list none of theirs.
	for _, path := range []string{"/dashboard/test/templates", "/dashboard/test/contacts", "/dashboard/test/webhooks", "/dashboard/phones", "/dashboard/keys", "/dashboard/test/send"} {
		if code, body := c.get(path); code != http.StatusOK || strings.Contains(body, "theirs") || strings.Contains(body, theirs.Phone.Number) {
			t.Errorf("GET %s: %d, or it shows the other tenant's data", path, code)
		}
	}
	// A flash is its session's only: another session cannot take it.
	loc := c.postLocation("/dashboard/keys", url.Values{"name": {"flash"}})
	other := dashHTTP(t, s, mine.ID)
	if _, body := other.get(loc); strings.Contains(body, "svc_live_") {
		t.Errorf("another session read a new key's flash")
	}
	if _, body := c.get(loc); !strings.Contains(body, "svc_live_") {
		t.Errorf("the session's own flash does not show its key")
	}
	if _, body := c.get(loc); strings.Contains(body, "svc_live_") {
		t.Errorf("a flash is shown twice")
	}
}

// dashKeyNamed returns the key named name that key lists, or nil.
func dashKeyNamed(t *testing.T, s *server, key, name string) map[string]any {
	for _, k := range s.do(t, "GET", "/v1/api-keys", key, nil).List() {
		if k["name"] == name {
			return k
		}
	}
	return nil
}

// dashKeyID returns the id of the first key a key lists.
func dashKeyID(t *testing.T, s *server, key string) string {
	return s.do(t, "GET", "/v1/api-keys", key, nil).List()[0]["id"].(string)
}

// dashClient is a dashboard session over plain HTTP, as a script (or an
// attacker) would hold one: its cookie and its form token. It follows no
// redirect.
type dashClient struct {
	t      *testing.T
	s      *server
	hc     *http.Client
	cookie *http.Cookie // none: a client not signed in
	csrf   string
}

// dashHTTP signs in to tenantID's dashboard with a one-time link and
// returns the session, its form token read from the keys page.
func dashHTTP(t *testing.T, s *server, tenantID string) *dashClient {
	t.Helper()
	u, _ := url.Parse(dashboardLink(t, s, tenantID))
	c := &dashClient{t: t, s: s, hc: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	res := c.postAsIs("/dashboard/login/link", url.Values{"token": {u.Query().Get("token")}})
	for _, ck := range res.Cookies() {
		if ck.Name == "switchboard_session" {
			c.cookie = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || c.cookie == nil {
		t.Fatalf("sign-in by link: %d, session cookie %v", res.StatusCode, c.cookie)
	}
	_, page := c.get("/dashboard/keys")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form token on the keys page")
	}
	c.csrf = m[1]
	return c
}

// do sends req with the session's cookie and returns the response and its
// body, read.
func (c *dashClient) do(req *http.Request) (*http.Response, string) {
	c.t.Helper()
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// postAsIs posts form as it is: without the form token, unless form has
// one.
func (c *dashClient) postAsIs(path string, form url.Values) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.s.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, _ := c.do(req)
	return res
}

// postFile posts a multipart form with fields (the form token not added)
// and a file field "file".
func (c *dashClient) postFile(path string, fields map[string]string, file string) int {
	c.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("file", "contacts.csv")
	io.WriteString(fw, file)
	mw.Close()
	req, _ := http.NewRequest("POST", c.s.URL+path, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, _ := c.do(req)
	return res.StatusCode
}

func (c *dashClient) get(path string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.s.URL+path, nil)
	res, body := c.do(req)
	return res.StatusCode, body
}

// postRes posts form with the session's form token.
func (c *dashClient) postRes(path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	form.Set("csrf", c.csrf)
	req, _ := http.NewRequest("POST", c.s.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

func (c *dashClient) post(path string, form url.Values) (int, string) {
	c.t.Helper()
	res, body := c.postRes(path, form)
	return res.StatusCode, body
}

// postLocation posts a form that must answer with a redirect, and returns
// where to.
func (c *dashClient) postLocation(path string, form url.Values) string {
	c.t.Helper()
	res, body := c.postRes(path, form)
	if res.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("POST %s: %d, want 303: %s", path, res.StatusCode, body)
	}
	return res.Header.Get("Location")
}
