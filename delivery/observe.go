package delivery

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
)

// Observer watches messages on their way: the worker tells it of every
// hand-off, and the store of every outcome it commits (sqlstore's
// SetObserver), whichever path it came by (the provider's report, a device's,
// a failed hand-off, a campaign's withdrawal, an inbound text). It counts
// them on /metrics and logs every delivery failure at info level. It never
// logs a message's text.
type Observer struct {
	log      *slog.Logger
	outcomes *prometheus.CounterVec
	handoff  prometheus.Histogram
	delivery prometheus.Histogram
}

// latencyBuckets span a simulator's milliseconds to a carrier's minutes.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// NewObserver registers the message metrics on reg (none when nil) and
// logs on log (slog.Default() when nil).
func NewObserver(reg prometheus.Registerer, log *slog.Logger) *Observer {
	if log == nil {
		log = slog.Default()
	}
	o := &Observer{
		log: log,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_messages_total",
			Help: "Messages that reached an outcome on this node, by outcome: delivered, failed (delivery failed), " +
				"canceled (a campaign's message withdrawn by a cancel) and received (inbound); and by engine, what carried " +
				"the message (the record's engine: simulator, android, smpp, twilio, rbm, imessage).",
		}, []string{"outcome", "engine"}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_message_handoff_seconds",
			Help: "Time from when a message was due (accepted, or its scheduled time) to its hand-off to the provider on this node " +
				"(messages of Android phones are taken by their devices instead: see switchboard_device_messages_handed_total).",
			Buckets: latencyBuckets,
		}),
		delivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_message_delivery_seconds",
			Help:    "Time from when a message was due (accepted, or its scheduled time) to its delivery report, for delivered messages.",
			Buckets: latencyBuckets,
		}),
	}
	for _, outcome := range []string{"delivered", "failed", "canceled", "received"} {
		o.outcomes.WithLabelValues(outcome, sb.EngineSimulator)
	}
	if reg != nil {
		reg.MustRegister(o.outcomes, o.handoff, o.delivery)
	}
	return o
}

// due is when m was due: its scheduled time, or its creation.
func due(m *sb.Message) time.Time {
	if m.ScheduledAt != nil && m.ScheduledAt.After(m.CreatedAt) {
		return *m.ScheduledAt
	}
	return m.CreatedAt
}

// Observe records one committed message event (see sqlstore's
// SetObserver).
func (o *Observer) Observe(m *sb.Message, event string) {
	switch event {
	case sb.EventDelivered:
		o.outcomes.WithLabelValues("delivered", engineLabel(m)).Inc()
		if m.DeliveredAt != nil && !m.CreatedAt.IsZero() {
			o.delivery.Observe(max(m.DeliveredAt.Sub(due(m)), 0).Seconds())
		}
	case sb.EventReceived:
		o.outcomes.WithLabelValues("received", engineLabel(m)).Inc()
	case sb.EventFailed:
		if m.ErrorCode == sb.ErrorCodeCampaignCanceled {
			// Withdrawn by a cancel: the campaign runner logs how many.
			o.outcomes.WithLabelValues("canceled", engineLabel(m)).Inc()
			return
		}
		o.outcomes.WithLabelValues("failed", engineLabel(m)).Inc()
		attrs := []any{"tenant_id", m.TenantID, "environment", string(m.Env), "message_id", m.ID,
			"channel", m.Channel, "engine", m.CarriedBy(), "phone_id", m.PhoneID, "error_code", m.ErrorCode, "failure_reason", m.FailureReason}
		if m.CampaignID != "" {
			attrs = append(attrs, "campaign_id", m.CampaignID)
		}
		o.log.Info("message delivery failed", attrs...)
	}
}

// engineLabel is the engine label of m's outcome: the engine that carried
// it, one of the six the record knows; anything else (none is expected) is
// "other", so that the label's values stay a fixed handful whatever a row
// holds.
func engineLabel(m *sb.Message) string {
	switch e := m.CarriedBy(); e {
	case sb.EngineSimulator, sb.EngineAndroid, sb.EngineSMPP, sb.EngineTwilio, sb.EngineRBM, sb.EngineIMessage:
		return e
	}
	return "other"
}

// handedOff records a hand-off to the provider at at.
func (o *Observer) handedOff(m *sb.Message, at time.Time) {
	if !m.CreatedAt.IsZero() {
		o.handoff.Observe(max(at.Sub(due(m)), 0).Seconds())
	}
}
