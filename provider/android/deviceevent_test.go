package android

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/android-sms-gateway/client-go/smsgateway"

	sb "github.com/switchboard/switchboard"
)

// TestParseDeviceEvent: a callback body is parsed once into its event and,
// for a ping, the health; what is not JSON or has no ping/start event is
// a text's; a ping with no health, or with a field not of the app's type,
// is malformed; a start is a device event whatever its payload.
func TestParseDeviceEvent(t *testing.T) {
	health := smsgateway.HealthResponse{Status: smsgateway.HealthStatusPass, Checks: smsgateway.HealthChecks{
		"battery:level":        {ObservedValue: 37, ObservedUnit: "percent"},
		"battery:charging":     {ObservedValue: 2, ObservedUnit: "flags"},
		"connection:status":    {ObservedValue: 1, ObservedUnit: "boolean"},
		"connection:transport": {ObservedValue: 6, ObservedUnit: "flags"},
		"messages:failed":      {ObservedValue: 2, ObservedUnit: "messages"},
	}}
	ping, _ := json.Marshal(map[string]any{"id": "e1", "webhookId": PingWebhookID, "event": smsgateway.WebhookEventSystemPing,
		"deviceId": "d", "payload": map[string]any{"health": health}})
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ev, ok := parseDeviceEvent(ping)
	if !ok || ev.Event != eventSystemPing {
		t.Fatalf("a ping: %+v %v", ev, ok)
	}
	h, ok := ev.ping(at)
	want := sb.Health{BatteryLevel: 37, Charging: true, Network: sb.NetworkWiFi, FailedLastHour: 2, ReportedAt: at}
	if !ok || h != want {
		t.Fatalf("the ping's health: %+v %v, want %+v", h, ok, want)
	}

	for _, c := range []struct {
		name, body string
		device, ok bool // a device event; its health read
	}{
		{"a text", `{"id":"e","event":"sms:received","payload":{"messageId":"m","sender":"+15551234567","message":"hi"}}`, false, false},
		{"not JSON", `{"event":"system:ping",`, false, false},
		{"an event not a string", `{"event":5,"payload":{"health":{"checks":{}}}}`, false, false},
		{"no event", `{"payload":{"health":{"checks":{}}}}`, false, false},
		{"a ping with no health", `{"event":"system:ping","payload":{}}`, true, false},
		{"a ping with no payload", `{"event":"system:ping"}`, true, false},
		{"a ping whose payload is not an object", `{"event":"system:ping","payload":"x"}`, true, false},
		{"a ping whose check is not the app's type", `{"event":"system:ping","payload":{"health":{"checks":{"battery:level":{"observedValue":"high"}}}}}`, true, false},
		{"a ping with an id not a string (not read)", `{"id":5,"event":"system:ping","payload":{"health":{"checks":{}}}}`, true, true},
		{"a ping with no checks", `{"event":"system:ping","payload":{"health":{"status":"pass"}}}`, true, true},
		{"a start", `{"event":"app:started","payload":{"simCards":[{"slotIndex":0,"simNumber":1}]}}`, true, false},
		{"a start whose payload is not an object", `{"event":"app:started","payload":[1]}`, true, false},
	} {
		ev, device := parseDeviceEvent([]byte(c.body))
		if device != c.device {
			t.Errorf("%s: device event %v, want %v", c.name, device, c.device)
			continue
		}
		if _, ok := ev.ping(at); device && ok != c.ok {
			t.Errorf("%s: health read %v, want %v", c.name, ok, c.ok)
		}
	}
	if ev, _ := parseDeviceEvent([]byte(`{"event":"system:ping","payload":{"health":{}}}`)); ev.Event == "" {
		t.Error("no event read")
	} else if h, ok := ev.ping(at); !ok || h.BatteryLevel != -1 || h.Network != sb.NetworkUnknown {
		t.Errorf("a ping with no checks: %+v %v, want battery -1, network unknown", h, ok)
	}
}
