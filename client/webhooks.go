package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"time"
)

// EventType is the type of a webhook event.
type EventType string

// The event types.
const (
	EventMessageDelivered EventType = "message.delivered" // an outbound message reached the recipient
	EventMessageFailed    EventType = "message.failed"    // delivery of an outbound message failed
	EventMessageReceived  EventType = "message.received"  // an inbound message arrived
	// Phone events (live webhooks only; ParsePhoneEvent reads them).
	EventPhoneOffline     EventType = "phone.offline"     // a live android phone went offline
	EventPhoneOnline      EventType = "phone.online"      // a live android phone came back
	EventPhoneQuarantined EventType = "phone.quarantined" // a phone was quarantined: its sends fail
)

// WebhookRetryPolicy is how long a failing delivery is retried.
type WebhookRetryPolicy string

// The retry policies.
const (
	// WebhookRetryStandard, the default: 3 retries, 2, 4 and 8 s after the
	// failures.
	WebhookRetryStandard WebhookRetryPolicy = "standard"
	// WebhookRetryExtended: 6 retries, 1 min, 5 min, 30 min, 2 h, 8 h and
	// 24 h after the failures, for an endpoint that may be down for hours.
	WebhookRetryExtended WebhookRetryPolicy = "extended"
)

// Webhook is a registered endpoint. Its secret is never returned.
type Webhook struct {
	ID     string      `json:"id"`
	URL    string      `json:"url"`
	Events []EventType `json:"events"`
	// Environment is the environment of the key that registered it; only
	// its events are delivered.
	Environment Environment        `json:"environment"`
	RetryPolicy WebhookRetryPolicy `json:"retry_policy"`
	// PreviousSecretExpiresAt is set while the secret the last rotation
	// replaced still signs deliveries, beside the current one: until then.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	CreatedAt               time.Time  `json:"created_at"`
}

// CreateWebhookParams are the fields of a new webhook; all but RetryPolicy
// are required.
type CreateWebhookParams struct {
	// URL is an absolute http or https URL; private and loopback addresses
	// are refused unless the server allows them.
	URL string `json:"url"`
	// Events is a non-empty subset of the event types.
	Events []EventType `json:"events"`
	// Secret (16 to 256 characters, chosen by you) signs every delivery;
	// give the same to WebhookVerifier or VerifySignature.
	Secret string `json:"secret"`
	// RetryPolicy is WebhookRetryStandard when empty.
	RetryPolicy WebhookRetryPolicy `json:"retry_policy,omitempty"`
}

// CreateWebhook registers an endpoint for the events of the key's tenant
// and environment (POST /v1/webhooks).
func (c *Client) CreateWebhook(ctx context.Context, p CreateWebhookParams) (*Webhook, error) {
	var w Webhook
	if err := c.call(ctx, http.MethodPost, p, &w, "v1", "webhooks"); err != nil {
		return nil, err
	}
	return &w, nil
}

// ListWebhooks lists the webhooks of the key's environment, oldest first
// (GET /v1/webhooks).
func (c *Client) ListWebhooks(ctx context.Context) ([]*Webhook, error) {
	var ws []*Webhook
	if err := c.call(ctx, http.MethodGet, nil, &ws, "v1", "webhooks"); err != nil {
		return nil, err
	}
	return ws, nil
}

// GetWebhook returns one webhook of the key's environment
// (GET /v1/webhooks/{id}).
func (c *Client) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	var w Webhook
	if err := c.call(ctx, http.MethodGet, nil, &w, "v1", "webhooks", id); err != nil {
		return nil, err
	}
	return &w, nil
}

// UpdateWebhookParams are the changes to a webhook; empty fields stay as
// they are.
type UpdateWebhookParams struct {
	// URL, when not empty, is where deliveries go from now on.
	URL string `json:"url,omitempty"`
	// Events, when not empty, are the event types delivered from now on.
	Events []EventType `json:"events,omitempty"`
	// Secret, when not empty, signs every delivery from now on; the secret
	// it replaces goes on signing beside it for 24 hours, so that the
	// receiver can move to the new one at any moment in between (give a
	// WebhookVerifier the secret it has: either verifies).
	Secret string `json:"secret,omitempty"`
	// RetryPolicy, when not empty, sets the delay after the next failure
	// of every pending delivery.
	RetryPolicy WebhookRetryPolicy `json:"retry_policy,omitempty"`
}

// UpdateWebhook changes a webhook's url, events, secret or retry policy
// (PATCH /v1/webhooks/{id}) and returns it.
func (c *Client) UpdateWebhook(ctx context.Context, id string, p UpdateWebhookParams) (*Webhook, error) {
	var w Webhook
	if err := c.call(ctx, http.MethodPatch, p, &w, "v1", "webhooks", id); err != nil {
		return nil, err
	}
	return &w, nil
}

// DeleteWebhook deletes a webhook (DELETE /v1/webhooks/{id}); its pending
// deliveries end as failed.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, nil, nil, "v1", "webhooks", id)
}

