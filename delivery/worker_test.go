package delivery_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/delivery"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/sqlstore"
)

// provider takes every message and reports an outcome only when report is
// set: a carrier whose delivery receipts come at once, or never.
type provider struct {
	report   bool
	outcomes chan sb.Outcome
	mu       sync.Mutex
	sent     []string
}

func (p *provider) Detect(context.Context, string, string) (string, error) { return sb.ChannelSMS, nil }
func (p *provider) ChatAvailable(context.Context, string) error            { return nil }
func (p *provider) Outcomes() <-chan sb.Outcome                            { return p.outcomes }
func (p *provider) Send(_ context.Context, m *sb.Message) error {
	p.mu.Lock()
	p.sent = append(p.sent, m.ID)
	p.mu.Unlock()
	if p.report {
		p.outcomes <- sb.Outcome{MessageID: m.ID, Delivered: true, At: time.Now()}
	}
	return nil
}

// countingStore counts the hand-offs written on their own.
type countingStore struct {
	*sqlstore.DB
	handoffs atomic.Int64
}

func (s *countingStore) RecordHandoffs(ctx context.Context, hs []sb.Handoff) error {
	s.handoffs.Add(int64(len(hs)))
	return s.DB.RecordHandoffs(ctx, hs)
}

func setup(t *testing.T, report bool) (*countingStore, *provider, string, func()) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	tn := &sb.Tenant{ID: sb.NewID(), Name: "d", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now, CreatedAt: now}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if err := db.AddPhone(ctx, &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15550001234", Channels: []string{"sms"},
		Status: sb.PhoneOnline, CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	store := &countingStore{DB: db}
	p := &provider{report: report, outcomes: make(chan sb.Outcome, 100)}
	// A provider that reports outcomes at once is given far longer than
	// it needs, so that no hand-off is written on its own on a loaded
	// machine; one that never reports has its hand-offs written soon.
	sentAfter := 50 * time.Millisecond
	if report {
		sentAfter = 10 * time.Second
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		delivery.New(store, p, delivery.Options{SentAfter: sentAfter}).Run(wctx)
	}()
	return store, p, tn.ID, sync.OnceFunc(func() { stop(); <-done; db.Close() })
}

func send(t *testing.T, db *sqlstore.DB, tenantID string) *sb.Message {
	t.Helper()
	m := &sb.Message{ID: sb.NewID(), TenantID: tenantID, Env: sb.Live, Direction: sb.Outbound, To: "+15005550000",
		Body: "hi", Channel: sb.ChannelSMS, Status: sb.StatusQueued, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := db.AcceptSend(context.Background(), &sb.Send{Message: m, NewContactLimit: 100}); err != nil {
		t.Fatal(err)
	}
	return m
}

func waitStatus(t *testing.T, db *sqlstore.DB, m *sb.Message, status string) *sb.Message {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := db.Message(context.Background(), m.TenantID, m.Env, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == status {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %s is %s, want %s", m.ID, got.Status, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An outcome that comes before SentAfter records the hand-off with it: the
// message goes from queued to delivered in one write, with its sent_at.
func TestHandoffRecordedWithOutcome(t *testing.T) {
	store, _, tenantID, stop := setup(t, true)
	defer stop()
	var msgs []*sb.Message
	for range 20 {
		msgs = append(msgs, send(t, store.DB, tenantID))
	}
	for _, m := range msgs {
		got := waitStatus(t, store.DB, m, sb.StatusDelivered)
		if got.SentAt == nil || got.DeliveredAt == nil || got.SentAt.Before(m.CreatedAt) || got.SentAt.After(*got.DeliveredAt) || got.Attempts != 1 {
			t.Errorf("delivered message: sent_at %v, delivered_at %v, attempts %d", got.SentAt, got.DeliveredAt, got.Attempts)
		}
	}
	// The worker writes the hand-offs still waiting for an outcome when it
	// stops: there must be none.
	stop()
	if n := store.handoffs.Load(); n != 0 {
		t.Errorf("%d hand-offs written on their own; with the outcomes at once, none should be", n)
	}
}

// Without an outcome, the hand-off is recorded on its own after SentAfter:
// the message becomes sent, with the time it was handed over.
func TestHandoffRecordedAfterWait(t *testing.T) {
	store, p, tenantID, stop := setup(t, false)
	defer stop()
	m := send(t, store.DB, tenantID)
	got := waitStatus(t, store.DB, m, sb.StatusSent)
	if got.SentAt == nil || got.SentAt.Before(m.CreatedAt) || got.DeliveredAt != nil {
		t.Errorf("sent message: sent_at %v, delivered_at %v", got.SentAt, got.DeliveredAt)
	}
	if n := store.handoffs.Load(); n != 1 {
		t.Errorf("%d hand-offs written, want 1", n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sent) != 1 || p.sent[0] != m.ID {
		t.Errorf("provider was handed %v, want just %s", p.sent, m.ID)
	}
}

// outcomeStore records the size of each RecordOutcomes call.
type outcomeStore struct {
	*sqlstore.DB
	mu    sync.Mutex
	calls []int
}

func (s *outcomeStore) RecordOutcomes(ctx context.Context, outs []sb.Outcome) error {
	s.mu.Lock()
	s.calls = append(s.calls, len(outs))
	s.mu.Unlock()
	return s.DB.RecordOutcomes(ctx, outs)
}

func (s *outcomeStore) recorded() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.calls...)
}

// A burst of outcomes is written in one transaction even when its
// outcomes come apart: once two have come together, the worker gathers
// more for OutcomeLinger (here an hour, so that only a full batch of 512
// ends it). A lone outcome is written at once.
func TestOutcomesGathered(t *testing.T) {
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := &outcomeStore{DB: db}
	p := &provider{outcomes: make(chan sb.Outcome, 600)}
	outcome := func() sb.Outcome { return sb.Outcome{MessageID: sb.NewID(), Delivered: true, At: time.Now()} }
	// Two outcomes come together, before the worker starts.
	p.outcomes <- outcome()
	p.outcomes <- outcome()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	defer func() { stop(); <-done }()
	go func() {
		defer close(done)
		delivery.New(store, p, delivery.Options{OutcomeLinger: time.Hour}).Run(wctx)
	}()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: RecordOutcomes calls %v", what, store.recorded())
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The worker holds them before the rest of the burst comes.
	waitFor("taking the first two", func() bool { return len(p.outcomes) == 0 })
	for range 510 {
		p.outcomes <- outcome()
	}
	waitFor("the burst", func() bool { return len(store.recorded()) >= 1 })
	p.outcomes <- outcome()
	waitFor("a lone outcome", func() bool { return len(store.recorded()) >= 2 })
	if got := store.recorded(); len(got) != 2 || got[0] != 512 || got[1] != 1 {
		t.Fatalf("a burst of 512 outcomes, then a lone one: RecordOutcomes calls %v, want [512 1]", got)
	}
}
