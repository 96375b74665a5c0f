package main

// The dashboard, driven in a real headless Chromium through chromedp
// against the real server: sign-in, every page's main action done by
// clicking, CSRF, tenant isolation, and a screenshot of each page (a test
// artifact; docs/dashboard.md shows some of them).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds the browser: $SWITCHBOARD_CHROMIUM, or chromium on the
// PATH (Debian's package installs /usr/bin/chromium).
func chromiumPath() string {
	if p := os.Getenv("SWITCHBOARD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts a headless Chromium for the test, with a fresh profile,
// and stops it when the test ends. Without a browser the test is skipped,
// saying how to install one, except in CI (CI set), where it fails.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		msg := "no Chromium: install it with `apt-get install -y --no-install-recommends chromium` (or set SWITCHBOARD_CHROMIUM) to run the dashboard's browser tests"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		// The machine's network is closed: Chromium's own connections
		// would only fail and slow it down.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil { // starts the browser, with no deadline
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	return bctx
}

// tab is one browser profile (its own cookies) in a tab, and the test that
// drives it.
type tab struct {
	t   *testing.T
	ctx context.Context
	s   *server
}

// newTab opens a tab in a fresh browser context: a visitor with no cookies.
func newTab(t *testing.T, browser context.Context, s *server) *tab {
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return &tab{t: t, ctx: ctx, s: s}
}

// waitFor bounds every step: generous, since a loaded 2-core machine runs
// Chromium, the server and the other tests at once.
const waitFor = 60 * time.Second

// do runs steps, failing the test with what was being done.
func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		b.t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, body)
	}
}

// open navigates to a path of the server and waits for sel.
func (b *tab) open(path, sel string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.s.URL+path), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// click clicks sel and waits for next (a selector of what the click
// brings).
func (b *tab) click(sel, next string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(next)))
}

// text returns the text of the first element matching sel.
func (b *tab) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression.
func eval[T any](b *tab, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// screenshotDir is where screenshots go: $SWITCHBOARD_SCREENSHOTS, or a
// folder of the system's temporary directory that outlives the test.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("SWITCHBOARD_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "switchboard-dashboard-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shoot saves a PNG of the whole page as name.png.
func (b *tab) shoot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(screenshotDir(b.t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// checkAccessible checks the page's rules that a browser can see: every
// form control has a label, and nothing is wider than the viewport.
func (b *tab) checkAccessible(where string) {
	b.t.Helper()
	unlabeled := eval[[]string](b, `Array.from(document.querySelectorAll("input, select, textarea"))
		.filter(e => e.type !== "hidden" && e.labels.length === 0 && !e.getAttribute("aria-label"))
		.map(e => e.outerHTML)`)
	if len(unlabeled) > 0 {
		b.t.Errorf("%s: form controls without a label: %v", where, unlabeled)
	}
	if over := eval[bool](b, `document.documentElement.scrollWidth > window.innerWidth`); over {
		w := eval[int](b, `document.documentElement.scrollWidth`)
		b.t.Errorf("%s: the page is %d px wide, wider than the %d px viewport", where, w, eval[int](b, `window.innerWidth`))
	}
}

// signInByLink makes a sign-in link with the operator command and follows
// it, landing on the overview.
func (b *tab) signInByLink(tenantID string) {
	b.t.Helper()
	link := dashboardLink(b.t, b.s, tenantID)
	b.do("follow the sign-in link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`form[action="/dashboard/login/link"] button`)))
	b.click(`form[action="/dashboard/login/link"] button`, `#usage-h`)
}

// dashboardLink runs `switchboard dashboard link` and checks that it
// printed one line, a link to this server.
func dashboardLink(t *testing.T, s *server, tenantID string) string {
	t.Helper()
	out := cli(t, s.DB, "dashboard", "link", "--tenant", tenantID, "--public-url", s.URL)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], s.URL+"/dashboard/login/link?token=") {
		t.Fatalf("dashboard link printed %q", out)
	}
	return lines[0]
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--allow-private-webhooks")
		for _, c := range []struct {
			name string
			fn   func(t *testing.T, browser context.Context, s *server)
		}{
			{"SignInByLink", dashSignInByLink},
			{"SignInByKey", dashSignInByKey},
			{"CrossSiteFormRefused", dashCrossSite},
			{"FormTokenRequired", dashFormToken},
			{"Keys", dashKeys},
			{"Messages", dashMessages},
			{"Webhooks", dashWebhooks},
			{"Phones", dashPhones},
			{"Contacts", dashContacts},
			{"Campaigns", dashCampaigns},
			{"TenantIsolation", dashIsolation},
			{"IsolationOfEveryPage", dashIsolationPages},
			{"Send", dashSend},
			{"Templates", dashTemplates},
			{"ContactPages", dashContactPages},
			{"PhoneEdit", dashPhoneEdit},
			{"WebhookPage", dashWebhookPage},
			{"TimesAndNoScript", dashTimesAndNoScript},
			{"SuspensionEndsSessions", dashSuspension},
			{"NarrowAndZoomed", dashNarrow},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.fn(t, browser, s)
			})
		}
	})
}

