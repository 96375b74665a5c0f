package switchboard

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Message directions and statuses (docs/api.md).
const (
	Outbound = "outbound"
	Inbound  = "inbound"

	StatusQueued    = "queued"
	StatusSent      = "sent"
	StatusDelivered = "delivered"
	StatusFailed    = "failed"
	StatusReceived  = "received"
)

// MaxBodyLength is the longest message or template body, in characters.
const MaxBodyLength = 1600

// Limits of the data object of a send or campaign, the template variables.
// A value is at most as long as a message can be; keys longer than a
// variable name can never be used; and the whole object is bounded, so no
// request can make the service hold or render more than a few messages'
// worth of text.
const (
	MaxDataKeys     = 100
	MaxDataKeyLen   = 64            // bytes; the longest variable name
	MaxDataValueLen = MaxBodyLength // characters
	MaxDataBytes    = 32 << 10      // keys and values together, in bytes
)

// Message is one outbound or inbound message. Empty strings stand for null.
type Message struct {
	// HighPriority marks a send with priority "high": handed to its
	// device before the others, and the app skips its own limits and
	// delays for it.
	HighPriority bool
	// Cancelling, on a message handed to a device, says that its cancel
	// was asked of the device (see CancelOnDevice), which has not
	// confirmed it yet.
	Cancelling    bool
	ID            string
	TenantID      string
	Env           Environment
	Direction     string
	From          string
	To            string
	Body          string
	Channel       string
	Status        string
	FailureReason string
	ErrorCode     string
	Template      string
	CampaignID    string
	PhoneID       string
	// PhoneKind is the kind of the phone the message goes out from, which
	// decides how it is delivered (see ViaDevice).
	PhoneKind string
	// ExternalID is the message's id at the provider or device that
	// reported it (an inbound text's callback id), unique per phone.
	ExternalID string
	// ValidUntil is when a message handed to a device stops being valid
	// there (the device will not send it after).
	ValidUntil *time.Time
	// CountedDay is the UTC day on whose daily limits a campaign message
	// was counted (its phone's, and new contacts' when it made its
	// recipient known), so that withdrawing it gives them back.
	CountedDay  string
	CreatedAt   time.Time
	ScheduledAt *time.Time
	SentAt      *time.Time
	DeliveredAt *time.Time
	FailedAt    *time.Time
	// ReadAt is when the recipient read a chat message (nil until then).
	ReadAt   *time.Time
	Attempts int
	// Engine is what carried the message (EngineSimulator, EngineAndroid,
	// ...); empty until it is stored, when the engine of its environment
	// and phone kind is taken (EngineOf).
	Engine string
	// Fallback is set on a chat message of channel auto that was sent
	// again by SMS.
	Fallback *Fallback
	// ChatFallbackAt, on a chat message of channel auto that a chat engine
	// carries, is when it goes again by SMS if not delivered by then.
	ChatFallbackAt *time.Time
	// TTL, on a message sent with channel auto, is how long a chat engine
	// has to deliver it, from when it is due, before it goes again by SMS
	// (ChatFallbackAfter unless the send gave its own); 0 on every other
	// message.
	TTL time.Duration
}

// ChatFallbackClaim is a chat message of channel auto whose fallback to
// SMS a node has claimed (sqlstore ClaimChatFallback): who it is to, its
// status (sent: the chat engine accepted it), the kind and link of the
// phone that carries it, and whether its engine revoked it already.
type ChatFallbackClaim struct {
	MessageID, TenantID, To string
	Status                  string
	Kind, Link              string
	Revoked                 bool
}

// ChatDeadline returns when m goes again by SMS if its chat engine has not
// delivered it by then: its TTL after it is due (its ScheduledAt, else its
// CreatedAt), for a live message of channel auto that went to a chat
// engine's phone; nil for every other message.
func (m *Message) ChatDeadline() *time.Time {
	if m.TTL <= 0 || m.Env != Live || m.Channel != ChannelChat || !IsChatEngineKind(m.PhoneKind) {
		return nil
	}
	due := m.CreatedAt
	if m.ScheduledAt != nil {
		due = *m.ScheduledAt
	}
	at := due.Add(m.TTL)
	return &at
}

// CarriedBy is the engine that carries m: its Engine, or before it is
// stored, the engine of its environment and phone kind (EngineOf).
func (m *Message) CarriedBy() string {
	if m.Engine != "" {
		return m.Engine
	}
	return EngineOf(m.Env, m.PhoneKind)
}

// Fallback says that a message left on one channel and was sent again on
// another (chat not delivered within its ttl, or the number lost chat).
type Fallback struct {
	From   string // the channel it left on first: chat
	Reason string
}

// Send is an outbound message ready to be accepted: validated, rendered, its
// channel resolved. The store applies the rules that need consistent state
// (opt-out, new-contact limit, phone choice and daily limit, idempotency) in
// the same transaction that stores it.
type Send struct {
	Message *Message
	// From, when set, is the only phone number the message may use.
	From string
	// Auto is set when the sender asked for channel auto: a message that
	// detection sent to chat goes by sms when no phone that sends chat can
	// take it.
	Auto bool
	// NewContactLimit is the tenant's daily limit of first-time recipients.
	NewContactLimit int
	// Idempotency, when set, stores the answer under the key in the same
	// transaction.
	Idempotency *IdempotencyRecord
	// Render makes the answer to store for Idempotency once the message is
	// final (its phone chosen).
	Render func(*Message) []byte
}

