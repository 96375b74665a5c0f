package imessage_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/chat/chattest"
	"github.com/switchboard/switchboard/provider/imessage"
	"github.com/switchboard/switchboard/provider/imessage/bbtest"
)

// A new-message from someone no tenant wrote to is answered 200, stored
// nowhere (a STOP opts nobody out) and counted as dropped.
func TestInboundFromStranger(t *testing.T) {
	ctx := context.Background()
	db, tn, _ := chattest.Store(t, sb.PhoneIMessage, "mac", "+15553339000")
	reg := prometheus.NewRegistry()
	link := imessage.New(carrier.Config{Name: "mac", Type: carrier.TypeIMessage, BaseURL: "http://127.0.0.1:1", Password: "p", WebhookSecret: secret},
		db, imessage.Options{Metrics: carrier.NewChatMetrics(reg)})
	web := httptest.NewServer(link)
	defer web.Close()
	hook := imessage.WebhookURL(web.URL, "mac", secret)

	if st, err := bbtest.Post(hook, "new-message", bbtest.Incoming(apple, "STOP")); st != 200 || err != nil {
		t.Fatalf("a stranger's message: %d %v", st, err)
	}
	if got := chattest.Events(t, reg, carrier.TypeIMessage, "mac", "dropped"); got != 1 {
		t.Errorf("dropped: %v, want 1", got)
	}
	if got := chattest.Events(t, reg, carrier.TypeIMessage, "mac", "inbound"); got != 0 {
		t.Errorf("inbound: %v, want 0", got)
	}
	in, err := db.Messages(ctx, tn.ID, sb.Live, sb.MessageFilter{Direction: sb.Inbound}, sb.Page{Limit: 5})
	if err != nil || len(in) != 0 {
		t.Fatalf("stored: %+v %v", in, err)
	}
	if known, _, _ := db.Recipient(ctx, tn.ID, sb.Live, apple); known {
		t.Errorf("the stranger became a recipient")
	}
}