// DeliveryStatus is the state of a webhook delivery.
type DeliveryStatus string

// The delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"   // attempts remain
	DeliverySucceeded DeliveryStatus = "succeeded" // an attempt got a 2xx
	DeliveryFailed    DeliveryStatus = "failed"    // the last retry of the policy failed too
)

// WebhookDelivery is one event on its way to one webhook.
type WebhookDelivery struct {
	// ID is the delivery id: the X-Service-Delivery and webhook-id header
	// of every attempt.
	ID        string         `json:"id"`
	Event     EventType      `json:"event"`
	MessageID string         `json:"message_id"` // empty for a phone event
	PhoneID   string         `json:"phone_id"`   // the phone of a phone event
	Status    DeliveryStatus `json:"status"`
	// Attempts are every attempt, oldest first.
	Attempts []WebhookAttempt `json:"attempts"`
	// NextAttemptAt is when the next attempt is due while pending.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time  `json:"created_at"`
}

// WebhookAttempt is one attempt of a delivery.
type WebhookAttempt struct {
	// At is when the attempt started.
	At time.Time
	// StatusCode is the endpoint's HTTP status; nil when no answer came.
	StatusCode *int
	// Error says why the attempt failed; nil on success.
	Error *string
	// Duration is how long the attempt took (to the millisecond).
	Duration time.Duration
}

// UnmarshalJSON reads an attempt, its duration_ms as a Duration.
func (a *WebhookAttempt) UnmarshalJSON(b []byte) error {
	var v struct {
		At         time.Time `json:"at"`
		StatusCode *int      `json:"status_code"`
		Error      *string   `json:"error"`
		DurationMS int64     `json:"duration_ms"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = WebhookAttempt{At: v.At, StatusCode: v.StatusCode, Error: v.Error, Duration: time.Duration(v.DurationMS) * time.Millisecond}
	return nil
}

// MarshalJSON writes an attempt as the API does, its Duration as
// duration_ms.
func (a WebhookAttempt) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		At         time.Time `json:"at"`
		StatusCode *int      `json:"status_code"`
		Error      *string   `json:"error"`
		DurationMS int64     `json:"duration_ms"`
	}{a.At, a.StatusCode, a.Error, a.Duration.Milliseconds()})
}

// ListWebhookDeliveries iterates over a webhook's delivery log, newest
// first, each delivery with all its attempts
// (GET /v1/webhooks/{id}/deliveries). p may be nil.
func (c *Client) ListWebhookDeliveries(ctx context.Context, webhookID string, p *ListParams) iter.Seq2[*WebhookDelivery, error] {
	return list[WebhookDelivery](ctx, c, p.values(nil), "v1", "webhooks", webhookID, "deliveries")
}

// GetWebhookDelivery returns one delivery of a webhook, with all its
// attempts (GET /v1/webhooks/{id}/deliveries/{delivery_id}).
func (c *Client) GetWebhookDelivery(ctx context.Context, webhookID, deliveryID string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	if err := c.call(ctx, http.MethodGet, nil, &d, "v1", "webhooks", webhookID, "deliveries", deliveryID); err != nil {
		return nil, err
	}
	return &d, nil
}

// RetryWebhookDelivery sends a failed delivery again
// (POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry): an attempt now,
// then the retries of the webhook's policy. It returns the delivery, pending
// again. A delivery that is pending or succeeded is 409
// DELIVERY_NOT_FAILED.
func (c *Client) RetryWebhookDelivery(ctx context.Context, webhookID, deliveryID string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	if err := c.call(ctx, http.MethodPost, nil, &d, "v1", "webhooks", webhookID, "deliveries", deliveryID, "retry"); err != nil {
		return nil, err
	}
	return &d, nil
}

// RecoverWebhookParams is the window of a recovery.
type RecoverWebhookParams struct {
	// Since is required: failed deliveries of events at or after it are
	// sent again.
	Since time.Time `json:"since"`
	// Until ends the window; zero is now.
	Until time.Time `json:"until,omitzero"`
}

// WebhookRecovery says how many deliveries a recovery sent again.
type WebhookRecovery struct {
	WebhookID string    `json:"webhook_id"`
	Since     time.Time `json:"since"`
	Until     time.Time `json:"until"`
	Recovered int       `json:"recovered"`
}

// RecoverWebhook sends again every failed delivery of a webhook whose event
// happened in the window, each with a fresh cycle of retries, after an
// outage of its endpoint (POST /v1/webhooks/{id}/recover). Pending and
// succeeded deliveries are left alone.
func (c *Client) RecoverWebhook(ctx context.Context, webhookID string, p RecoverWebhookParams) (*WebhookRecovery, error) {
	var r WebhookRecovery
	if err := c.call(ctx, http.MethodPost, p, &r, "v1", "webhooks", webhookID, "recover"); err != nil {
		return nil, err
	}
	return &r, nil
}
