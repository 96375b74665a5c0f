package carrier

import "github.com/prometheus/client_golang/prometheus"

// ChatMetrics are the chat engines' Prometheus metrics, labelled by engine
// (rbm, imessage) and link.
type ChatMetrics struct {
	upG     *prometheus.GaugeVec
	detects *prometheus.CounterVec
	sends   *prometheus.CounterVec
	events  *prometheus.CounterVec
	revokes *prometheus.CounterVec
}

// NewChatMetrics registers the metrics on reg (when not nil).
func NewChatMetrics(reg prometheus.Registerer) *ChatMetrics {
	m := &ChatMetrics{
		upG: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_chat_engine_up",
			Help: "1 while the chat engine answers, else 0."}, []string{"engine", "link"}),
		detects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_chat_detections_total",
			Help: "Channel detections for channel auto, by result: chat, sms, forbidden (403: sms and a warning), unavailable, cached, batch (numbers asked in batches)."},
			[]string{"engine", "link", "result"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_chat_sends_total",
			Help: "Chat messages handed to a chat engine, by result: accepted, refused, retried, fell_back (refused, and sent again by SMS)."}, []string{"engine", "link", "result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_chat_events_total",
			Help: "Events received from a chat engine, by kind: delivered, read, inbound (stored), dropped (inbound from someone no tenant wrote to), ignored."}, []string{"engine", "link", "kind"}),
		revokes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_chat_revokes_total",
			Help: "Revokes of chat messages of channel auto not delivered within their ttl, by result: revoked (then sent by SMS), delivered (the engine had delivered it: no SMS), failed (tried again later; no SMS meanwhile)."},
			[]string{"engine", "link", "result"}),
	}
	if reg != nil {
		reg.MustRegister(m.upG, m.detects, m.sends, m.events, m.revokes)
	}
	return m
}

// Up records whether an engine answers.
func (m *ChatMetrics) Up(engine, link string, up bool) {
	if m != nil {
		setUp(m.upG.WithLabelValues(engine, link), up)
	}
}

// Detect counts a detection by its result.
func (m *ChatMetrics) Detect(engine, link, result string) { m.DetectN(engine, link, result, 1) }

// DetectN counts n detections by their result.
func (m *ChatMetrics) DetectN(engine, link, result string, n int) {
	if m != nil && n > 0 {
		m.detects.WithLabelValues(engine, link, result).Add(float64(n))
	}
}

// Send counts a message handed to an engine by its result.
func (m *ChatMetrics) Send(engine, link, result string) {
	if m != nil {
		m.sends.WithLabelValues(engine, link, result).Inc()
	}
}

// Event counts an event an engine reported.
func (m *ChatMetrics) Event(engine, link, kind string) {
	if m != nil {
		m.events.WithLabelValues(engine, link, kind).Inc()
	}
}

// Revoke counts a revoke by its result.
func (m *ChatMetrics) Revoke(engine, link, result string) {
	if m != nil {
		m.revokes.WithLabelValues(engine, link, result).Inc()
	}
}