// IdempotencyRecord is the stored first answer to a request sent with an
// Idempotency-Key header.
type IdempotencyRecord struct {
	Key string
	// RequestHash identifies the request: the SHA-256 of its body as
	// parsed JSON, written again canonically (keys sorted, no spaces), so
	// that the same request with other spacing or key order is the same.
	RequestHash string
	// RawHash, on a new request, is the SHA-256 of its body's bytes: the
	// RequestHash that records stored before requests were compared parsed
	// hold, so that a repeat of those is still a replay.
	RawHash   string
	Status    int
	Response  []byte
	CreatedAt time.Time
}

// SameRequest reports whether the request cur is the one prev was stored
// for.
func (prev *IdempotencyRecord) SameRequest(cur *IdempotencyRecord) bool {
	return prev.RequestHash == cur.RequestHash || (cur.RawHash != "" && prev.RequestHash == cur.RawHash)
}

// IdempotencyWindow is how long an Idempotency-Key is remembered.
const IdempotencyWindow = 24 * time.Hour

// Outcome is what a provider reports about a message it was handed.
type Outcome struct {
	MessageID     string
	Delivered     bool
	FailureReason string
	At            time.Time
	// SentAt is when the message was handed to the provider, when the
	// hand-off has not been recorded yet (zero otherwise): the outcome
	// then records both.
	SentAt time.Time
}

// Handoff is the result of handing one message to the provider.
type Handoff struct {
	MessageID string
	// Err is nil when the provider took the message; otherwise its message
	// becomes the failure_reason if the message fails.
	Err error
	// Retry, when Err is set, is when to try again; zero means fail now.
	Retry time.Time
	// Deferred marks a hand-off the provider put off (see Deferred): the
	// message waits until Retry and the attempt does not count.
	Deferred bool
	At       time.Time
	// OutcomeBy is when to hand the message over again if no outcome came.
	OutcomeBy time.Time
}

// Provider delivers the messages handed to it: the built-in simulator, or a
// carrier link. Every call names the message id so a provider can
// deduplicate a message handed over twice (after a crash between hand-off
// and bookkeeping). Messages of android phones are not handed to a
// provider: their devices take them (see ViaDevice).
type Provider interface {
	// Send hands one message over. The outcome arrives later on Outcomes.
	Send(ctx context.Context, m *Message) error
	// Outcomes delivers the outcome of every message handed over.
	Outcomes() <-chan Outcome
}

// Device states (the app's ProcessingState) that a device reports about a
// message it was handed. Any other state name is ignored.
const (
	DevicePending   = "Pending"
	DeviceProcessed = "Processed"
	DeviceSent      = "Sent"
	DeviceDelivered = "Delivered"
	DeviceFailed    = "Failed"
	// DeviceCancelled is what the app reports of a message it withdrew
	// from its queue before sending it, as asked (MessageCancelled, or the
	// message handed again in state DeviceCancelling): it cancels only
	// messages still Pending on the phone.
	DeviceCancelled = "Cancelled"
	// DeviceCancelling is the state a message is handed to a device in
	// when its cancel was asked (the app's ProcessingState.Cancelling):
	// the app cancels it if it is still Pending there, and reports it
	// Cancelled at once if it never got it.
	DeviceCancelling = "Cancelling"
)

// DeviceStateRank orders device states: a report never moves a message to
// a lower rank. Unknown states rank 0.
func DeviceStateRank(state string) int {
	switch state {
	case DevicePending:
		return 1
	case DeviceProcessed:
		return 2
	case DeviceSent:
		return 3
	case DeviceDelivered, DeviceFailed, DeviceCancelled:
		return 4
	}
	return 0
}

// DeviceReport is what a device says about one message it holds.
type DeviceReport struct {
	MessageID string
	State     string
	// Error is the recipient's error of a Failed report.
	Error string
	// At is when the device says the state was reached, and SentAt when
	// it says the message left it (reached Processed, or else Sent); zero
	// when it did not say.
	At, SentAt time.Time
}

// ErrAlreadyStored is returned for an inbound text whose ExternalID its
// phone already has: the device sent the same callback again.
var ErrAlreadyStored = errors.New("the inbound text is already stored")

// DeviceTTLExpired is the error the app reports, as Failed, for a message
// it did not send because its validUntil had passed: the message was not
// sent, so it goes to another phone instead of failing (see ProvesUnsent).
const DeviceTTLExpired = "TTL expired"

// Opt-out keywords (docs/api.md): the whole inbound body, trimmed,
// case-insensitive.
var (
	optOutWords = []string{"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"}
	optInWords  = []string{"START", "UNSTOP"}
)

// OptKeyword reports whether an inbound body opts the sender out (-1), back
// in (+1) or neither (0).
func OptKeyword(body string) int {
	b := strings.TrimSpace(body)
	for _, w := range optOutWords {
		if strings.EqualFold(b, w) {
			return -1
		}
	}
	for _, w := range optInWords {
		if strings.EqualFold(b, w) {
			return 1
		}
	}
	return 0
}

// Day returns the UTC day of t, the period of daily limits.
func Day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// Template is a stored message template.
type Template struct {
	ID        string
	TenantID  string
	Env       Environment
	Name      string
	Body      string
	Variables []string
	CreatedAt time.Time
}

// MessageFilter narrows a message list; empty fields do not filter.
type MessageFilter struct {
	Status     string
	Direction  string
	To         string
	From       string
	CampaignID string
	// Number matches messages from or to the number.
	Number string
	// Since and Until, when set, keep messages created at or after Since
	// and before Until (the dashboard's dates).
	Since, Until time.Time
	// CreatedAfter and CreatedBefore bound created_at, both exclusive
	// (the API's created_after and created_before).
	CreatedAfter, CreatedBefore *time.Time
}

// Page is a cursor page request: items older than After (an id), at most Limit.
type Page struct {
	After string
	Limit int
}
