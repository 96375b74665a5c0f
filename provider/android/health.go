package android

import (
	"encoding/json"
	"time"

	sb "github.com/switchboard/switchboard"
)

// The app's system:ping and app:started webhooks (modules/webhooks in the
// app). Switchboard subscribes every device to both, at the same callback
// URL as its inbound texts (GET /webhooks), and asks the app to ping every
// PingInterval (GET /settings, ping.interval_seconds).

// Events of the app's webhooks that Switchboard subscribes to.
const (
	eventSMSReceived = "sms:received"
	eventSystemPing  = "system:ping"
	eventAppStarted  = "app:started"
)

// pingPayload is the payload of system:ping: {"health": HealthResponse}
// (the app's domain/HealthResponse.kt; client-go's
// smsgateway.HealthResponse).
type pingPayload struct {
	Health *healthResponse `json:"health"`
}

type healthResponse struct {
	Status string                 `json:"status"`
	Checks map[string]healthCheck `json:"checks"`
}

type healthCheck struct {
	Status        string  `json:"status"`
	ObservedValue float64 `json:"observedValue"`
	ObservedUnit  string  `json:"observedUnit"`
}

// The checks a ping carries (HealthService.kt: each module's checks, named
// module:check), and the flags of their values.
const (
	checkBatteryLevel     = "battery:level"        // percent
	checkBatteryCharging  = "battery:charging"     // flags: 1 charging, 2 on AC, 4 on USB
	checkConnectionStatus = "connection:status"    // 1 with internet, 0 without
	checkTransport        = "connection:transport" // flags: 1 unknown, 2 cellular, 4 wifi, 8 ethernet
	checkMessagesFailed   = "messages:failed"      // messages failed in the last hour

	transportUnknown  = 1
	transportCellular = 2
	transportWiFi     = 4
	transportEthernet = 8
)

// parsePing reads the payload of a system:ping into the phone's health,
// reported at at. A check the app did not send stays unknown: battery -1,
// network "unknown". It reports false for a payload with no health.
func parsePing(raw json.RawMessage, at time.Time) (sb.Health, bool) {
	var p pingPayload
	if json.Unmarshal(raw, &p) != nil || p.Health == nil {
		return sb.Health{}, false
	}
	checks := p.Health.Checks
	h := sb.Health{BatteryLevel: -1, Network: sb.NetworkUnknown, ReportedAt: at}
	if c, ok := checks[checkBatteryLevel]; ok {
		h.BatteryLevel = min(100, max(0, int(c.ObservedValue)))
	}
	if c, ok := checks[checkBatteryCharging]; ok {
		h.Charging = int(c.ObservedValue) != 0 // charging, or plugged in (full)
	}
	if c, ok := checks[checkTransport]; ok {
		switch f := int(c.ObservedValue); {
		case f&transportWiFi != 0:
			h.Network = sb.NetworkWiFi
		case f&transportEthernet != 0:
			h.Network = sb.NetworkEthernet
		case f&transportCellular != 0:
			h.Network = sb.NetworkCellular
		case f == 0:
			h.Network = sb.NetworkNone
		}
	}
	if c, ok := checks[checkConnectionStatus]; ok && c.ObservedValue == 0 {
		h.Network = sb.NetworkNone
	}
	if c, ok := checks[checkMessagesFailed]; ok {
		h.FailedLastHour = max(0, int(c.ObservedValue))
	}
	return h, true
}
