package twilio_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/twilio"
	"github.com/switchboard/switchboard/provider/twilio/twiliotest"
	"github.com/switchboard/switchboard/sqlstore"
)

const (
	accountSID = "AC0123456789abcdef0123456789abcdef"
	authToken  = "tok-9f8e7d"
)

// fixture is a tenant with a phone on the Twilio link "tw", a fake Twilio,
// and the link, its callbacks served at its public URL.
type fixture struct {
	ctx   context.Context
	db    *sqlstore.DB
	tn    *sb.Tenant
	phone *sb.Phone
	fake  *twiliotest.Server
	link  *twilio.Link
	pub   *httptest.Server
}

func newFixture(t *testing.T, cfg carrier.Config, opt twilio.Options) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{ctx: ctx}
	var err error
	if f.db, err = sqlstore.Open(ctx, dbtest.SQLite(t)); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	f.tn = &sb.Tenant{ID: sb.NewID(), Name: "t", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now}
	if err := f.db.CreateTenant(ctx, f.tn); err != nil {
		t.Fatal(err)
	}
	f.phone = &sb.Phone{ID: sb.NewID(), TenantID: f.tn.ID, Number: "+15551230088", Kind: sb.PhoneTwilio, Link: "tw", Channels: []string{sb.ChannelSMS},
		Status: sb.PhoneOnline, CreatedAt: now}
	if err := f.db.AddPhone(ctx, f.phone, nil); err != nil {
		t.Fatal(err)
	}
	f.fake = &twiliotest.Server{AccountSID: accountSID, AuthToken: authToken}
	f.fake.Start()
	var h http.Handler
	f.pub = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	cfg.Name, cfg.Type, cfg.BaseURL, cfg.AccountSID, cfg.AuthToken = "tw", carrier.TypeTwilio, f.fake.URL(), accountSID, carrier.Secret(authToken)
	opt.PublicURL = f.pub.URL
	f.link = twilio.New(cfg, f.db, opt)
	h = f.link
	done := make(chan struct{})
	go func() { f.link.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; f.pub.Close(); f.fake.Close(); f.db.Close() })
	waitFor(t, "the link up", f.link.Up)
	return f
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) send(t *testing.T, to, body string) *sb.Message {
	t.Helper()
	m := &sb.Message{ID: sb.NewID(), TenantID: f.tn.ID, Env: sb.Live, Direction: sb.Outbound, To: to, Body: body, Channel: sb.ChannelSMS,
		Status: sb.StatusQueued, CreatedAt: time.Now().UTC()}
	if err := f.db.AcceptSend(f.ctx, &sb.Send{Message: m, From: f.phone.Number}); err != nil {
		t.Fatal(err)
	}
	if err := f.link.Send(f.ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) message(t *testing.T, id string) *sb.Message {
	t.Helper()
	m, err := f.db.Message(f.ctx, f.tn.ID, sb.Live, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNoRetryAfterFinal: Twilio answers 500 but has the message, and its
// delivered callback comes while the link waits to retry: the retry is not
// sent (a second text, a second charge).
func TestNoRetryAfterFinal(t *testing.T) {
	f := newFixture(t, carrier.Config{}, twilio.Options{BackoffMin: 4 * time.Second})
	var first twiliotest.Message
	f.fake.OnMessage = func(m *twiliotest.Message) twiliotest.Reply {
		first = *m
		return twiliotest.Reply{Status: 500, Code: 20500, Text: "Internal Server Error"}
	}
	m := f.send(t, "+15005550001", "once only")
	waitFor(t, "the first request", func() bool { return f.fake.Attempts() == 1 })
	if code, err := f.fake.Callback(f.ctx, first, "delivered", ""); err != nil || code != http.StatusNoContent {
		t.Fatalf("callback: %d %v", code, err)
	}
	if got := f.message(t, m.ID).Status; got != sb.StatusDelivered {
		t.Fatalf("after the callback: %s", got)
	}
	waitFor(t, "the link to let the message go", func() bool { return f.link.Held() == 0 })
	if n := f.fake.Attempts(); n != 1 {
		t.Fatalf("%d requests for a message delivered after the first", n)
	}
}

// TestNoRetryAfterAcceptedWithoutSID: a 2xx without a sid is Twilio having
// the message: it is sent, and not sent again.
func TestNoRetryAfterAcceptedWithoutSID(t *testing.T) {
	f := newFixture(t, carrier.Config{}, twilio.Options{BackoffMin: 50 * time.Millisecond})
	f.fake.OnMessage = func(*twiliotest.Message) twiliotest.Reply { return twiliotest.Reply{NoSID: true} }
	m := f.send(t, "+15005550001", "no sid")
	waitFor(t, "the message sent", func() bool { return f.message(t, m.ID).Status == sb.StatusSent })
	waitFor(t, "the link to let the message go", func() bool { return f.link.Held() == 0 })
	time.Sleep(200 * time.Millisecond) // four back-offs' worth
	if n := f.fake.Attempts(); n != 1 {
		t.Fatalf("%d requests for a message Twilio took", n)
	}
	// Its callback, which names it by its URL, settles it.
	msg, _ := f.fake.Find("no sid")
	if code, err := f.fake.Callback(f.ctx, msg, "delivered", ""); err != nil || code != http.StatusNoContent {
		t.Fatalf("callback: %d %v", code, err)
	}
	if got := f.message(t, m.ID).Status; got != sb.StatusDelivered {
		t.Fatalf("after the callback: %s", got)
	}
}

// TestTwilioTPS: the link's tps spaces its requests: 11 messages at 20 a
// second take at least half a second.
func TestTwilioTPS(t *testing.T) {
	f := newFixture(t, carrier.Config{TPS: 20, Window: 50}, twilio.Options{})
	for i := range 11 {
		f.send(t, "+15005550001", fmt.Sprintf("tps %d", i))
	}
	waitFor(t, "every message taken", func() bool { return len(f.fake.Messages()) == 11 })
	ms := f.fake.Messages()
	first, last := ms[0].At, ms[0].At
	for _, m := range ms {
		if m.At.Before(first) {
			first = m.At
		}
		if m.At.After(last) {
			last = m.At
		}
	}
	if span := last.Sub(first); span < 500*time.Millisecond-5*time.Millisecond {
		t.Fatalf("11 requests at tps 20 within %v", span)
	}
}

// TestCallbackOnlyOwnLink: a status callback, validly signed, to another
// link's URL settles nothing: only a message that went out over the link.
func TestCallbackOnlyOwnLink(t *testing.T) {
	f := newFixture(t, carrier.Config{}, twilio.Options{})
	m := f.send(t, "+15005550001", "mine")
	waitFor(t, "sent", func() bool { return f.message(t, m.ID).Status == sb.StatusSent })
	var other *twilio.Link
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other.ServeHTTP(w, r) }))
	defer srv.Close()
	other = twilio.New(carrier.Config{Name: "tw2", Type: carrier.TypeTwilio, BaseURL: f.fake.URL(), AccountSID: accountSID, AuthToken: carrier.Secret(authToken)},
		f.db, twilio.Options{PublicURL: srv.URL})
	msg, _ := f.fake.Find("mine")
	msg.StatusCallback = other.StatusURL(m.ID)
	code, err := f.fake.Callback(f.ctx, msg, "failed", "30003")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.message(t, m.ID).Status; got != sb.StatusSent || code != http.StatusNoContent {
		t.Fatalf("a callback to link tw2 (answered %d) made a message of link tw %s", code, got)
	}
	// The same callback to the link's own URL settles it.
	msg.StatusCallback = f.link.StatusURL(m.ID)
	if code, err := f.fake.Callback(f.ctx, msg, "failed", "30003"); err != nil || code != http.StatusNoContent {
		t.Fatalf("callback: %d %v", code, err)
	}
	if got := f.message(t, m.ID).Status; got != sb.StatusFailed {
		t.Fatalf("after its own link's callback: %s", got)
	}
}