// A sign-in link works once: it opens a session that reaches every page;
// used again, or altered, it is refused.
func dashSignInByLink(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	link := dashboardLink(t, s, tn.ID)
	b.do("follow the link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`form[action="/dashboard/login/link"] button`)))
	b.shoot("signin-link")
	b.click(`form[action="/dashboard/login/link"] button`, `#usage-h`)
	if got := b.text(".tenant"); got != "Test Co" {
		t.Errorf("signed in as %q", got)
	}
	b.shoot("overview-empty")

	// The same link in another browser: refused.
	other := newTab(t, browser, s)
	other.do("follow the used link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`form[action="/dashboard/login/link"] button`)))
	other.click(`form[action="/dashboard/login/link"] button`, `.error`)
	if msg := other.text(".error"); !strings.Contains(msg, "not valid") {
		t.Errorf("a used link: %q", msg)
	}
	other.open("/dashboard/keys", `input#key`) // still signed out: the sign-in page

	// A link with a wrong token: refused.
	wrong := dashboardLink(t, s, tn.ID)
	wrong = wrong[:len(wrong)-4] + "AAAA"
	other.do("follow a wrong link", chromedp.Navigate(wrong), chromedp.WaitVisible(chromedp.CSS(`form[action="/dashboard/login/link"] button`)))
	other.click(`form[action="/dashboard/login/link"] button`, `.error`)
	if msg := other.text(".error"); !strings.Contains(msg, "not valid") {
		t.Errorf("a wrong link: %q", msg)
	}

	// Sign out: the session is gone.
	b.click(`form.logout button`, `input#key`)
	b.open("/dashboard/", `input#key`)
}

// A pasted key opens a session of its tenant; a test key's session sees
// the test environment only; a wrong key is refused.
func dashSignInByKey(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	b.open("/dashboard/login", `input#key`)
	b.shoot("signin")
	b.do("paste a wrong key", chromedp.SendKeys(chromedp.CSS(`input#key`), "svc_live_"+strings.Repeat("x", 32)))
	b.click(`form[action="/dashboard/login"] button`, `.error`)
	if msg := b.text(".error"); !strings.Contains(msg, "not valid") {
		t.Errorf("a wrong key: %q", msg)
	}

	b.do("paste the live key", chromedp.SendKeys(chromedp.CSS(`input#key`), tn.Live))
	b.click(`form[action="/dashboard/login"] button`, `#usage-h`)
	if c := eval[string](b, `document.cookie`); strings.Contains(c, tn.Live) || strings.Contains(c, "switchboard_session") {
		t.Errorf("the session cookie is readable by scripts, or holds the key: %q", c)
	}
	b.open("/dashboard/test/keys", `#keys`) // a live key's session sees both

	// Revoking the key (through the API, with another key) ends the
	// session it opened.
	second := s.do(t, "POST", "/v1/api-keys", tn.Live, map[string]any{"name": "second"}).Data()["key"].(string)
	for _, k := range s.do(t, "GET", "/v1/api-keys", second, nil).List() {
		if k["name"] == "Default live key" {
			s.do(t, "DELETE", "/v1/api-keys/"+k["id"].(string), second, nil)
		}
	}
	b.open("/dashboard/keys", `input#key`)
	if msg := b.text(".notice"); !strings.Contains(msg, "revoked") {
		t.Errorf("after its key was revoked, the session: %q", msg)
	}

	tb := newTab(t, browser, s)
	tb.open("/dashboard/login", `input#key`)
	tb.do("paste the test key", chromedp.SendKeys(chromedp.CSS(`input#key`), tn.Test))
	tb.click(`form[action="/dashboard/login"] button`, `body.test #usage-h`)
	tb.open("/dashboard/keys", `.error`)
	if msg := tb.text(".error"); !strings.Contains(msg, "test environment only") {
		t.Errorf("a test key's session on a live page: %q", msg)
	}
}

// A form sent from another origin (here another port of the same host: the
// same site, so SameSite cookies do not stop it) is refused, even with the
// right form token.
func dashCrossSite(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/keys", `#keys`)
	token := eval[string](b, `document.querySelector('input[name=csrf]').value`)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/dashboard/keys"><input name="name" value="planted">
			<input name="csrf" value="%s"><button id="go" type="submit">Win a prize</button></form>`, s.URL, token)
	}))
	defer evil.Close()
	b.do("open the other site", chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("#go")))
	b.click("#go", "h1")
	if msg := b.text("main"); !strings.Contains(msg, "sent from another site") {
		t.Errorf("the cross-site form was answered with: %q", msg)
	}
	for _, k := range s.do(t, "GET", "/v1/api-keys", tn.Live, nil).List() {
		if k["name"] == "planted" {
			t.Errorf("a form from another site created a key")
		}
	}
}

// Outside a browser (no Origin or Sec-Fetch-Site headers to go by), every
// form of a session must carry the session's token.
func dashFormToken(t *testing.T, _ context.Context, s *server) {
	tn := newTenant(t, s.DB)
	link := dashboardLink(t, s, tn.ID)
	u, _ := url.Parse(link)
	noRedirect := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.PostForm(s.URL+"/dashboard/login/link", url.Values{"token": {u.Query().Get("token")}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "switchboard_session" {
			cookie = c
		}
	}
	if res.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("sign-in by link over HTTP: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode {
		t.Errorf("session cookie %+v: want HttpOnly and SameSite=Lax", cookie)
	}
	post := func(form url.Values) (int, string) {
		req, _ := http.NewRequest("POST", s.URL+"/dashboard/keys", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(cookie)
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	if code, _ := post(url.Values{"name": {"no token"}}); code != http.StatusForbidden {
		t.Errorf("a form without the token: %d, want 403", code)
	}
	if code, _ := post(url.Values{"name": {"wrong token"}, "csrf": {strings.Repeat("0", 64)}}); code != http.StatusForbidden {
		t.Errorf("a form with a wrong token: %d, want 403", code)
	}
	// The token is on the session's pages, and it works.
	req, _ := http.NewRequest("GET", s.URL+"/dashboard/keys", nil)
	req.AddCookie(cookie)
	res, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(string(page))
	if m == nil {
		t.Fatalf("no form token on the keys page")
	}
	if code, _ := post(url.Values{"name": {"with token"}, "csrf": {m[1]}}); code != http.StatusSeeOther {
		t.Errorf("a form with the token: %d, want 303 to the keys page", code)
	}
	// A multipart form (the contacts import) needs the token too.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("file", "contacts.csv")
	fw.Write([]byte("phone\n+15005550020\n"))
	mw.Close()
	req, _ = http.NewRequest("POST", s.URL+"/dashboard/contacts/import", &mp)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.AddCookie(cookie)
	res, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("a multipart form without the token: %d, want 403", res.StatusCode)
	}
	if l := s.do(t, "GET", "/v1/contacts", tn.Live, nil).List(); len(l) != 0 {
		t.Errorf("a multipart form without the token imported %d contacts", len(l))
	}
	for _, k := range s.do(t, "GET", "/v1/api-keys", tn.Live, nil).List() {
		if k["name"] == "no token" || k["name"] == "wrong token" {
			t.Errorf("a form without the right token created key %q", k["name"])
		}
	}
}

// A key is created by clicking, shown once, and works; revoked with a
// confirmation, it stops working. Last use shows "never" until it is used.
func dashKeys(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/keys", `#keys`)
	b.do("fill the key form", chromedp.SendKeys(chromedp.CSS("#key-name"), "Billing server"), chromedp.SendKeys(chromedp.CSS("#key-limit"), "30"))
	b.click(`form[action="/dashboard/keys"] button`, `#new-key`)
	key, err := chromedp.Run(b.ctx, chromedp.Value(chromedp.CSS("#new-key")))
	if err != nil || !strings.HasPrefix(key, "svc_live_") {
		t.Fatalf("the new key: %q %v", key, err)
	}
	b.shoot("keys-created")
	if hidden := eval[bool](b, `document.querySelector("button[data-copy=new-key]").hidden`); hidden {
		t.Errorf("no copy button for the new key")
	}
	// The form answered with a redirect: reloading the page shows the key
	// list again, without the key's text and without a second key.
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#keys")))
	if n := eval[int](b, `document.querySelectorAll("#new-key").length`); n != 0 {
		t.Errorf("the key's text is shown again after a reload")
	}
	if n := eval[int](b, `Array.from(document.querySelectorAll("#keys tr[data-key]")).filter(r => r.textContent.includes("Billing server")).length`); n != 1 {
		t.Errorf("%d keys named Billing server after a reload, want 1", n)
	}
	id := eval[string](b, `Array.from(document.querySelectorAll("#keys tr[data-key]")).find(r => r.textContent.includes("Billing server")).dataset.key`)
	if row := b.text(`tr[data-key="` + id + `"]`); !strings.Contains(row, "never") || !strings.Contains(row, "30/min") {
		t.Errorf("the new key's row: %q", row)
	}
	if r := s.do(t, "GET", "/v1/api-keys", key, nil); r.Status != http.StatusOK {
		t.Fatalf("the created key answers %d", r.Status)
	}
	// Shown once: the page again has no key text.
	b.open("/dashboard/keys", `#keys`)
	if n := eval[int](b, `document.querySelectorAll("#new-key").length`); n != 0 {
		t.Errorf("the key is shown again")
	}
	b.shoot("keys")

	b.click(`tr[data-key="`+id+`"] a[href$="/revoke"]`, `form[action$="/revoke"] button.danger`)
	b.shoot("keys-revoke")
	if n := eval[int](b, `document.querySelectorAll("#last-live").length`); n != 0 {
		t.Errorf("a warning that this is the last live key, with another live key left")
	}
	b.click(`form[action$="/revoke"] button.danger`, `.notice`)
	if n := eval[int](b, `document.querySelectorAll('#keys tr[data-key="`+id+`"]').length`); n != 0 {
		t.Errorf("the revoked key is still listed among the active keys")
	}
	if row := b.text(`#revoked-keys tr[data-key="` + id + `"]`); !strings.Contains(row, "Billing server") || !strings.Contains(row, "revoked") {
		t.Errorf("the revoked key's row: %q", row)
	}
	if r := s.do(t, "GET", "/v1/api-keys", key, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("the revoked key answers %d, want 401", r.Status)
	}
	// The tenant's last live key: revoking it is warned about.
	last := eval[string](b, `document.querySelector("#keys tr[data-key]").dataset.key`)
	b.open("/dashboard/keys/"+last+"/revoke", `#last-live`)
	b.shoot("keys-revoke-last")
}

// Messages: filtered by status by clicking; a failed message's page shows
// its timeline and failure_reason.
func dashMessages(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	ok := s.do(t, "POST", "/v1/messages", tn.Test, map[string]any{"to": "+15005550006", "body": "Your order has shipped"}).Data()["message_id"].(string)
	bad := s.do(t, "POST", "/v1/messages", tn.Test, map[string]any{"to": "+15005550001", "body": "This one fails"}).Data()["message_id"].(string)
	eventually(t, 30*time.Second, "the messages' outcomes", func() bool {
		a := s.do(t, "GET", "/v1/messages/"+ok, tn.Test, nil).Data()["status"]
		b := s.do(t, "GET", "/v1/messages/"+bad, tn.Test, nil).Data()["status"]
		return a == "delivered" && b == "failed"
	})
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/test/messages", `#messages`)
	if n := eval[int](b, `document.querySelectorAll("#messages tbody tr").length`); n != 2 {
		t.Errorf("%d messages listed, want 2", n)
	}
	b.shoot("messages")
	b.do("filter by status", chromedp.SetValue(chromedp.CSS("#f-status"), "failed"))
	b.click(`form.filters button`, `#filtered`)
	if rows := eval[[]string](b, `Array.from(document.querySelectorAll("#messages tbody tr")).map(r => r.textContent)`); len(rows) != 1 || !strings.Contains(rows[0], "+15005550001") {
		t.Errorf("filtered by failed: %q", rows)
	}
	b.click(`#messages tbody a`, `#failure-reason`)
	if got := b.text("#failure-reason"); got != "simulated carrier rejection" {
		t.Errorf("failure_reason %q", got)
	}
	if tl := b.text(".timeline"); !strings.Contains(tl, "Accepted and queued") || !strings.Contains(tl, "Failed") {
		t.Errorf("timeline %q", tl)
	}
	b.shoot("message-failed")
	// A number that is not E.164: said so.
	b.open("/dashboard/test/messages?number=12345", `.error`)
}

// Webhooks: an endpoint added by clicking; its failing delivery shows each
// attempt; retried by clicking, the new attempt appears.
func dashWebhooks(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	var up atomic.Bool
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !up.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()

	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/test/webhooks", `#webhooks`)
	b.do("fill the webhook form",
		chromedp.SendKeys(chromedp.CSS("#wh-url"), hook.URL+"/hooks"),
		chromedp.Click(chromedp.CSS(`#ev-message\.failed`)),
		chromedp.SendKeys(chromedp.CSS("#wh-secret"), "a-secret-of-20-chars"))
	b.click(`form[action="/dashboard/test/webhooks"] button`, `#log`)

	s.do(t, "POST", "/v1/messages", tn.Test, map[string]any{"to": "+15005550001", "body": "fails, and so does its webhook"})
	// The log refreshes itself while the delivery is retried (2 s, 4 s,
	// 8 s), until it has failed and can be retried.
	b.do("wait for the delivery to fail", chromedp.WaitVisible(chromedp.CSS(`#log .delivery form button`)))
	if n := eval[int](b, `document.querySelectorAll("#log tr.attempt").length`); n != 4 {
		t.Errorf("%d attempts shown, want 4", n)
	}
	if log := b.text("#log"); !strings.Contains(log, "503") || !strings.Contains(log, "failed") {
		t.Errorf("the log shows %q", log)
	}
	b.shoot("webhook-log-failed")

	up.Store(true)
	// The log refreshes itself: click in one step, so the button clicked
	// is the one found.
	b.do("retry", chromedp.Evaluate[chromedp.Void](`document.querySelector("#log .delivery form button").click()`), chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.do("wait for the new attempt", chromedp.WaitVisible(chromedp.CSS(`#log .delivery .s-succeeded`)))
	if n := eval[int](b, `document.querySelectorAll("#log tr.attempt").length`); n != 5 {
		t.Errorf("%d attempts after the retry, want 5", n)
	}
	if log := b.text("#log"); !strings.Contains(log, "204") {
		t.Errorf("the new attempt is not shown: %q", log)
	}
	b.shoot("webhook-log")

	b.open("/dashboard/test/", `#failing-h`)
	b.open("/dashboard/test/webhooks", `#webhooks`)
	b.shoot("webhooks")
}

// Phones: pairing a new Android phone shows a code; the server here is
// reached at a loopback address, which no phone can reach, so instead of
// a URL and a QR code the page says what to set first (the page with the
// URL and QR code is TestDashboardPairingURL's); the code pairs a device.
func dashPhones(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/phones", `#phones`)
	b.do("fill the phone form", chromedp.SendKeys(chromedp.CSS("#ph-number"), "+15557654321"), chromedp.SetValue(chromedp.CSS("#ph-daily"), "500"))
	b.click(`form[action="/dashboard/phones"] button`, `#pairing-code`)
	code := b.text("#pairing-code")
	if local := b.text("#local-url"); local != s.URL+"/api/mobile/v1" {
		t.Errorf("the server's loopback URL %q", local)
	}
	if setup := b.text("#pairing-setup"); !strings.Contains(setup, "--addr") || !strings.Contains(setup, "--public-url") {
		t.Errorf("the pairing page does not say what to set first: %q", setup)
	}
	if n := eval[int](b, `document.querySelectorAll(".qr svg, #server-url").length`); n != 0 {
		t.Errorf("a URL or QR code that no phone can use")
	}
	b.shoot("phones-pairing-setup")
	if row := b.text(`#phones`); !strings.Contains(row, "0 of 500") || !strings.Contains(row, "never") {
		t.Errorf("the phones table: %q", row)
	}
	// The code shown pairs a device; its app has a Google push token (its
	// notification channel is Auto), which the table flags.
	req, _ := http.NewRequest("POST", s.URL+"/api/mobile/v1/device", strings.NewReader(`{"name":"Pixel","pushToken":"fcm-token"}`))
	req.Header.Set("Authorization", "Code "+code)
	req.Header.Set("Content-Type", "application/json")
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var reg struct{ ID, Token string }
	json.NewDecoder(res.Body).Decode(&reg)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Errorf("pairing with the code shown: %d", res.StatusCode)
	}
	b.open("/dashboard/phones", `#phones`)
	if row := b.text(`#phones`); !strings.Contains(row, "Pixel") || !strings.Contains(row, "push token: set SSE Only") {
		t.Errorf("the paired device is not shown, with its push token: %q", row)
	}
	b.shoot("phones")
	// Switched to SSE Only, the app has no token (Gson leaves the null out).
	req, _ = http.NewRequest("PATCH", s.URL+"/api/mobile/v1/device", strings.NewReader(`{"id":"`+reg.ID+`"}`))
	req.Header.Set("Authorization", "Bearer "+reg.Token)
	req.Header.Set("Content-Type", "application/json")
	if res, err = httpClient.Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	b.open("/dashboard/phones", `#phones`)
	if row := b.text(`#phones`); !strings.Contains(row, "Pixel") || strings.Contains(row, "push token") {
		t.Errorf("after PATCH /device without a push token: %q", row)
	}
}

// Contacts: a CSV file imported by clicking, with its row report; search.
func dashContacts(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	s.do(t, "POST", "/v1/contacts", tn.Test, map[string]any{"phone": "+15005550010", "name": "Existing"})
	s.do(t, "POST", "/v1/test/inbound", tn.Test, map[string]any{"from": "+15005550011", "body": "STOP"})
	csv := filepath.Join(t.TempDir(), "contacts.csv")
	os.WriteFile(csv, []byte("phone,name,plan\n+15005550011,Ada Lovelace,gold\n+15005550010,Again,\nnot-a-number,Bob,\n+15005550012,Grace Hopper,silver\n"), 0o644)

	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/test/contacts", `#contacts`)
	b.do("choose the file", chromedp.SetUploadFiles(chromedp.CSS("#csv"), []string{csv}))
	b.click(`form[action="/dashboard/test/contacts/import"] button`, `#import-report`)
	for sel, want := range map[string]string{"#report-created": "2 created", "#report-duplicates": "1 duplicates", "#report-invalid": "1 invalid"} {
		if got := b.text(sel); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	if rep := b.text("#import-report"); !strings.Contains(rep, `phone "not-a-number" is not an E.164 number`) {
		t.Errorf("the report does not say why row 4 is invalid: %q", rep)
	}
	b.shoot("contacts-import")
	if rows := eval[int](b, `document.querySelectorAll("#contacts tbody tr").length`); rows != 3 {
		t.Errorf("%d contacts listed, want 3", rows)
	}
	if ada := eval[string](b, `Array.from(document.querySelectorAll("#contacts tbody tr")).find(r => r.textContent.includes("Ada")).textContent`); !strings.Contains(ada, "opted out") {
		t.Errorf("Ada sent STOP before the import, but her row says %q", ada)
	}
	b.do("search", chromedp.SendKeys(chromedp.CSS("#q"), "hopper"))
	b.click(`form.search button`, `#contacts`)
	b.do("wait for the search", chromedp.WaitVisible(chromedp.CSS(`form.search a`)))
	if rows := eval[[]string](b, `Array.from(document.querySelectorAll("#contacts tbody tr")).map(r => r.textContent)`); len(rows) != 1 || !strings.Contains(rows[0], "Grace Hopper") {
		t.Errorf("search for hopper: %q", rows)
	}
	b.open("/dashboard/test/contacts", `#contacts`)
	b.shoot("contacts")
}

// Campaigns: created and launched by clicking; the page follows its
// progress until it completes.
func dashCampaigns(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	b.open("/dashboard/test/campaigns", `#campaigns`)
	b.do("fill the campaign form",
		chromedp.SendKeys(chromedp.CSS("#c-name"), "Spring sale"),
		chromedp.SendKeys(chromedp.CSS("#c-body"), "Spring sale: 20% off until Sunday"),
		chromedp.Click(chromedp.CSS("#aud-to")),
		chromedp.SendKeys(chromedp.CSS("#c-numbers"), "+15005550006\n+15005550007\n+15005550008"))
	b.click(`form[action="/dashboard/test/campaigns"] button`, `#launch`)
	b.shoot("campaign-draft")
	b.click(`#launch`, `.notice`)
	b.do("watch the campaign complete", chromedp.WaitVisible(chromedp.CSS(`#campaign-status .s-completed`)))
	if got := b.text("#count-delivered"); got != "3" {
		t.Errorf("delivered %q, want 3", got)
	}
	b.shoot("campaign")
	b.open("/dashboard/test/campaigns", `#campaigns`)
	b.shoot("campaigns")
	b.open("/dashboard/test/", `#usage-h`)
	if n := eval[int](b, `document.querySelectorAll("svg.chart rect").length`); n == 0 {
		t.Errorf("the chart draws no bar for the campaign's messages")
	}
	b.shoot("overview")
}

// Another tenant's message, campaign and webhook ids answer not found, as
// if they did not exist.
func dashIsolation(t *testing.T, browser context.Context, s *server) {
	mine, theirs := newTenant(t, s.DB), newTenant(t, s.DB)
	own := s.do(t, "POST", "/v1/messages", mine.Test, map[string]any{"to": "+15005550006", "body": "mine"}).Data()["message_id"].(string)
	other := s.do(t, "POST", "/v1/messages", theirs.Test, map[string]any{"to": "+15005550006", "body": "theirs"}).Data()["message_id"].(string)
	camp := s.do(t, "POST", "/v1/campaigns", theirs.Test, map[string]any{"name": "theirs", "body": "x", "to": []string{"+15005550006"}}).Data()["id"].(string)
	b := newTab(t, browser, s)
	b.signInByLink(mine.ID)
	b.open("/dashboard/test/messages/"+own, `#message-status`)
	for _, path := range []string{"/dashboard/test/messages/" + other, "/dashboard/test/campaigns/" + camp, "/dashboard/messages/" + own} {
		b.open(path, `.error`)
		if msg := b.text(".error"); !strings.Contains(msg, "Not found") {
			t.Errorf("%s: %q", path, msg)
		}
		if body := b.text("main"); strings.Contains(body, "theirs") {
			t.Errorf("%s shows the other tenant's data", path)
		}
	}
	b.shoot("not-found")
	b.open("/dashboard/test/messages", `#messages`)
	if list := b.text("#messages"); strings.Contains(list, "theirs") || !strings.Contains(list, "mine") {
		t.Errorf("the message list: %q", list)
	}
}

// Suspending a tenant ends its sessions.
func dashSuspension(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	cli(t, s.DB, "tenant", "suspend", tn.ID)
	b.open("/dashboard/keys", `input#key`)
	if msg := b.text(".error"); !strings.Contains(msg, "suspended") {
		t.Errorf("after the suspension: %q", msg)
	}
	cli(t, s.DB, "tenant", "resume", tn.ID)
	b.open("/dashboard/keys", `input#key`) // resuming does not bring the session back
}

// Every page at 390 px wide (a phone), at 360 px and at 200% zoom (a 1280
// px window shows 640 CSS px): nothing overflows, every control has a
// label, no word of a table is broken across lines, and every status in a
// table is in view.
func dashNarrow(t *testing.T, browser context.Context, s *server) {
	tn := newTenant(t, s.DB)
	msg := s.do(t, "POST", "/v1/messages", tn.Test, map[string]any{"to": "+15005550001", "body": "A long message that wraps on a narrow screen, with a link https://example.com/a/very/long/path/that/does/not/break"}).Data()["message_id"].(string)
	for i := range 3 {
		s.do(t, "POST", "/v1/messages", tn.Test, map[string]any{"to": "+15005550006", "body": fmt.Sprintf("Your order number %d has shipped and arrives tomorrow", i)})
	}
	s.do(t, "POST", "/v1/templates", tn.Test, map[string]any{"name": "order_shipped_notification", "body": "Hi {{first_name}}, order {{order_number}} has shipped."})
	contact := s.do(t, "POST", "/v1/contacts", tn.Test, map[string]any{"phone": "+15005550050", "name": "Margaret Hamilton", "fields": map[string]any{"plan": "enterprise"}}).Data()["id"].(string)
	hook := s.do(t, "POST", "/v1/webhooks", tn.Test, map[string]any{"url": "http://127.0.0.1:9/webhooks/switchboard/receiver", "events": []string{"message.failed", "message.delivered"},
		"secret": "a-secret-of-20-chars"}).Data()["id"].(string)
	eventually(t, 30*time.Second, "the failed message", func() bool {
		return s.do(t, "GET", "/v1/messages/"+msg, tn.Test, nil).Data()["status"] == "failed"
	})
	b := newTab(t, browser, s)
	b.signInByLink(tn.ID)
	pages := []struct{ path, sel string }{
		{"/dashboard/test/", "#usage-h"}, {"/dashboard/test/keys", "#keys"}, {"/dashboard/test/messages", "#messages"},
		{"/dashboard/test/messages/" + msg, "#message-status"}, {"/dashboard/test/send", "#send-form"}, {"/dashboard/test/templates", "#templates"},
		{"/dashboard/test/webhooks", "#webhooks"}, {"/dashboard/test/webhooks/" + hook, "#log"},
		{"/dashboard/phones", "#phones"}, {"/dashboard/phones/" + tn.Phone.ID, "#phone-status"}, {"/dashboard/test/contacts", "#contacts"},
		{"/dashboard/test/contacts/" + contact, "#opted-out"}, {"/dashboard/test/campaigns", "#campaigns"},
		{"/dashboard/sessions", "#sessions"},
	}
	for _, vp := range []struct {
		name  string
		w, h  int64
		scale float64
	}{{"390px", 390, 844, 1}, {"360px", 360, 740, 1}, {"zoom200", 640, 450, 2}} {
		b.do("viewport "+vp.name, chromedp.EmulateViewport(vp.w, vp.h, chromedp.EmulateScale(vp.scale)))
		for _, p := range pages {
			b.open(p.path, p.sel)
			b.checkAccessible(p.path + " at " + vp.name)
			b.checkTables(p.path + " at " + vp.name)
		}
		b.open("/dashboard/test/messages", "#messages")
		b.shoot("messages-" + vp.name)
	}
	b.do("viewport 390px", chromedp.EmulateViewport(390, 844))
	for name, path := range map[string]string{"keys-390px": "/dashboard/test/keys", "webhook-390px": "/dashboard/test/webhooks/" + hook,
		"contacts-390px": "/dashboard/test/contacts", "message-390px": "/dashboard/test/messages/" + msg, "send-390px": "/dashboard/test/send"} {
		b.open(path, "#content")
		b.shoot(name)
	}
	b.open("/dashboard/login", "#content")
	b.checkAccessible("the sign-in page")
}

// checkTables checks what a narrow screen does to the tables of the page:
// no word of up to 20 characters is broken across two lines (longer ones,
// such as urls, may be), and every status badge is within the viewport.
func (b *tab) checkTables(where string) {
	b.t.Helper()
	broken := eval[[]string](b, `(() => {
		const out = [];
		const walk = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
		for (let n = walk.nextNode(); n; n = walk.nextNode()) {
			if (!n.parentElement.closest("table") || n.parentElement.closest(".sr, details:not([open])")) continue;
			for (const m of n.textContent.matchAll(/\S+/g)) {
				if (m[0].length > 20) continue;
				const r = document.createRange();
				r.setStart(n, m.index);
				r.setEnd(n, m.index + m[0].length);
				const tops = new Set(Array.from(r.getClientRects()).filter(x => x.width > 0).map(x => Math.round(x.top)));
				if (tops.size > 1) out.push(m[0]);
			}
		}
		return out;
	})()`)
	if len(broken) > 0 {
		b.t.Errorf("%s: words broken across lines: %q", where, broken)
	}
	cut := eval[[]string](b, `Array.from(document.querySelectorAll("main table .badge")).filter(e => {
		const r = e.getBoundingClientRect();
		return r.width > 0 && (r.left < 0 || r.right > window.innerWidth);
	}).map(e => e.textContent)`)
	if len(cut) > 0 {
		b.t.Errorf("%s: statuses outside the viewport: %q", where, cut)
	}
}
