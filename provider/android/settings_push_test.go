package android_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/android"
	"github.com/switchboard/switchboard/provider/android/agent"
)

// TestSettingsPushed: a device that has not fetched its settings and
// webhooks since it paired is told SettingsUpdated and WebhooksUpdated
// when its stream opens, fetches them, and is told nothing the next time;
// once the server's settings change (its ping interval), it is told
// SettingsUpdated again, and only that.
func TestSettingsPushed(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	_, _, code := livePhone(t, db)
	run := func(ping time.Duration) []string {
		srv := android.New(android.Config{Store: db, PublicURL: "https://sms.example.com", Routing: sb.Routing{OfflineAfter: time.Minute, PingInterval: ping}})
		ts := httptest.NewServer(srv)
		defer func() { srv.Shutdown(); ts.Close() }()
		var mu sync.Mutex
		var events []string
		opt := agent.Options{URL: ts.URL + android.Prefix, OnEvent: func(name string, _ time.Time) {
			mu.Lock()
			events = append(events, name)
			mu.Unlock()
		}}
		a := agentFor(t, opt, code)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		deadline := time.Now().Add(10 * time.Second)
		for !a.Connected() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		// The events come right after the stream opens; give the fetches
		// they start time to land.
		time.Sleep(300 * time.Millisecond)
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return events
	}
	has := func(events []string, name string) bool {
		for _, e := range events {
			if e == name {
				return true
			}
		}
		return false
	}
	if ev := run(time.Minute); !has(ev, "SettingsUpdated") || !has(ev, "WebhooksUpdated") {
		t.Fatalf("first stream: %v, want SettingsUpdated and WebhooksUpdated", ev)
	}
	if ev := run(time.Minute); has(ev, "SettingsUpdated") || has(ev, "WebhooksUpdated") {
		t.Fatalf("after fetching: %v, want neither", ev)
	}
	if ev := run(30 * time.Second); !has(ev, "SettingsUpdated") || has(ev, "WebhooksUpdated") {
		t.Fatalf("after the ping interval changed: %v, want SettingsUpdated only", ev)
	}
}

// agentFor pairs a reference device with code once and reuses it.
var agentsByCode sync.Map

func agentFor(t *testing.T, opt agent.Options, code string) *agent.Agent {
	t.Helper()
	if v, ok := agentsByCode.Load(code); ok {
		prev := v.(*agent.Agent)
		return agent.New(opt, prev.ID, prev.Token)
	}
	a, err := agent.Pair(context.Background(), opt, code)
	if err != nil {
		t.Fatal(err)
	}
	agentsByCode.Store(code, a)
	return a
}
