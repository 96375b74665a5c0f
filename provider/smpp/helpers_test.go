package smpp

import (
	"bytes"
	"context"
	"log/slog"
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

// fixture is a tenant with a phone on link "c1" in a real store, an SMSC,
// and the link, with its log kept.
type fixture struct {
	ctx    context.Context
	db     *sqlstore.DB
	tn     *sb.Tenant
	phone  *sb.Phone
	smsc   *smsc.Server
	link   *Link
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newStore opens a SQLite store with a tenant and an SMPP phone of link c1.
func newStore(t *testing.T) (*sqlstore.DB, *sb.Tenant, *sb.Phone) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
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
	return db, tn, ph
}

// start makes the fixture: the SMSC as sm (started here), the link with
// cfg and opt over it. Run starts when run is set.
func start(t *testing.T, sm *smsc.Server, cfg carrier.Config, opt Options, run bool) *fixture {
	t.Helper()
	f := &fixture{smsc: sm, logs: &syncBuffer{}, done: make(chan struct{})}
	f.db, f.tn, f.phone = newStore(t)
	if sm.SystemID == "" {
		sm.SystemID = "sys"
	}
	if err := sm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sm.Close)
	cfg.Name, cfg.Type, cfg.Addr, cfg.SystemID = "c1", carrier.TypeSMPP, sm.Addr(), sm.SystemID
	if cfg.Window == 0 {
		cfg.Window = 10
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	f.link = New(cfg, f.db, opt)
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if run {
		go func() { f.link.Run(f.ctx); close(f.done) }()
	} else {
		close(f.done)
	}
	t.Cleanup(func() { f.cancel(); <-f.done })
	return f
}

// waitFor waits until cond holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// send stores a queued live message from the fixture's phone and hands it
// to the link.
func (f *fixture) send(t *testing.T, to, body string) *sb.Message {
	t.Helper()
	m := &sb.Message{ID: sb.NewID(), TenantID: f.tn.ID, Env: sb.Live, Direction: sb.Outbound, To: to, Body: body, Channel: sb.ChannelSMS,
		Status: sb.StatusQueued, CreatedAt: time.Now().UTC()}
	if err := f.db.AcceptSend(f.ctx, &sb.Send{Message: m, From: f.phone.Number}); err != nil {
		t.Fatal(err)
	}
	m.Attempts = 1
	if err := f.link.Send(f.ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// status reads a message's status and failure_reason.
func (f *fixture) status(t *testing.T, id string) (string, string) {
	t.Helper()
	m, err := f.db.Message(f.ctx, f.tn.ID, sb.Live, id)
	if err != nil {
		t.Fatal(err)
	}
	return m.Status, m.FailureReason
}

// waitStatus waits until the message has status want.
func (f *fixture) waitStatus(t *testing.T, id, want string) string {
	t.Helper()
	var got, reason string
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, reason = f.status(t, id)
		if got == want {
			return reason
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %s: status %s (%s), want %s", id, got, reason, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func contains(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
