package android

import (
	"encoding/json"
	"sync"
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

// isDeviceEvent reports whether raw is the body of a system:ping or
// app:started callback.
func isDeviceEvent(raw []byte) bool {
	var ev struct {
		Event string `json:"event"`
	}
	return json.Unmarshal(raw, &ev) == nil && (ev.Event == eventSystemPing || ev.Event == eventAppStarted)
}

// pingCacheTTL is how long a node trusts the phone it found for an inbound
// secret, for pings only.
const pingCacheTTL = time.Minute

// pingCache keeps, per node, the phones of the callback secrets it looked
// up lately (for pings, whose writes are conditional on the device) and the
// health last written of each phone.
type pingCache struct {
	mu      sync.Mutex
	secrets map[string]pingPhone
	written map[string]pingWritten
}

type pingPhone struct {
	phone *sb.Phone
	at    time.Time
}

type pingWritten struct {
	health sb.Health
	at     time.Time
}

func (c *pingCache) init() {
	c.secrets, c.written = map[string]pingPhone{}, map[string]pingWritten{}
}

// phone returns the phone remembered for secret, if within pingCacheTTL.
func (c *pingCache) phone(secret string, now time.Time) *sb.Phone {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.secrets[secret]
	if !ok || now.Sub(e.at) >= pingCacheTTL {
		return nil
	}
	return e.phone
}

func (c *pingCache) remember(secret string, ph *sb.Phone, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.secrets) > 100_000 { // bounded: start again
		c.secrets = map[string]pingPhone{}
	}
	c.secrets[secret] = pingPhone{phone: ph, at: now}
}

// due reports whether h, the health of phone id, is to be written: it
// differs from the last one written, or that is at least every old. It
// takes h as written when it says so.
func (c *pingCache) due(id string, h sb.Health, every time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.written[id]
	same := last.health
	same.ReportedAt = h.ReportedAt
	if ok && same == h && h.ReportedAt.Sub(last.at) < every {
		return false
	}
	if len(c.written) > 100_000 {
		c.written = map[string]pingWritten{}
	}
	c.written[id] = pingWritten{health: h, at: h.ReportedAt}
	return true
}

func (c *pingCache) forget(id string) {
	c.mu.Lock()
	delete(c.written, id)
	c.mu.Unlock()
}
