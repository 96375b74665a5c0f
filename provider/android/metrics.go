package android

import (
	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
)

// metrics are the Prometheus metrics of the device protocol, on this node.
type metrics struct {
	handed  prometheus.Counter
	reports *prometheus.CounterVec
	// cancels counts the MessageCancelled events sent to devices.
	cancels prometheus.Counter
	moved   prometheus.Counter
	unknown prometheus.Counter
	inbound prometheus.Counter
	// inboundDropped counts the callbacks answered 204 without storing
	// anything, by reason; inboundLimited those answered 429.
	inboundDropped *prometheus.CounterVec
	inboundLimited prometheus.Counter
	pairings       *prometheus.CounterVec
	// pairingLimited counts the attempts refused by each pairing budget.
	pairingLimited *prometheus.CounterVec
	// credentials counts wrong device tokens and inbound secrets.
	credentials *prometheus.CounterVec
	// pings counts system:ping callbacks by result; started app:started.
	pings   *prometheus.CounterVec
	started prometheus.Counter
	// presence counts the phone.offline and phone.online changes this
	// node announced.
	presence *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, st *streams, fleet func() (states, trouble map[string]int)) metrics {
	m := metrics{
		handed: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_device_messages_handed_total",
			Help: "Messages handed to Android devices (GET /message), not counting hand-outs repeated to the same device."}),
		cancels: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_device_cancels_sent_total",
			Help: "MessageCancelled events sent to Android devices: a message a device holds, not yet Processed, whose campaign was canceled (again on each new stream until the device confirms)."}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_device_reports_total",
			Help: "Message states reported by Android devices, by state (other: a state the protocol does not know)."}, []string{"state"}),
		moved: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_device_messages_moved_total",
			Help: "Device messages no device had taken that the sweeper moved to another phone (their phone went offline or was deleted)."}),
		unknown: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_device_outcome_unknown_total",
			Help: "Device messages failed as outcome unknown: their device took them and reported nothing until --device-outcome-after past their validUntil."}),
		inbound: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_device_inbound_total",
			Help: "Inbound texts stored from Android devices (repeated callbacks not counted)."}),
		inboundDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_device_inbound_dropped_total",
			Help: "Inbound callbacks of Android devices answered 204 and not stored, by reason: malformed, no_id, empty_text, bad_sender."}, []string{"reason"}),
		inboundLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_device_inbound_limited_total",
			Help: "Inbound callbacks of Android devices answered 429: the phone posted more than 60 texts a minute (the app retries them)."}),
		pairings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_device_pairings_total",
			Help: "Pairing attempts by result: paired, refused (a wrong, used or expired code) or limited (too many attempts)."}, []string{"result"}),
		pairingLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_device_pairing_limited_total",
			Help: "Pairing attempts answered 429 before their code was looked up, by the budget that refused them: client (one address), node (this node in all) or cluster (all nodes, through the database)."}, []string{"limit"}),
		credentials: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_device_credential_failures_total",
			Help: "Device requests refused for their credential (token: Authorization: Bearer; inbound_secret: the inbound callback URL), by result: invalid (401) or throttled (429: too many failures from the address)."},
			[]string{"credential", "result"}),
		pings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_device_pings_total",
			Help: "system:ping callbacks of Android devices, by result: stored (the phone's health), malformed (no health in it)."}, []string{"result"}),
		started: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_device_app_started_total",
			Help: "app:started callbacks of Android devices: the app (re)started."}),
		presence: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_phone_presence_changes_total",
			Help: "Android phones in rotation that went offline or came back, as announced by this node (phone.offline, phone.online), by new state."}, []string{"state"}),
	}
	for _, reason := range []string{dropMalformed, dropNoID, dropEmpty, dropSender} {
		m.inboundDropped.WithLabelValues(reason)
	}
	if reg != nil {
		streams := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchboard_device_streams",
			Help: "Event streams (GET /events) open on this node: at most one a phone."}, func() float64 { return float64(st.count()) })
		replaced := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "switchboard_device_streams_replaced_total",
			Help: "Event streams ended on this node because a newer stream of the same phone opened."}, func() float64 { return float64(st.replacedCount()) })
		reg.MustRegister(m.handed, m.cancels, m.reports, m.moved, m.unknown, m.inbound, m.inboundDropped, m.inboundLimited, m.pairings, m.pairingLimited, m.credentials, streams, replaced,
			m.pings, m.started, m.presence, &fleetCollector{fleet: fleet})
	}
	return m
}

// fleetCollector reports the android phones of every tenant by state and
// by trouble, read from the store at each scrape (never per phone or
// number: the labels are the states).
type fleetCollector struct {
	fleet func() (states, trouble map[string]int)
}

var (
	fleetStateDesc = prometheus.NewDesc("switchboard_android_phones",
		"Android phones of every tenant by state: online, offline, quarantined.", []string{"state"}, nil)
	fleetTroubleDesc = prometheus.NewDesc("switchboard_android_phones_in_trouble",
		"Android phones in rotation whose health shows trouble, by kind: low_battery (under 15%, not charging), no_network, ping_late (no ping for three intervals).",
		[]string{"trouble"}, nil)
)

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- fleetStateDesc
	ch <- fleetTroubleDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	states, trouble := c.fleet()
	for k, n := range states {
		ch <- prometheus.MustNewConstMetric(fleetStateDesc, prometheus.GaugeValue, float64(n), k)
	}
	for k, n := range trouble {
		ch <- prometheus.MustNewConstMetric(fleetTroubleDesc, prometheus.GaugeValue, float64(n), k)
	}
}

// reportLabel bounds the state label to the protocol's states.
func reportLabel(state string) string {
	if sb.DeviceStateRank(state) == 0 {
		return "other"
	}
	return state
}
