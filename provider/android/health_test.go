package android_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/android-sms-gateway/client-go/smsgateway"
	"github.com/prometheus/client_golang/prometheus"
	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/android"
)

// pingBody is the app's system:ping webhook body (WebHookEventDTO with
// the payload {"health": HealthResponse}), built from client-go's
// HealthResponse: battery at level, charging flags, connection status and
// transport flags, failed messages in the last hour.
func pingBody(level, charging, connected, transport, failed int) string {
	h := smsgateway.HealthResponse{Status: smsgateway.HealthStatusPass, Version: "1.40.0", ReleaseID: 40, Checks: smsgateway.HealthChecks{
		"battery:level":        {Status: smsgateway.HealthStatusPass, ObservedValue: level, ObservedUnit: "percent"},
		"battery:charging":     {Status: smsgateway.HealthStatusPass, ObservedValue: charging, ObservedUnit: "flags"},
		"connection:status":    {Status: smsgateway.HealthStatusPass, ObservedValue: connected, ObservedUnit: "boolean"},
		"connection:transport": {Status: smsgateway.HealthStatusPass, ObservedValue: transport, ObservedUnit: "flags"},
		"connection:cellular":  {Status: smsgateway.HealthStatusPass, ObservedValue: 4, ObservedUnit: "index"},
		"messages:failed":      {Status: smsgateway.HealthStatusWarn, ObservedValue: failed, ObservedUnit: "messages"},
	}}
	b, _ := json.Marshal(map[string]any{"id": sb.NewID(), "webhookId": android.PingWebhookID, "event": smsgateway.WebhookEventSystemPing,
		"deviceId": "d", "payload": map[string]any{"health": h}})
	return string(b)
}

// TestPingHealth: the device is subscribed to system:ping and app:started
// at its callback URL and told the ping interval; a ping stores the
// phone's health (battery, charging, network, failed in the last hour), a
// ping of a battery under 15% not charging or without network shows in the
// fleet metrics; app:started stores nothing.
func TestPingHealth(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		db := openStore(t, url)
		tenantID, phoneID, code := livePhone(t, db)
		reg := prometheus.NewRegistry()
		srv := android.New(android.Config{Store: db, Routing: sb.Routing{OfflineAfter: time.Minute, PingInterval: 10 * time.Second}, Registry: reg})
		t.Cleanup(srv.Shutdown)
		token := pairToken(t, srv, code)
		call := deviceCaller(srv, token)
		var hooks []smsgateway.Webhook
		w := call("GET", android.Prefix+"/webhooks", "")
		if json.Unmarshal(w.Body.Bytes(), &hooks) != nil || len(hooks) != 3 || hooks[1].Event != smsgateway.WebhookEventSystemPing || hooks[2].Event != "app:started" {
			t.Fatalf("GET /webhooks: %s", w.Body)
		}
		var settings smsgateway.DeviceSettings
		w = call("GET", android.Prefix+"/settings", "")
		if json.Unmarshal(w.Body.Bytes(), &settings) != nil || settings.Ping == nil || settings.Ping.IntervalSeconds == nil || *settings.Ping.IntervalSeconds != 10 {
			t.Fatalf("GET /settings: %s", w.Body)
		}
		path := strings.TrimPrefix(hooks[1].URL, "http://example.com")
		health := func() *sb.Health {
			p, err := db.Phone(context.Background(), tenantID, sb.Live, phoneID)
			if err != nil {
				t.Fatal(err)
			}
			return p.Health
		}
		if w := call("POST", path, pingBody(12, 0, 1, 2, 3)); w.Code != http.StatusNoContent {
			t.Fatalf("ping: %d %s", w.Code, w.Body)
		}
		h := health()
		if h == nil || h.BatteryLevel != 12 || h.Charging || h.Network != sb.NetworkCellular || h.FailedLastHour != 3 || h.ReportedAt.IsZero() {
			t.Fatalf("health after a ping: %+v", h)
		}
		if n := gauge(t, reg, "switchboard_android_phones_in_trouble", "low_battery"); n != 1 {
			t.Errorf("low_battery phones: %v, want 1", n)
		}
		if w := call("POST", path, pingBody(80, 5, 0, 4, 0)); w.Code != http.StatusNoContent {
			t.Fatalf("ping: %d", w.Code)
		}
		if h := health(); h.BatteryLevel != 80 || !h.Charging || h.Network != sb.NetworkNone {
			t.Fatalf("health after a second ping: %+v", h)
		}
		if gauge(t, reg, "switchboard_android_phones_in_trouble", "no_network") != 1 ||
			gauge(t, reg, "switchboard_android_phones_in_trouble", "low_battery") != 0 ||
			gauge(t, reg, "switchboard_android_phones", "online") != 1 {
			t.Error("metrics after the second ping")
		}
		started, _ := json.Marshal(map[string]any{"id": sb.NewID(), "webhookId": android.StartedWebhookID, "event": "app:started", "deviceId": "d",
			"payload": map[string]any{"simCards": []map[string]any{{"slotIndex": 0, "simNumber": 1}}}})
		if w := call("POST", path, string(started)); w.Code != http.StatusNoContent {
			t.Fatalf("app:started: %d", w.Code)
		}
		if h := health(); h.BatteryLevel != 80 {
			t.Errorf("app:started changed the health: %+v", h)
		}
	})
}

