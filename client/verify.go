package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a webhook delivery.
const (
	HeaderSignature        = "X-Service-Signature" // "sha256=" + hex HMAC-SHA256 of the body (two, ", "-separated, while a secret is rotated)
	HeaderEvent            = "X-Service-Event"     // the event type
	HeaderDelivery         = "X-Service-Delivery"  // the delivery id, the same on every retry
	HeaderWebhookID        = "webhook-id"          // Standard Webhooks: the delivery id
	HeaderWebhookTimestamp = "webhook-timestamp"   // Standard Webhooks: Unix seconds of the attempt
	HeaderWebhookSignature = "webhook-signature"   // Standard Webhooks: "v1," + base64 HMAC-SHA256 of id.timestamp.body
)

// DefaultTolerance is how far a delivery's webhook-timestamp may be from
// the receiver's clock, either way, when WebhookVerifier.Tolerance is zero:
// 5 minutes, as in the Standard Webhooks libraries.
const DefaultTolerance = 5 * time.Minute

// maxEventBytes bounds the body ReadEvent reads; payloads are far smaller.
const maxEventBytes = 1 << 20

// The reasons a delivery fails verification.
var (
	// ErrMissingSignature: a signature header (or webhook-id or
	// webhook-timestamp) is absent or empty.
	ErrMissingSignature = errors.New("switchboard: webhook signature headers missing")
	// ErrInvalidSignature: no signature matches the body and the secret.
	ErrInvalidSignature = errors.New("switchboard: webhook signature does not match")
	// ErrTimestampOutOfRange: webhook-timestamp is unreadable or further
	// than the tolerance from now, which is how a replayed delivery shows.
	ErrTimestampOutOfRange = errors.New("switchboard: webhook-timestamp outside the tolerance")
)

// VerifySignature checks the X-Service-Signature header of a delivery:
// header must be "sha256=" followed by the hex HMAC-SHA256 of body, the
// exact bytes received, keyed with the webhook's secret. For 24 hours after
// the secret is rotated the header lists two such values separated by
// ", " (the new secret's, then the old one's): one that matches will do.
// Comparisons are constant-time. It returns nil, ErrMissingSignature or
// ErrInvalidSignature.
//
// This signature says nothing of when the delivery was made: a captured
// delivery replayed later passes it. WebhookVerifier checks the Standard
// Webhooks headers, whose signed timestamp stops replays.
func VerifySignature(secret string, body []byte, header string) error {
	header = strings.TrimSpace(header)
	if header == "" {
		return ErrMissingSignature
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	want := m.Sum(nil)
	ok := false
	for _, value := range strings.Split(header, ",") {
		hexSum, found := strings.CutPrefix(strings.TrimSpace(value), "sha256=")
		if !found {
			continue
		}
		got, err := hex.DecodeString(hexSum)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return ErrInvalidSignature
	}
	return nil
}

// WebhookVerifier checks deliveries with the Standard Webhooks headers
// (webhook-id, webhook-timestamp, webhook-signature), which sign the
// delivery id and the time of the attempt with the body: a delivery older
// (or newer) than Tolerance is refused, so a captured one cannot be
// replayed.
type WebhookVerifier struct {
	// Secret is the webhook's secret, as registered.
	Secret string
	// Tolerance is how far webhook-timestamp may be from Now; zero is
	// DefaultTolerance.
	Tolerance time.Duration
	// Now is the receiver's clock; nil is time.Now.
	Now func() time.Time
}

// Verify checks the Standard Webhooks headers of a delivery whose body is
// body, the exact bytes received. It returns nil, ErrMissingSignature,
// ErrTimestampOutOfRange or ErrInvalidSignature. Signature comparisons are
// constant-time; the header may carry several space-separated signatures,
// and any "v1" one that matches will do.
func (v *WebhookVerifier) Verify(h http.Header, body []byte) error {
	id, ts, sigs := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp), h.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || strings.TrimSpace(sigs) == "" {
		return ErrMissingSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrTimestampOutOfRange
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tol := v.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	// In whole seconds, so that an absurd timestamp cannot overflow.
	diff := now().Unix() - sec
	if diff < 0 {
		diff = -diff
	}
	if diff < 0 || diff > int64(tol/time.Second) {
		return ErrTimestampOutOfRange
	}
	m := hmac.New(sha256.New, []byte(v.Secret))
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	ok := false
	for _, entry := range strings.Fields(sigs) {
		version, sig, found := strings.Cut(entry, ",")
		if !found || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return ErrInvalidSignature
	}
	return nil
}

// ReadEvent reads a delivery from its request: the body (at most 1 MiB),
// verified with Verify before anything else, then parsed with ParseEvent.
// The event's DeliveryID is the webhook-id header: deduplicate on it.
//
//	func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
//		ev, err := h.verifier.ReadEvent(r)
//		if err != nil {
//			http.Error(w, "invalid delivery", http.StatusUnauthorized)
//			return
//		}
//		// handle ev (once per ev.DeliveryID), then answer 2xx within 10 s
//		w.WriteHeader(http.StatusNoContent)
//	}
func (v *WebhookVerifier) ReadEvent(r *http.Request) (*Event, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxEventBytes+1))
	if err != nil {
		return nil, fmt.Errorf("switchboard: reading the delivery: %w", err)
	}
	if len(body) > maxEventBytes {
		return nil, errors.New("switchboard: the delivery is larger than 1 MiB")
	}
	if err := v.Verify(r.Header, body); err != nil {
		return nil, err
	}
	ev, err := ParseEvent(body)
	if err != nil {
		return nil, err
	}
	ev.DeliveryID = r.Header.Get(HeaderWebhookID)
	return ev, nil
}

