package main

// Dashboard rules checked over plain HTTP, without a browser: forms and
// pages as a script (or an attacker) would send and read them.

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// dashSession signs in to tenantID's dashboard with a one-time link over
// HTTP and returns a client that holds the session (it follows no
// redirect) and the session's form token.
func dashSession(t *testing.T, s *server, tenantID string) (*dashRawClient, string) {
	t.Helper()
	u, _ := url.Parse(dashboardLink(t, s, tenantID))
	c := &dashRawClient{t: t, s: s, http: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	res := c.post("/dashboard/login/link", url.Values{"token": {u.Query().Get("token")}})
	for _, ck := range res.Cookies() {
		if ck.Name == "switchboard_session" {
			c.cookie = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || c.cookie == nil {
		t.Fatalf("sign-in by link: %d", res.StatusCode)
	}
	_, page := c.get("/dashboard/keys")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no form token on the keys page")
	}
	return c, m[1]
}

type dashRawClient struct {
	t      *testing.T
	s      *server
	http   *http.Client
	cookie *http.Cookie
}

func (c *dashRawClient) do(req *http.Request) *http.Response {
	c.t.Helper()
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return res
}

func (c *dashRawClient) get(path string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.s.URL+path, nil)
	res := c.do(req)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (c *dashRawClient) post(path string, form url.Values) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.s.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res := c.do(req)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// postFile posts a multipart form with fields and a file field "file".
func (c *dashRawClient) postFile(path string, fields map[string]string, file string) int {
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
	res := c.do(req)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func TestDashboardHTTP(t *testing.T) {
	t.Parallel()
	runShared(t, nil, []sharedCase{
		{"multipart import needs the form token", dashMultipartToken},
		{"contact search stays in the tenant and environment", dashSearchIsolation},
		{"sign out everywhere", dashSignOutEverywhere},
	})
}

// A multipart form (the contacts import) without the session's form token
// is refused with 403 and imports nothing, as urlencoded forms are.
func dashMultipartToken(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	c, csrf := dashSession(t, s, tn.ID)
	const csv = "phone,name\n+15005550101,Planted\n"
	if st := c.postFile("/dashboard/test/contacts/import", nil, csv); st != http.StatusForbidden {
		t.Errorf("an import without the form token: %d, want 403", st)
	}
	if st := c.postFile("/dashboard/test/contacts/import", map[string]string{"csrf": strings.Repeat("0", 64)}, csv); st != http.StatusForbidden {
		t.Errorf("an import with a wrong form token: %d, want 403", st)
	}
	if n := len(s.do(t, "GET", "/v1/contacts", tn.Test, nil).List()); n != 0 {
		t.Fatalf("%d contacts after imports without the token, want none", n)
	}
	if st := c.postFile("/dashboard/test/contacts/import", map[string]string{"csrf": csrf}, csv); st != http.StatusSeeOther { // POST-redirect-GET
		t.Errorf("an import with the token: %d", st)
	}
	if n := len(s.do(t, "GET", "/v1/contacts", tn.Test, nil).List()); n != 1 {
		t.Errorf("%d contacts after the import, want 1", n)
	}
}

// The dashboard's contact search shows the tenant's own contacts of the
// page's environment only, when another tenant and the other environment
// hold matching numbers and names.
func dashSearchIsolation(t *testing.T, s *server, db string) {
	mine, theirs := newTenant(t, db), newTenant(t, db)
	for key, name := range map[string]string{mine.Live: "Ada mine live", mine.Test: "Ada mine test", theirs.Live: "Ada theirs live", theirs.Test: "Ada theirs test"} {
		if r := s.do(t, "POST", "/v1/contacts", key, map[string]any{"phone": "+15005550123", "name": name}); r.Status != 201 {
			t.Fatalf("contact %s: %d %s", name, r.Status, r.Raw)
		}
	}
	c, _ := dashSession(t, s, mine.ID)
	for _, q := range []string{"ada", "5550123"} {
		for path, want := range map[string]string{"/dashboard/contacts": "Ada mine live", "/dashboard/test/contacts": "Ada mine test"} {
			_, page := c.get(path + "?q=" + q)
			for _, name := range []string{"Ada mine live", "Ada mine test", "Ada theirs live", "Ada theirs test"} {
				if strings.Contains(page, name) != (name == want) {
					t.Errorf("search %q on %s: shows %q: %v, want only %q", q, path, name, strings.Contains(page, name), want)
				}
			}
		}
	}
}

// Signing in again leaves the other sessions open and says so; the sessions
// page lists them and signs out one, every other, or all of them; a
// session signed out elsewhere learns why.
func dashSignOutEverywhere(t *testing.T, s *server, db string) {
	tn, other := newTenant(t, db), newTenant(t, db)
	first, _ := dashSession(t, s, tn.ID)
	second, csrf2 := dashSession(t, s, tn.ID)
	third, _ := dashSession(t, s, tn.ID)
	stranger, csrfStranger := dashSession(t, s, other.ID)

	u, _ := url.Parse(dashboardLink(t, s, tn.ID))
	res := (&dashRawClient{t: t, s: s, http: second.http}).post("/dashboard/login/link", url.Values{"token": {u.Query().Get("token")}})
	if loc := res.Header.Get("Location"); !strings.Contains(loc, "notice=other-sessions") {
		t.Errorf("signing in with other sessions open went to %q, want the other-sessions notice", loc)
	}
	st, page := second.get("/dashboard/sessions")
	refs := regexp.MustCompile(`name="end" value="([0-9a-f]{64})"`).FindAllStringSubmatch(page, -1)
	if st != 200 || strings.Count(page, "(this session)") != 1 || len(refs) != 3 { // the first, the third and the one just opened
		t.Fatalf("the sessions page: %d, %d others listed:\n%s", st, len(refs), page)
	}
	// Another tenant's session cannot end this tenant's sessions.
	for _, ref := range refs {
		stranger.post("/dashboard/sessions/end", url.Values{"csrf": {csrfStranger}, "end": {ref[1]}})
	}
	stranger.post("/dashboard/sessions/end", url.Values{"csrf": {csrfStranger}, "end": {"others"}})
	for _, c := range []*dashRawClient{first, third} {
		if st, _ := c.get("/dashboard/keys"); st != 200 {
			t.Fatalf("a session after another tenant tried to end it: %d", st)
		}
	}
	// Without the form token: refused.
	if res := second.post("/dashboard/sessions/end", url.Values{"end": {"others"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("sign out everywhere without the form token: %d", res.StatusCode)
	}
	res = second.post("/dashboard/sessions/end", url.Values{"csrf": {csrf2}, "end": {"others"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out every other session: %d", res.StatusCode)
	}
	for _, c := range []*dashRawClient{first, third} {
		req, _ := http.NewRequest("GET", s.URL+"/dashboard/keys", nil)
		res := c.do(req)
		res.Body.Close()
		if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "ended=elsewhere") {
			t.Errorf("a session signed out from another: %d to %q", res.StatusCode, loc)
		}
	}
	if st, _ := second.get("/dashboard/keys"); st != 200 {
		t.Errorf("the session that signed the others out: %d", st)
	}
	if st, _ := stranger.get("/dashboard/keys"); st != 200 {
		t.Errorf("another tenant's session: %d", st)
	}
	// Everywhere, this one included.
	res = second.post("/dashboard/sessions/end", url.Values{"csrf": {csrf2}, "end": {"all"}})
	if loc := res.Header.Get("Location"); !strings.Contains(loc, "ended=signed-out-everywhere") {
		t.Errorf("sign out everywhere went to %q", loc)
	}
	if st, _ := second.get("/dashboard/keys"); st != http.StatusSeeOther {
		t.Errorf("after signing out everywhere: %d", st)
	}
}

// TestDashboardPairingURL: the pairing page gives the app's URL and a QR
// code only when a phone can use them (HTTPS to an address other than the
// server's own loopback); otherwise it says what to set first, and still
// shows the code (phone-agent on the same computer can use it).
func TestDashboardPairingURL(t *testing.T) {
	t.Parallel()
	// pair adds a phone on s's dashboard and returns the page that shows
	// how to pair it, read as if the browser had reached s as host.
	pair := func(t *testing.T, s *server, host string) string {
		t.Helper()
		tn := newTenant(t, s.DB)
		c, csrf := dashSession(t, s, tn.ID)
		res := c.post("/dashboard/phones", url.Values{"csrf": {csrf}, "number": {msgFreshNumber("+1415XXXXXXX")}, "daily_limit": {"100"}})
		loc := res.Header.Get("Location")
		if res.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "flash=") {
			t.Fatalf("add a phone: %d, Location %q", res.StatusCode, loc)
		}
		req, _ := http.NewRequest("GET", s.URL+loc, nil)
		if host != "" {
			req.Host = host
		}
		res = c.do(req)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `id="pairing-code">`) {
			t.Fatalf("the pairing page: %d\n%s", res.StatusCode, b)
		}
		return string(b)
	}
	check := func(t *testing.T, what, page string, want, not []string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("%s: the pairing page does not say %q", what, w)
			}
		}
		for _, n := range not {
			if strings.Contains(page, n) {
				t.Errorf("%s: the pairing page shows %q", what, n)
			}
		}
	}
	noURL := []string{`id="server-url"`, `<svg`}
	local := startServer(t, sqliteURL(t))
	check(t, "loopback", pair(t, local, ""),
		[]string{`id="pairing-setup"`, "an address of this computer only", "--addr", "--acme-domain", "--tls-cert", "--public-url",
			`id="local-url">` + local.URL + "/api/mobile/v1<"}, noURL)
	check(t, "plain http to another host", pair(t, local, "192.168.1.20:8080"),
		[]string{`id="pairing-setup"`, "refuses plain HTTP", "--acme-domain", "--tls-cert", "--public-url",
			`id="plain-url">http://192.168.1.20:8080/api/mobile/v1<`}, append(noURL, "an address of this computer only"))
	public := startServer(t, sqliteURL(t), "--public-url", "https://sms.example.com")
	check(t, "https", pair(t, public, ""),
		[]string{`id="server-url">https://sms.example.com/api/mobile/v1<`, `<svg`}, []string{`id="pairing-setup"`})
}