// TestFailureReasonHidesNumbers: Twilio's error text quotes the number;
// the failure_reason (which logs carry) does not.
func TestFailureReasonHidesNumbers(t *testing.T) {
	f := newFixture(t, carrier.Config{}, twilio.Options{})
	f.fake.OnMessage = func(m *twiliotest.Message) twiliotest.Reply {
		return twiliotest.Reply{Status: 400, Code: 21211, Text: "The 'To' number " + m.To + " is not a valid phone number."}
	}
	m := f.send(t, "+15005550123", "bad to")
	waitFor(t, "failed", func() bool { return f.message(t, m.ID).Status == sb.StatusFailed })
	reason := f.message(t, m.ID).FailureReason
	if strings.Contains(reason, "5005550123") || !strings.Contains(reason, "error 21211") || !strings.Contains(reason, "[number]") {
		t.Fatalf("failure_reason %q", reason)
	}
}

func TestRedactNumbers(t *testing.T) {
	for in, want := range map[string]string{
		"The 'To' number +15005550123 is not a valid phone number.": "The 'To' number [number] is not a valid phone number.",
		"call (415) 555-0100 now":                                   "call [number] now",
		"error 21211 at 2024":                                       "error 21211 at 2024",
	} {
		if got := twilio.RedactNumbers(in); got != want {
			t.Errorf("RedactNumbers(%q) = %q, want %q", in, got, want)
		}
	}
}
