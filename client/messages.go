package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// Channel is the channel of a message.
type Channel string

// The channels. ChannelAuto is accepted on sends only: it is resolved before
// the answer, to ChannelChat when the recipient can receive it, else
// ChannelSMS.
const (
	ChannelSMS  Channel = "sms"
	ChannelChat Channel = "chat"
	ChannelAuto Channel = "auto"
)

// MessageStatus is the state of a message: outbound StatusQueued ->
// StatusSent -> StatusDelivered or StatusFailed; inbound StatusReceived.
type MessageStatus string

// The message statuses.
const (
	StatusQueued    MessageStatus = "queued"
	StatusSent      MessageStatus = "sent"
	StatusDelivered MessageStatus = "delivered"
	StatusFailed    MessageStatus = "failed"
	StatusReceived  MessageStatus = "received"
)

// Direction says whether a message went out or came in.
type Direction string

// The directions.
const (
	Outbound Direction = "outbound"
	Inbound  Direction = "inbound"
)

// Message is a message record.
type Message struct {
	ID        string    `json:"id"`
	Direction Direction `json:"direction"`
	// From is the tenant's sending phone (outbound) or the recipient who
	// wrote (inbound), E.164.
	From string `json:"from"`
	// To is the recipient (outbound) or the tenant's phone written to
	// (inbound), E.164.
	To string `json:"to"`
	// Body is the text; for a template send, the rendered text.
	Body string `json:"body"`
	// Channel is the channel actually used: ChannelSMS or ChannelChat.
	Channel Channel       `json:"channel"`
	Status  MessageStatus `json:"status"`
	// FailureReason says why delivery failed, when known.
	FailureReason *string `json:"failure_reason"`
	// ErrorCode is CodeDeliveryFailed or CodeCampaignCanceled on a failed
	// message, nil otherwise.
	ErrorCode *Code `json:"error_code"`
	// Template is the name of the template the body was rendered from.
	Template *string `json:"template"`
	// CampaignID is the campaign that created the message.
	CampaignID *string `json:"campaign_id"`
	// Livemode is true for live data, false for the test environment.
	Livemode  bool      `json:"livemode"`
	CreatedAt time.Time `json:"created_at"`
	// ScheduledAt is the end of the recipient's quiet hours when the send
	// was accepted during them.
	ScheduledAt *time.Time `json:"scheduled_at"`
	SentAt      *time.Time `json:"sent_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
	FailedAt    *time.Time `json:"failed_at"`
	// Engine is what carried the message: EngineSimulator (every test
	// message), EngineAndroid, EngineSMPP, EngineTwilio, EngineRBM or
	// EngineIMessage.
	Engine Engine `json:"engine"`
	// ReadAt is when the recipient read a chat message, if its engine
	// reports reads.
	ReadAt *time.Time `json:"read_at"`
	// Fallback is set when a chat message of channel auto was sent again
	// by SMS.
	Fallback *Fallback `json:"fallback"`
	// TTL, on a message sent with channel auto, is the seconds a chat
	// engine has to deliver it, from when it is due, before it is sent
	// again by SMS; nil on inbound messages and on sends of channel sms or
	// chat.
	TTL *int `json:"ttl"`
	// Priority is the send's priority: "high" (handed to an Android phone
	// before its other waiting messages, the app skipping its own limits
	// and delays for it) or "normal".
	Priority string `json:"priority"`
}

// Engine is what carried a message.
type Engine string

// Engines.
const (
	EngineSimulator Engine = "simulator"
	EngineAndroid   Engine = "android"
	EngineSMPP      Engine = "smpp"
	EngineTwilio    Engine = "twilio"
	EngineRBM       Engine = "rbm"
	EngineIMessage  Engine = "imessage"
)

// Fallback says that a chat message was not delivered in time (or its
// number lost chat) and was sent again by SMS.
type Fallback struct {
	// From is the channel the message left on first: ChannelChat.
	From Channel `json:"from"`
	// Reason says why.
	Reason string `json:"reason"`
}

// SendParams is a message to send: To, and exactly one of Body or Template
// (with Data).
type SendParams struct {
	// To is the recipient, E.164: "+" and 10 to 15 digits.
	To string `json:"to"`
	// Body is the text, 1 to 1600 characters.
	Body string `json:"body,omitempty"`
	// Template is the name of a template of the key's environment.
	Template string `json:"template,omitempty"`
	// Data holds the template's variables: strings, numbers or booleans.
	Data map[string]any `json:"data,omitempty"`
	// Channel is ChannelSMS, ChannelChat or ChannelAuto; empty is auto.
	Channel Channel `json:"channel,omitempty"`
	// From is one of the tenant's sending numbers; empty lets the service
	// choose.
	From string `json:"from,omitempty"`
	// Priority "high" hands the message to an Android phone before its
	// other waiting messages, and the app skips its own limits and delays
	// for it; empty is "normal".
	Priority string `json:"priority,omitempty"`
	// TTL, with channel auto only (set or empty), is the seconds, 60 to
	// 86400, that a message sent by chat has to be delivered before it is
	// sent again by SMS, once; 0 is the default, 3600.
	TTL int `json:"ttl,omitempty"`
	// IdempotencyKey (at most 255 characters) makes the send safe to
	// repeat: a repeat within 24 hours with the same fields returns the
	// first answer and sends nothing. When empty, SendMessage generates one,
	// so that its own retries never send twice; SendResult.IdempotencyKey
	// returns it. Set your own (an order id, say) to make repeats across
	// processes and restarts safe too.
	IdempotencyKey string `json:"-"`
}

// SendResult is the answer to an accepted send.
type SendResult struct {
	MessageID string        `json:"message_id"`
	Status    MessageStatus `json:"status"` // always StatusQueued
	From      string        `json:"from"`
	To        string        `json:"to"`
	// Channel is the channel the message will use (auto resolved).
	Channel   Channel   `json:"channel"`
	Livemode  bool      `json:"livemode"`
	CreatedAt time.Time `json:"created_at"`
	// ScheduledAt is set when the send waits for the end of the
	// recipient's quiet hours; QuietHours is then true.
	ScheduledAt *time.Time `json:"scheduled_at"`

	// QuietHours is true when the answer was 200 QUIET_HOURS: accepted and
	// stored, delivered at ScheduledAt (08:00 recipient local time). It is
	// not an error.
	QuietHours bool `json:"-"`
	// Replayed is true when the answer is the stored answer to an earlier
	// send with the same Idempotency-Key (Idempotent-Replayed: true): this
	// call sent nothing.
	Replayed bool `json:"-"`
	// IdempotencyKey is the key the send carried: the caller's, or the one
	// generated.
	IdempotencyKey string `json:"-"`
}

// SendMessage sends a message (POST /v1/messages). It answers once the
// message is committed to disk and queued; delivery is asynchronous (follow
// it with GetMessage or webhooks). Every send carries an Idempotency-Key
// (generated when p has none), which is what makes retrying it safe: a
// send that got a 500 or no answer is retried with the same key and the
// same body, and the server stores one message whatever happens.
func (c *Client) SendMessage(ctx context.Context, p SendParams) (*SendResult, error) {
	key := p.IdempotencyKey
	if key == "" {
		key = c.newKey()
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("switchboard: encoding the send: %w", err)
	}
	u, err := c.endpoint(nil, "v1", "messages")
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, &request{method: http.MethodPost, url: u, body: body, contentType: "application/json",
		idempotencyKey: key, isSend: true})
	if err != nil {
		return nil, err
	}
	var res SendResult
	code, err := resp.decode(&res)
	if err != nil {
		return nil, err
	}
	res.QuietHours = code == CodeQuietHours
	res.Replayed = resp.header.Get("Idempotent-Replayed") == "true"
	res.IdempotencyKey = key
	return &res, nil
}

// GetMessage returns a message of the key's environment
// (GET /v1/messages/{id}); an unknown id is 404 NOT_FOUND.
func (c *Client) GetMessage(ctx context.Context, id string) (*Message, error) {
	var m Message
	if err := c.call(ctx, http.MethodGet, nil, &m, "v1", "messages", id); err != nil {
		return nil, err
	}
	return &m, nil
}

// ListMessagesParams filter a list of messages; filters combine with AND.
type ListMessagesParams struct {
	ListParams
	Status     MessageStatus // only messages in this status
	Direction  Direction     // only outbound or only inbound messages
	To         string        // only messages to this E.164 number
	From       string        // only messages from this E.164 number
	CampaignID string        // only the messages of this campaign
	// CreatedAfter and CreatedBefore, when not zero, keep the messages
	// created strictly after and strictly before them.
	CreatedAfter, CreatedBefore time.Time
}

// ListMessages iterates over the messages of the key's environment, newest
// first, fetching page after page as the loop goes (GET /v1/messages). p
// may be nil.
//
//	for m, err := range c.ListMessages(ctx, &client.ListMessagesParams{Status: client.StatusFailed}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(m.ID, *m.FailureReason)
//	}
func (c *Client) ListMessages(ctx context.Context, p *ListMessagesParams) iter.Seq2[*Message, error] {
	q := url.Values{}
	if p != nil {
		if p.Status != "" {
			q.Set("status", string(p.Status))
		}
		if p.Direction != "" {
			q.Set("direction", string(p.Direction))
		}
		if p.To != "" {
			q.Set("to", p.To)
		}
		if p.From != "" {
			q.Set("from", p.From)
		}
		if p.CampaignID != "" {
			q.Set("campaign_id", p.CampaignID)
		}
		if !p.CreatedAfter.IsZero() {
			q.Set("created_after", p.CreatedAfter.UTC().Format(time.RFC3339Nano))
		}
		if !p.CreatedBefore.IsZero() {
			q.Set("created_before", p.CreatedBefore.UTC().Format(time.RFC3339Nano))
		}
		q = p.ListParams.values(q)
	}
	return list[Message](ctx, c, q, "v1", "messages")
}
