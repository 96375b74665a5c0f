package main

// Dashboard rules checked over plain HTTP, without a browser: forms and
// pages as a script (or an attacker) would send and read them.

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

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
	c := dashHTTP(t, s, tn.ID)
	csrf := c.csrf
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
	c := dashHTTP(t, s, mine.ID)
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
	first, second, third := dashHTTP(t, s, tn.ID), dashHTTP(t, s, tn.ID), dashHTTP(t, s, tn.ID)
	stranger := dashHTTP(t, s, other.ID)
	csrf2, csrfStranger := second.csrf, stranger.csrf

	u, _ := url.Parse(dashboardLink(t, s, tn.ID))
	res := (&dashClient{t: t, s: s, hc: second.hc}).postAsIs("/dashboard/login/link", url.Values{"token": {u.Query().Get("token")}})
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
		stranger.postAsIs("/dashboard/sessions/end", url.Values{"csrf": {csrfStranger}, "end": {ref[1]}})
	}
	stranger.postAsIs("/dashboard/sessions/end", url.Values{"csrf": {csrfStranger}, "end": {"others"}})
	for _, c := range []*dashClient{first, third} {
		if st, _ := c.get("/dashboard/keys"); st != 200 {
			t.Fatalf("a session after another tenant tried to end it: %d", st)
		}
	}
	// Without the form token: refused.
	if res := second.postAsIs("/dashboard/sessions/end", url.Values{"end": {"others"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("sign out everywhere without the form token: %d", res.StatusCode)
	}
	res = second.postAsIs("/dashboard/sessions/end", url.Values{"csrf": {csrf2}, "end": {"others"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out every other session: %d", res.StatusCode)
	}
	for _, c := range []*dashClient{first, third} {
		req, _ := http.NewRequest("GET", s.URL+"/dashboard/keys", nil)
		res, _ := c.do(req)
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
	res = second.postAsIs("/dashboard/sessions/end", url.Values{"csrf": {csrf2}, "end": {"all"}})
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
		c := dashHTTP(t, s, tn.ID)
		res, _ := c.postRes("/dashboard/phones", url.Values{"number": {msgFreshNumber("+1415XXXXXXX")}, "daily_limit": {"100"}})
		loc := res.Header.Get("Location")
		if res.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "flash=") {
			t.Fatalf("add a phone: %d, Location %q", res.StatusCode, loc)
		}
		req, _ := http.NewRequest("GET", s.URL+loc, nil)
		if host != "" {
			req.Host = host
		}
		res, page := c.do(req)
		if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="pairing-code">`) {
			t.Fatalf("the pairing page: %d\n%s", res.StatusCode, page)
		}
		return page
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
