package switchboard

import (
	"encoding/json"
	"time"
)

// Event types (docs/webhooks.md).
const (
	EventDelivered = "message.delivered"
	EventFailed    = "message.failed"
	EventReceived  = "message.received"
)

// EventTypes lists every event type.
var EventTypes = []string{EventDelivered, EventFailed, EventReceived}

// EventPayload is the JSON body of a webhook delivery (docs/webhooks.md).
type EventPayload struct {
	Event         string  `json:"event"`
	MessageID     string  `json:"message_id"`
	From          string  `json:"from"`
	To            string  `json:"to"`
	Body          *string `json:"body,omitempty"`
	Channel       string  `json:"channel"`
	Timestamp     string  `json:"timestamp"`
	FailureReason *string `json:"failure_reason,omitempty"`
	ErrorCode     *string `json:"error_code,omitempty"`
}

// NewEventPayload returns the exact bytes of the event about m at t.
func NewEventPayload(event string, m *Message, t time.Time) []byte {
	p := EventPayload{Event: event, MessageID: m.ID, From: m.From, To: m.To, Channel: m.Channel,
		Timestamp: t.UTC().Format("2006-01-02T15:04:05.000000Z")}
	switch event {
	case EventReceived:
		p.Body = &m.Body
	case EventFailed:
		reason, code := m.FailureReason, m.ErrorCode
		p.FailureReason, p.ErrorCode = &reason, &code
	}
	b, _ := json.Marshal(p)
	return b
}
