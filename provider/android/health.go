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

// deviceEventBody is what Switchboard reads of a callback that may be a
// system:ping or an app:started: its event and, for a ping, the health in
// its payload. A ping is parsed once, here: its callback is the phones'
// most frequent request at rest.
type deviceEventBody struct {
	Event   string      `json:"event"`
	Payload pingPayload `json:"payload"`
	// bad: the body is valid JSON, but a field has a type other than the
	// app's (a ping so is malformed).
	bad bool
}

// parseDeviceEvent reads raw, the body of a callback, and reports whether
// it is a system:ping or app:started. A body that is not JSON, or whose
// event is not a string, is not one (it is read as a text). A ping whose
// fields have other types than the app's is one, malformed (ping reports
// false).
func parseDeviceEvent(raw []byte) (deviceEventBody, bool) {
	var ev deviceEventBody
	// Unmarshal reads nothing of a body that is not JSON, and goes on
	// after a value of another type: the event is read whatever the
	// payload holds.
	ev.bad = json.Unmarshal(raw, &ev) != nil
	return ev, ev.Event == eventSystemPing || ev.Event == eventAppStarted
}

// ping reads the health of a system:ping, reported at at. A check the app
// did not send stays unknown: battery -1, network "unknown". It reports
// false for a payload with no health, or one not of the app's types.
func (ev *deviceEventBody) ping(at time.Time) (sb.Health, bool) {
	if ev.bad || ev.Payload.Health == nil {
		return sb.Health{}, false
	}
	checks := ev.Payload.Health.Checks
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

// pingCacheTTL is how long a node trusts the phone it found for an inbound
// secret, for pings only.
const pingCacheTTL = time.Minute

// pingCache keeps, per node, the phones of the callback secrets it looked
// up lately (for pings, whose writes are conditional on the device), the
// health last written of each phone, and the unchanged healths that pings
// confirmed, waiting to be written together (Server.flushHealth).
type pingCache struct {
	mu      sync.Mutex
	secrets map[string]pingPhone
	written map[string]pingWritten
	queued  map[string]pingPhone
	// writing is held for reading by the writes of healths that changed,
	// and for writing by those of the confirmed ones.
	writing sync.RWMutex
}

type pingPhone struct {
	phone  *sb.Phone
	at     time.Time
	health sb.Health
}

type pingWritten struct {
	health sb.Health
	at     time.Time
}

func (c *pingCache) init() {
	c.secrets, c.written, c.queued = map[string]pingPhone{}, map[string]pingWritten{}, map[string]pingPhone{}
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

// What to do with a ping's health (pingCache.verdict).
type pingVerdict int

const (
	pingSkip    pingVerdict = iota // as written, lately: nothing
	pingWrite                      // changed, or the first: written at once
	pingRefresh                    // as written, that long ago: confirmed with the others (queue)
)

// verdict says what becomes of h, the health of phone id: written at once
// when it differs from the last one written (or none was), confirmed when
// that is at least every old, else nothing. It takes h as written unless
// it says pingSkip.
func (c *pingCache) verdict(id string, h sb.Health, every time.Duration) pingVerdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.written[id]
	same := last.health
	same.ReportedAt = h.ReportedAt
	if ok && same == h {
		if h.ReportedAt.Sub(last.at) < every {
			return pingSkip
		}
		c.written[id] = pingWritten{health: h, at: h.ReportedAt}
		return pingRefresh
	}
	if len(c.written) > 100_000 {
		c.written = map[string]pingWritten{}
	}
	c.written[id] = pingWritten{health: h, at: h.ReportedAt}
	delete(c.queued, id) // an older confirmation is not to overwrite h
	return pingWrite
}

// queue keeps h, ph's confirmed health, until takeQueued.
func (c *pingCache) queue(ph *sb.Phone, h sb.Health) {
	c.mu.Lock()
	c.queued[ph.ID] = pingPhone{phone: ph, health: h}
	c.mu.Unlock()
}

// takeQueued returns the confirmed healths waiting, and forgets them.
func (c *pingCache) takeQueued() []pingPhone {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]pingPhone, 0, len(c.queued))
	for id, p := range c.queued {
		out = append(out, p)
		delete(c.queued, id)
	}
	return out
}

func (c *pingCache) forget(id string) {
	c.mu.Lock()
	delete(c.written, id)
	c.mu.Unlock()
}
