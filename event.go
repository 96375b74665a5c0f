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

	// Phone events (docs/phones.md) say what became of a live sending
	// phone.
	EventPhoneOffline     = "phone.offline"
	EventPhoneOnline      = "phone.online"
	EventPhoneQuarantined = "phone.quarantined"
)

// EventTypes lists every event type.
var EventTypes = []string{EventDelivered, EventFailed, EventReceived, EventPhoneOffline, EventPhoneOnline, EventPhoneQuarantined}

// IsPhoneEvent reports whether event is about a phone, not a message.
func IsPhoneEvent(event string) bool {
	return event == EventPhoneOffline || event == EventPhoneOnline || event == EventPhoneQuarantined
}

// PhoneEvent is a phone event's JSON body (docs/webhooks.md), without its
// timestamp.
type PhoneEvent struct {
	Event     string `json:"event"`
	PhoneID   string `json:"phone_id"`
	Number    string `json:"number"`
	Timestamp string `json:"timestamp"`
	Reason    string `json:"reason"`
}

// NewPhoneEventPayload returns the exact bytes of the phone event ev at t.
func NewPhoneEventPayload(ev PhoneEvent, t time.Time) []byte {
	ev.Timestamp = t.UTC().Format("2006-01-02T15:04:05.000000Z")
	b, _ := json.Marshal(ev)
	return b
}

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
