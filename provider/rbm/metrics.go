package rbm

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the chat engines' Prometheus metrics, labelled by engine
// (rbm) and link.
type Metrics struct {
	upG     *prometheus.GaugeVec
	detects *prometheus.CounterVec
	sends   *prometheus.CounterVec
	events  *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg (when not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		upG: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_chat_engine_up",
			Help: "1 while the chat engine answers, else 0."}, []string{"engine", "link"}),
		detects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_chat_detections_total",
			Help: "Channel detections for channel auto, by result: chat, sms, forbidden (403: sms and a warning), unavailable, cached, batch (numbers asked in batches)."},
			[]string{"engine", "link", "result"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_chat_sends_total",
			Help: "Chat messages handed to a chat engine, by result: accepted, refused, retried."}, []string{"engine", "link", "result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_chat_events_total",
			Help: "Events received from a chat engine, by kind: delivered, read, inbound, ignored."}, []string{"engine", "link", "kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.upG, m.detects, m.sends, m.events)
	}
	return m
}

const engine = "rbm"

func (m *Metrics) up(link string, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.upG.WithLabelValues(engine, link).Set(v)
}

func (m *Metrics) detect(link, result string) { m.detectN(link, result, 1) }

func (m *Metrics) detectN(link, result string, n int) {
	if m != nil && n > 0 {
		m.detects.WithLabelValues(engine, link, result).Add(float64(n))
	}
}

func (m *Metrics) send(link, result string) {
	if m != nil {
		m.sends.WithLabelValues(engine, link, result).Inc()
	}
}

func (m *Metrics) event(link, kind string) {
	if m != nil {
		m.events.WithLabelValues(engine, link, kind).Inc()
	}
}
