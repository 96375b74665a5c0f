package rbm_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/chat/chattest"
	"github.com/switchboard/switchboard/provider/rbm"
	"github.com/switchboard/switchboard/provider/rbm/rbmtest"
)

// A user message from someone no tenant wrote to is answered 200 (Google
// must not send it again), stored nowhere, and counted as dropped; one
// from a user the tenant wrote to is stored and counted as inbound.
func TestInboundFromStranger(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m := carrier.NewChatMetrics(reg)
	cfg := carrier.Config{Name: "rcs", Type: carrier.TypeRBM, BaseURL: f.fake.URL, AgentID: "agent-1",
		ServiceAccount: carrier.Secret(f.fake.KeyFile()), ClientToken: token}
	link, err := rbm.New(cfg, f.db, rbm.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(link)
	t.Cleanup(web.Close)
	events := web.URL + carrier.Prefix + "rcs/events"

	const stranger = "+15551110099"
	if st, err := rbmtest.Post(events, token, f.fake.UserMessage(stranger, "STOP")); st != 200 || err != nil {
		t.Fatalf("a stranger's message: %d %v", st, err)
	}
	if got := chattest.Events(t, reg, carrier.TypeRBM, "rcs", "dropped"); got != 1 {
		t.Errorf("dropped: %v, want 1", got)
	}
	in, err := f.db.Messages(ctx, f.tenant.ID, sb.Live, sb.MessageFilter{Direction: sb.Inbound}, sb.Page{Limit: 10})
	if err != nil || len(in) != 0 {
		t.Fatalf("stored: %+v %v", in, err)
	}
	if known, _, _ := f.db.Recipient(ctx, f.tenant.ID, sb.Live, stranger); known {
		t.Errorf("the stranger became a recipient")
	}

	// Once the tenant wrote to them, their text is the tenant's.
	s := &sb.Send{Message: &sb.Message{ID: sb.NewID(), TenantID: f.tenant.ID, Env: sb.Live, Direction: sb.Outbound, To: stranger,
		Body: "hi", Channel: sb.ChannelChat, Status: sb.StatusQueued, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}, From: f.phone.Number}
	if err := f.db.AcceptSend(ctx, s); err != nil {
		t.Fatal(err)
	}
	if st, err := rbmtest.Post(events, token, f.fake.UserMessage(stranger, "hello")); st != 200 || err != nil {
		t.Fatalf("a user's message: %d %v", st, err)
	}
	if got := chattest.Events(t, reg, carrier.TypeRBM, "rcs", "inbound"); got != 1 {
		t.Errorf("inbound: %v, want 1", got)
	}
	if got := chattest.Events(t, reg, carrier.TypeRBM, "rcs", "dropped"); got != 1 {
		t.Errorf("dropped: %v, want still 1", got)
	}
	in, err = f.db.Messages(ctx, f.tenant.ID, sb.Live, sb.MessageFilter{Direction: sb.Inbound}, sb.Page{Limit: 10})
	if err != nil || len(in) != 1 || in[0].Body != "hello" {
		t.Fatalf("stored: %+v %v", in, err)
	}
}
