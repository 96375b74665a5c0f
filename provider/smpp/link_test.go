package smpp

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/smpp/smsc"
	"github.com/switchboard/switchboard/sqlstore"
)

// gatedStore is the real store, with RecordCarrier held at a gate: the
// test sees the link's write begin and decides when it may go on, as a
// slow disk would.
type gatedStore struct {
	*sqlstore.DB
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (g *gatedStore) RecordCarrier(ctx context.Context, link string, evs []sb.CarrierEvent) (sb.CarrierResult, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.open
	return g.DB.RecordCarrier(ctx, link, evs)
}

// TestInboundAnsweredOnlyOnceStored: a deliver_sm is answered only after
// what it reports is on disk; until then the SMSC still has it, and sends
// it again if the bind or the process dies.
func TestInboundAnsweredOnlyOnceStored(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	ph := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15551230077", Kind: sb.PhoneSMPP, Link: "c1", Channels: []string{sb.ChannelSMS},
		Status: sb.PhoneOnline, CreatedAt: now}
	if err := db.AddPhone(ctx, ph, nil); err != nil {
		t.Fatal(err)
	}
	sm := &smsc.Server{SystemID: "sys"}
	if err := sm.Start(); err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	store := &gatedStore{DB: db, entered: make(chan struct{}, 1), open: make(chan struct{})}
	link := New(carrier.Config{Name: "c1", Type: carrier.TypeSMPP, Addr: sm.Addr(), SystemID: "sys", Window: 10}, store, Options{})
	done := make(chan struct{})
	go func() { link.Run(ctx); close(done) }()
	release := func() { store.once.Do(func() { close(store.open) }) }
	defer func() { release(); cancel(); <-done }()
	for !link.Up() {
		time.Sleep(10 * time.Millisecond)
	}
	sm.SendMO("+15005550000", ph.Number, "hello", 0)
	select {
	case <-store.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the link never recorded the text")
	}
	// The write is under way and not done: the SMSC has no answer. (A link
	// that answers first would have answered by now: the answer goes out
	// before the write begins.)
	time.Sleep(100 * time.Millisecond)
	if n := sm.Pending(); n != 1 {
		t.Fatalf("the deliver_sm was answered before it was stored (pending %d)", n)
	}
	release()
	deadline := time.Now().Add(30 * time.Second)
	for sm.Pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the deliver_sm was never answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	msgs, err := db.Messages(ctx, tn.ID, sb.Live, sb.MessageFilter{Direction: sb.Inbound}, sb.Page{Limit: 10})
	if err != nil || len(msgs) != 1 || msgs[0].Body != "hello" || !strings.HasPrefix(msgs[0].From, "+1500") {
		t.Fatalf("inbound: %v %v", msgs, err)
	}
}
