package dashboard

import (
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// After sign-in the dashboard goes only to one of its own pages: never to
// another site, nor back to a sign-in page.
func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{
		"/dashboard/keys":                 "/dashboard/keys",
		"/dashboard/test/messages?a=b":    "/dashboard/test/messages?a=b",
		"https://evil.example/dashboard/": "",
		"//evil.example/dashboard/":       "",
		"/dashboard//evil.example":        "",
		"/dashboard/\\evil.example":       "",
		"/dashboard/login?next=x":         "",
		"/docs":                           "",
		"":                                "",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// The chart stacks each day's counts in the plot area, with a top tick at
// or above the busiest day.
func TestChart(t *testing.T) {
	since := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	c := newChart(since, 3, []sb.DayCount{
		{Day: since, Status: sb.StatusDelivered, N: 7},
		{Day: since, Status: sb.StatusFailed, N: 3},
		{Day: since.AddDate(0, 0, 2), Status: sb.StatusReceived, N: 1},
		{Day: since.AddDate(0, 0, 9), Status: sb.StatusDelivered, N: 50}, // outside the span
	})
	if c.Total != 11 || len(c.Days) != 3 || c.Days[0].Total != 10 || c.Days[1].Total != 0 {
		t.Fatalf("chart %+v", c)
	}
	if top := c.Ticks[len(c.Ticks)-1].Label; top < 10 {
		t.Errorf("top tick %d below the busiest day's 10", top)
	}
	bars := c.Days[0].Bars
	if len(bars) != 2 || bars[0].Y+bars[0].H != c.Bottom || bars[1].Y+bars[1].H != bars[0].Y || bars[1].Y < c.Top {
		t.Errorf("day 1's bars do not stack in the plot: %+v", bars)
	}
	if !c.Days[2].Labeled || c.Days[1].Labeled || !c.Days[0].Labeled {
		t.Errorf("labels: every other day, the last included")
	}
	for n, want := range map[int]int{0: 4, 4: 4, 5: 8, 9: 20, 21: 40, 39: 40, 41: 80, 1001: 2000} {
		if got := niceCeiling(n); got != want {
			t.Errorf("niceCeiling(%d) = %d, want %d", n, got, want)
		}
	}
}

// A QR code has the quiet zone around the symbol and draws its modules.
func TestQR(t *testing.T) {
	q, err := newQR("Switchboard phone pairing\nAPI URL: https://sms.example.com/api/mobile/v1\nCode: 12345678")
	if err != nil {
		t.Fatal(err)
	}
	if (q.Size-8-21)%4 != 0 || q.Size < 8+21 || q.Path == "" {
		t.Errorf("a QR code of %d modules across (quiet zone included)", q.Size)
	}
}

// The form token is tied to the session id.
func TestCSRFToken(t *testing.T) {
	a, b := csrfToken("session-a"), csrfToken("session-b")
	if a == b || len(a) != 64 || a != csrfToken("session-a") {
		t.Errorf("tokens %q and %q", a, b)
	}
}

// A flash opens only with the session that sealed it, and only under the
// id it was sealed for.
func TestFlashSeal(t *testing.T) {
	f := &flash{Notice: "hi", Key: &createdKey{Name: "k", Text: "svc_live_secret"}}
	sealed, err := seal("session-a", "id-1", f)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "svc_live_secret") {
		t.Fatalf("the sealed flash shows the key: %s", sealed)
	}
	got, err := unseal("session-a", "id-1", sealed)
	if err != nil || got.Key.Text != "svc_live_secret" || got.Notice != "hi" {
		t.Fatalf("unseal: %+v %v", got, err)
	}
	if _, err := unseal("session-b", "id-1", sealed); err == nil {
		t.Errorf("another session opened the flash")
	}
	if _, err := unseal("session-a", "id-2", sealed); err == nil {
		t.Errorf("the flash opened under another id")
	}
}

// TestSetupFor: the pairing page gives a phone a URL only when the app
// takes it and a phone can reach it: HTTPS, to a name or address other
// than this computer's.
func TestSetupFor(t *testing.T) {
	for base, want := range map[string]*pairingSetup{
		"https://sms.example.com":       nil,
		"https://sms.example.com:8443":  nil,
		"https://192.168.1.20:8443":     nil,
		"https://[2001:db8::1]:8443":    nil,
		"http://sms.example.com":        {},
		"http://192.168.1.20:8080":      {},
		"http://127.0.0.1:8080":         {Loopback: true},
		"http://127.0.0.2:8080":         {Loopback: true},
		"https://127.0.0.1:8443":        {Loopback: true},
		"http://[::1]:8080":             {Loopback: true},
		"http://[::ffff:127.0.0.1]:80":  {Loopback: true},
		"http://localhost:8080":         {Loopback: true},
		"https://LocalHost.:8443":       {Loopback: true},
		"https://app.localhost":         {Loopback: true},
		"http://0.0.0.0:8080":           {Loopback: true},
		"http://[::]:8080":              {Loopback: true},
		"https://localhost.example.com": nil,
		"not a url":                     {},
	} {
		got := setupFor(base, false)
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Errorf("setupFor(%q) = %+v, want %+v", base, got, want)
		}
	}
	if got := setupFor("http://127.0.0.1:8080", true); got == nil || !got.PublicURL || !got.Loopback {
		t.Errorf("setupFor of a loopback --public-url: %+v", got)
	}
}