// gauge is the value of the gauge name{label=value} among reg's.
func gauge(t *testing.T, reg *prometheus.Registry, name, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == value {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s}", name, value)
	return 0
}

// TestPingHealthConfirmedTogether: a ping that only confirms the health
// last written (two intervals on) is not written at once but with the
// others waiting, every half interval while the server runs; a health
// that changed meanwhile is written at once and never overwritten by an
// older confirmation.
func TestPingHealthConfirmedTogether(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		db := openStore(t, url)
		tenantID, phoneID, code := livePhone(t, db)
		var mu sync.Mutex
		now := time.Now().UTC().Truncate(time.Second)
		clock := func(d time.Duration) time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(d); return now }
		srv := android.New(android.Config{Store: db, Routing: sb.Routing{OfflineAfter: time.Minute, PingInterval: time.Second},
			Now: func() time.Time { return clock(0) }})
		t.Cleanup(srv.Shutdown)
		token := pairToken(t, srv, code)
		call := deviceCaller(srv, token)
		var hooks []smsgateway.Webhook
		if w := call("GET", android.Prefix+"/webhooks", ""); json.Unmarshal(w.Body.Bytes(), &hooks) != nil || len(hooks) < 2 {
			t.Fatalf("GET /webhooks: %s", w.Body)
		}
		path := strings.TrimPrefix(hooks[1].URL, "http://example.com")
		ping := func(level int) {
			t.Helper()
			if w := call("POST", path, pingBody(level, 0, 1, 4, 0)); w.Code != http.StatusNoContent {
				t.Fatalf("ping: %d %s", w.Code, w.Body)
			}
		}
		health := func() *sb.Health {
			t.Helper()
			p, err := db.Phone(context.Background(), tenantID, sb.Live, phoneID)
			if err != nil || p.Health == nil {
				t.Fatalf("phone: %v %v", p, err)
			}
			return p.Health
		}

		t0 := clock(0)
		ping(50)
		if h := health(); h.BatteryLevel != 50 || !h.ReportedAt.Equal(t0) {
			t.Fatalf("first ping: %+v", h)
		}
		t1 := clock(2500 * time.Millisecond)
		ping(50) // confirms it: waits
		if h := health(); !h.ReportedAt.Equal(t0) {
			t.Fatalf("a confirmation was written at once: %+v", h)
		}
		android.FlushHealth(srv)
		if h := health(); h.BatteryLevel != 50 || !h.ReportedAt.Equal(t1) {
			t.Fatalf("after the flush: %+v, want reported at %v", h, t1)
		}

		clock(2500 * time.Millisecond)
		ping(50) // a confirmation waits...
		t3 := clock(100 * time.Millisecond)
		ping(40) // ...and a change is written at once
		android.FlushHealth(srv)
		if h := health(); h.BatteryLevel != 40 || !h.ReportedAt.Equal(t3) {
			t.Fatalf("the change after a confirmation: %+v, want 40%% reported at %v", h, t3)
		}

		// While the server runs, confirmations are written on their own.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { srv.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		t4 := clock(2500 * time.Millisecond)
		ping(40)
		waitFor(t, "the confirmation written by the running server", func() bool { return health().ReportedAt.Equal(t4) })
	})
}

// deviceCaller returns a function that makes a request of the device API
// of h as the device whose token is token.
func deviceCaller(h http.Handler, token string) func(method, path, body string) *httptest.ResponseRecorder {
	return func(method, path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
}
