package imessage_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/imessage"
	"github.com/switchboard/switchboard/provider/imessage/bbtest"
	"github.com/switchboard/switchboard/sqlstore"
)

const (
	apple  = "+15553330001"
	other  = "+15553330002"
	broken = "+15553330003"
	slow   = "+15553330004"
	secret = "webhook-secret-0123456789"
)

// Detection, sending, and the webhook of a BlueBubbles server, against the
// fake and a real store.
func TestIMessage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake := bbtest.New("server-password")
	defer fake.Close()
	fake.Delay = 3 * time.Second
	fake.Script(other, bbtest.NoIMessage)
	fake.Script(broken, bbtest.Down)
	fake.Script(slow, bbtest.Slow)
	db, err := sqlstore.Open(ctx, dbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	tn := &sb.Tenant{ID: sb.NewID(), Name: "t", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	ph := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15553339000", Kind: sb.PhoneIMessage, Link: "mac", Channels: []string{sb.ChannelChat},
		Status: sb.PhoneOnline, CreatedAt: now}
	if err := db.AddPhone(ctx, ph, nil); err != nil {
		t.Fatal(err)
	}
	link := imessage.New(carrier.Config{Name: "mac", Type: carrier.TypeIMessage, BaseURL: fake.URL, Password: "server-password", WebhookSecret: secret},
		db, imessage.Options{DetectTimeout: 300 * time.Millisecond, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	done := make(chan struct{})
	go func() { link.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	web := httptest.NewServer(link)
	defer web.Close()
	hook := imessage.WebhookURL(web.URL, "mac", secret)

	for _, c := range []struct {
		to, want string
		err      bool
	}{{apple, sb.ChannelChat, false}, {other, sb.ChannelSMS, false}, {broken, "", true}, {slow, "", true}} {
		got, err := link.Detect(ctx, c.to)
		if c.err != (sb.ErrorCode(err) == sb.CodeDetectionUnavailable) || got != c.want {
			t.Errorf("detect %s: %q %v, want %q", c.to, got, err, c.want)
		}
	}
	n := fake.Checks()
	if ch, _ := link.Detect(ctx, apple); ch != sb.ChannelChat || fake.Checks() != n {
		t.Errorf("a cached answer asked the server again")
	}

	m := &sb.Message{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Direction: sb.Outbound, To: apple, Body: "See you at 8",
		Channel: sb.ChannelChat, Status: sb.StatusQueued, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := db.AcceptSend(ctx, &sb.Send{Message: m, NewContactLimit: 100}); err != nil || m.Engine != sb.EngineIMessage {
		t.Fatalf("accept: %v, engine %s", err, m.Engine)
	}
	if err := link.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	wait := func(ok func(*sb.Message) bool) *sb.Message {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got, err := db.Message(ctx, tn.ID, sb.Live, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("message stays %s (%s)", got.Status, got.FailureReason)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait(func(m *sb.Message) bool { return m.Status == sb.StatusSent })
	sent := fake.Sent()
	if len(sent) != 1 || sent[0].ChatGUID != "iMessage;-;"+apple || sent[0].TempGUID != m.ID || sent[0].Text != m.Body {
		t.Fatalf("the fake took %+v", sent)
	}
	if st, _ := bbtest.Post(imessage.WebhookURL(web.URL, "mac", "wrong-secret-000000000"), "updated-message", bbtest.Delivered(sent[0].GUID, true)); st != 403 {
		t.Errorf("a webhook with a wrong secret: %d", st)
	}
	if st, err := bbtest.Post(hook, "updated-message", bbtest.Delivered(sent[0].GUID, true)); st != 200 || err != nil {
		t.Fatalf("updated-message: %d %v", st, err)
	}
	got := wait(func(m *sb.Message) bool { return m.Status == sb.StatusDelivered && m.ReadAt != nil })
	if got.Engine != sb.EngineIMessage {
		t.Errorf("engine %s", got.Engine)
	}
	if st, _ := bbtest.Post(hook, "new-message", bbtest.Incoming(apple, "STOP")); st != 200 {
		t.Fatalf("new-message: %d", st)
	}
	in, err := db.Messages(ctx, tn.ID, sb.Live, sb.MessageFilter{Direction: sb.Inbound}, sb.Page{Limit: 5})
	if err != nil || len(in) != 1 || in[0].Body != "STOP" || in[0].To != ph.Number || in[0].Engine != sb.EngineIMessage {
		t.Fatalf("inbound: %+v %v", in, err)
	}
	if _, opted, _ := db.Recipient(ctx, tn.ID, sb.Live, apple); !opted {
		t.Errorf("STOP by iMessage did not opt out")
	}
}
