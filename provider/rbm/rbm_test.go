package rbm_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/rbm"
	"github.com/switchboard/switchboard/provider/rbm/rbmtest"
	"github.com/switchboard/switchboard/sqlstore"
)

const (
	capable     = "+15551110001"
	notCapable  = "+15551110002"
	notLaunched = "+15551110003"
	down        = "+15551110004"
	slow        = "+15551110005"
	throttled   = "+15551110006"
	token       = "client-token-0123456789"
)

type fixture struct {
	fake   *rbmtest.Server
	link   *rbm.Link
	db     *sqlstore.DB
	tenant *sb.Tenant
	phone  *sb.Phone
	events string // the link's events URL
	reg    *prometheus.Registry
}

func setup(t *testing.T) *fixture { t.Helper(); return setupOn(t, dbtest.SQLite(t)) }

// setupOn is setup on the database at url.
func setupOn(t *testing.T, url string) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fake := rbmtest.New("agent-1")
	fake.Delay = 3 * time.Second
	t.Cleanup(fake.Close)
	fake.Script(notCapable, rbmtest.NotCapable)
	fake.Script(notLaunched, rbmtest.NotLaunched)
	fake.Script(down, rbmtest.Down)
	fake.Script(slow, rbmtest.Slow)
	fake.Script(throttled, rbmtest.Throttled)
	db, err := sqlstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	tn := &sb.Tenant{ID: sb.NewID(), Name: "t", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	ph := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15551239000", Kind: sb.PhoneRBM, Link: "rcs", Channels: []string{sb.ChannelChat},
		Status: sb.PhoneOnline, CreatedAt: now}
	if err := db.AddPhone(ctx, ph, nil); err != nil {
		t.Fatal(err)
	}
	sms := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15551239001", Kind: sb.PhoneSMPP, Link: "c1", Channels: []string{sb.ChannelSMS},
		Status: sb.PhoneOnline, CreatedAt: now}
	if err := db.AddPhone(ctx, sms, nil); err != nil {
		t.Fatal(err)
	}
	cfg := carrier.Config{Name: "rcs", Type: carrier.TypeRBM, BaseURL: fake.URL, AgentID: "agent-1", Window: 4,
		ServiceAccount: carrier.Secret(fake.KeyFile()), ClientToken: token}
	reg := prometheus.NewRegistry()
	link, err := rbm.New(cfg, db, rbm.Options{Metrics: carrier.NewChatMetrics(reg), DetectTimeout: 300 * time.Millisecond, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { link.Run(ctx); close(done) }()
	web := httptest.NewServer(link)
	t.Cleanup(func() { web.Close(); cancel(); <-done; db.Close() })
	return &fixture{fake: fake, link: link, db: db, tenant: tn, phone: ph, events: web.URL + carrier.Prefix + "rcs/events", reg: reg}
}

// Detection: 200 chat, 404 sms, 403 sms, 429/5xx/timeout
// DETECTION_UNAVAILABLE; answers are cached per number; a batch asks once.
func TestDetect(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	for _, c := range []struct {
		number, want string
		err          bool
	}{
		{capable, sb.ChannelChat, false},
		{notCapable, sb.ChannelSMS, false},
		{notLaunched, sb.ChannelSMS, false},
		{down, "", true},
		{slow, "", true},
		{throttled, "", true},
	} {
		start := time.Now()
		got, err := f.link.Detect(ctx, c.number)
		if c.err {
			if sb.ErrorCode(err) != sb.CodeDetectionUnavailable {
				t.Errorf("%s: %q %v, want DETECTION_UNAVAILABLE", c.number, got, err)
			}
			if time.Since(start) > 2*time.Second {
				t.Errorf("%s: detection took %v: the timeout is not kept", c.number, time.Since(start))
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %s", c.number, got, err, c.want)
		}
	}
	asked := f.fake.Requests("capabilities")
	for range 5 {
		if got, err := f.link.Detect(ctx, capable); got != sb.ChannelChat || err != nil {
			t.Fatalf("cached: %q %v", got, err)
		}
		if got, _ := f.link.Detect(ctx, notCapable); got != sb.ChannelSMS {
			t.Fatalf("cached negative: %q", got)
		}
	}
	if n := f.fake.Requests("capabilities"); n != asked {
		t.Errorf("cached answers asked Google again: %d requests, then %d", asked, n)
	}
	// A failure is not cached: the number is asked again.
	f.fake.Script(down, rbmtest.Capable)
	if got, err := f.link.Detect(ctx, down); got != sb.ChannelChat || err != nil {
		t.Errorf("after the outage: %q %v", got, err)
	}

	// A campaign's audience: one batchGet.
	audience := []string{"+15551110101", "+15551110102", "+15551110103", capable}
	f.fake.Script("+15551110102", rbmtest.NotCapable)
	got, err := f.link.DetectMany(ctx, audience)
	if err != nil || got["+15551110101"] != sb.ChannelChat || got["+15551110102"] != sb.ChannelSMS || got[capable] != sb.ChannelChat {
		t.Fatalf("DetectMany: %v %v", got, err)
	}
	if n := f.fake.Requests("batchGet"); n != 1 {
		t.Errorf("batchGet requests: %d", n)
	}
	before := f.fake.Requests("capabilities")
	if ch, _ := f.link.Detect(ctx, "+15551110103"); ch != sb.ChannelChat || f.fake.Requests("capabilities") != before {
		t.Errorf("a number of the batch was asked again")
	}
	if f.fake.Requests("token") != 1 {
		t.Errorf("token requests: %d, want 1 (the token is reused)", f.fake.Requests("token"))
	}
}

func accept(t *testing.T, f *fixture, to string) *sb.Message { return acceptAuto(t, f, to, false) }

func acceptAuto(t *testing.T, f *fixture, to string, auto bool) *sb.Message {
	t.Helper()
	m := &sb.Message{ID: sb.NewID(), TenantID: f.tenant.ID, Env: sb.Live, Direction: sb.Outbound, To: to, Body: "Your table is ready",
		Channel: sb.ChannelChat, Status: sb.StatusQueued, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := f.db.AcceptSend(context.Background(), &sb.Send{Message: m, Auto: auto, NewContactLimit: 100}); err != nil {
		t.Fatal(err)
	}
	if m.Engine != sb.EngineRBM || m.PhoneID != f.phone.ID {
		t.Fatalf("accepted on %s (%s)", m.PhoneID, m.Engine)
	}
	return m
}

func waitMessage(t *testing.T, f *fixture, id string, ok func(*sb.Message) bool) *sb.Message {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := f.db.Message(context.Background(), f.tenant.ID, sb.Live, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %s stays %s (%s)", id, m.Status, m.FailureReason)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Sending: the message id as a UUID is the idempotency key; events
// (signed) deliver it, mark it read and bring the user's texts in.
func TestSendAndEvents(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	m := accept(t, f, capable)
	for range 2 { // handed over twice (a claim ran out): sent once
		if err := f.link.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	waitMessage(t, f, m.ID, func(m *sb.Message) bool { return m.Status == sb.StatusSent })
	if err := f.link.Send(ctx, m); err != nil { // and again after it was sent
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.fake.Requests("agentMessages") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	sent := f.fake.Sent()
	if len(sent) != 1 || sent[0].MessageID != rbm.MessageUUID(m.ID) || sent[0].To != capable || sent[0].Text != m.Body {
		t.Fatalf("the fake has %+v", sent)
	}

	// The webhook handshake, then events.
	if ok, err := rbmtest.Handshake(f.events, token); !ok || err != nil {
		t.Errorf("handshake with the right token: %v %v", ok, err)
	}
	if ok, _ := rbmtest.Handshake(f.events, "wrong"); ok {
		t.Errorf("handshake with a wrong token answered the secret")
	}
	uuid := rbm.MessageUUID(m.ID)
	if st, _ := rbmtest.Post(f.events, "not-the-token", f.fake.UserEvent("DELIVERED", capable, uuid)); st != 403 {
		t.Errorf("a badly signed event: %d, want 403", st)
	}
	if got, _ := f.db.Message(ctx, f.tenant.ID, sb.Live, m.ID); got.Status != sb.StatusSent {
		t.Fatalf("a badly signed event changed the message: %s", got.Status)
	}
	if st, err := rbmtest.Post(f.events, token, f.fake.UserEvent("DELIVERED", capable, uuid)); st != 200 || err != nil {
		t.Fatalf("DELIVERED: %d %v", st, err)
	}
	if st, _ := rbmtest.Post(f.events, token, f.fake.UserEvent("READ", capable, uuid)); st != 200 {
		t.Fatalf("READ: %d", st)
	}
	got := waitMessage(t, f, m.ID, func(m *sb.Message) bool { return m.Status == sb.StatusDelivered && m.ReadAt != nil })
	if got.Engine != sb.EngineRBM || got.From != f.phone.Number {
		t.Errorf("delivered message: engine %s from %s", got.Engine, got.From)
	}
	// A second READ (Google retries) keeps the first time.
	time.Sleep(5 * time.Millisecond)
	if st, _ := rbmtest.Post(f.events, token, f.fake.UserEvent("READ", capable, uuid)); st != 200 {
		t.Fatalf("READ again: %d", st)
	}
	if again, _ := f.db.Message(ctx, f.tenant.ID, sb.Live, m.ID); !again.ReadAt.Equal(*got.ReadAt) {
		t.Errorf("a second READ moved read_at from %v to %v", got.ReadAt, again.ReadAt)
	}

	// A user's STOP is an inbound message of the tenant that wrote to
	// them, and opts them out.
	if st, _ := rbmtest.Post(f.events, token, f.fake.UserMessage(capable, "STOP")); st != 200 {
		t.Fatalf("user message: %d", st)
	}
	in, err := f.db.Messages(ctx, f.tenant.ID, sb.Live, sb.MessageFilter{Direction: sb.Inbound}, sb.Page{Limit: 10})
	if err != nil || len(in) != 1 || in[0].Body != "STOP" || in[0].To != f.phone.Number || in[0].Channel != sb.ChannelChat || in[0].Engine != sb.EngineRBM {
		t.Fatalf("inbound: %+v %v", in, err)
	}
	if known, opted, err := f.db.Recipient(ctx, f.tenant.ID, sb.Live, capable); !known || !opted || err != nil {
		t.Errorf("after STOP: known %v opted out %v %v", known, opted, err)
	}
}

// Google's refusals fail the message with its reason; an outage is
// retried until the agent answers.
func TestSendRefusedAndRetried(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	for number, reason := range map[string]string{notCapable: "not reachable by RCS", notLaunched: "not launched"} {
		m := accept(t, f, number)
		if err := f.link.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		got := waitMessage(t, f, m.ID, func(m *sb.Message) bool { return m.Status == sb.StatusFailed })
		if !contains(got.FailureReason, reason) {
			t.Errorf("%s: failure_reason %q", number, got.FailureReason)
		}
	}
	// A number that lost RCS since detection: an auto message goes by
	// SMS, its record saying so.
	m := acceptAuto(t, f, notCapable, true)
	if err := f.link.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	got := waitMessage(t, f, m.ID, func(m *sb.Message) bool { return m.Fallback != nil })
	if got.Channel != sb.ChannelSMS || got.Engine != sb.EngineSMPP || got.Status != sb.StatusQueued || !contains(got.Fallback.Reason, "not reachable by RCS") {
		t.Errorf("after a 404 for an auto message: %s %s %s %+v", got.Channel, got.Engine, got.Status, got.Fallback)
	}

	m = accept(t, f, down)
	if err := f.link.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.fake.Requests("refused") < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.fake.Script(down, rbmtest.Capable)
	waitMessage(t, f, m.ID, func(m *sb.Message) bool { return m.Status == sb.StatusSent })
	// While it was failing the link went down, and came back up.
	if !f.link.Up() {
		t.Errorf("the link stays down after the agent answered")
	}
	var d *sb.Deferred
	if errors.As(f.link.Send(ctx, m), &d) {
		t.Errorf("a send while up was deferred")
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}