// Event is the payload of a webhook delivery.
type Event struct {
	// Type is the event type. An event type this client does not know is
	// parsed all the same: handle the types you know and answer 2xx to the
	// rest.
	Type      EventType `json:"event"`
	MessageID string    `json:"message_id"`
	// From is your number for outbound messages, the sender's for inbound
	// ones; To the other end. Both E.164.
	From    string  `json:"from"`
	To      string  `json:"to"`
	Channel Channel `json:"channel"`
	// Timestamp is when the event happened.
	Timestamp time.Time `json:"timestamp"`
	// Body is the text of an inbound message (EventMessageReceived only).
	Body string `json:"body,omitempty"`
	// FailureReason says why delivery failed (EventMessageFailed only).
	FailureReason string `json:"failure_reason,omitempty"`
	// ErrorCode is CodeDeliveryFailed or CodeCampaignCanceled
	// (EventMessageFailed only).
	ErrorCode Code `json:"error_code,omitempty"`
	// DeliveryID is the delivery's id (webhook-id, X-Service-Delivery),
	// set by ReadEvent; ParseEvent leaves it empty.
	DeliveryID string `json:"-"`
}

// PhoneEvent is the payload of a phone event's delivery
// (EventPhoneOffline, EventPhoneOnline, EventPhoneQuarantined).
type PhoneEvent struct {
	Type    EventType `json:"event"`
	PhoneID string    `json:"phone_id"`
	Number  string    `json:"number"`
	// Timestamp is when it happened.
	Timestamp time.Time `json:"timestamp"`
	// Reason says why: the failure reasons of a quarantine, when an
	// offline phone was last seen.
	Reason string `json:"reason"`
}

// ParsePhoneEvent parses the body of a phone event's delivery. Verify the
// body first. An event without a type, phone id or timestamp is an error.
func ParsePhoneEvent(body []byte) (*PhoneEvent, error) {
	var ev PhoneEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("switchboard: parsing the event: %w", err)
	}
	if ev.Type == "" || ev.PhoneID == "" || ev.Timestamp.IsZero() {
		return nil, errors.New("switchboard: the event has no event type, phone_id or timestamp")
	}
	return &ev, nil
}

// ParseEvent parses the body of a delivery of a message event (a phone
// event's is read with ParsePhoneEvent). Verify the body first: parse
// only what the signature vouches for. An event without a type, message id
// or timestamp is an error.
func ParseEvent(body []byte) (*Event, error) {
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("switchboard: parsing the event: %w", err)
	}
	if ev.Type == "" || ev.MessageID == "" || ev.Timestamp.IsZero() {
		return nil, errors.New("switchboard: the event has no event type, message_id or timestamp")
	}
	return &ev, nil
}
