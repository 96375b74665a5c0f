package imessage_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/imessage"
	"github.com/switchboard/switchboard/provider/imessage/bbtest"
	"github.com/switchboard/switchboard/sqlstore"
)

// A new-message from someone no tenant wrote to is answered 200, stored
// nowhere (a STOP opts nobody out) and counted as dropped.
func TestInboundFromStranger(t *testing.T) {
	ctx := context.Background()
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
	reg := prometheus.NewRegistry()
	link := imessage.New(carrier.Config{Name: "mac", Type: carrier.TypeIMessage, BaseURL: "http://127.0.0.1:1", Password: "p", WebhookSecret: secret},
		db, imessage.Options{Metrics: carrier.NewChatMetrics(reg)})
	web := httptest.NewServer(link)
	defer web.Close()
	hook := imessage.WebhookURL(web.URL, "mac", secret)

	if st, err := bbtest.Post(hook, "new-message", bbtest.Incoming(apple, "STOP")); st != 200 || err != nil {
		t.Fatalf("a stranger's message: %d %v", st, err)
	}
	if got := chatEvents(t, reg, "dropped"); got != 1 {
		t.Errorf("dropped: %v, want 1", got)
	}
	if got := chatEvents(t, reg, "inbound"); got != 0 {
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

// chatEvents is switchboard_chat_events_total of the link mac for kind.
func chatEvents(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchboard_chat_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["engine"] == carrier.TypeIMessage && l["link"] == "mac" && l["kind"] == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
