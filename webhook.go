package switchboard

import "time"

// Webhook limits (docs/webhooks.md).
const (
	MaxWebhooksPerEnv = 20
	MinSecretLength   = 16
	MaxSecretLength   = 256
	// WebhookTries is the first attempt and three retries.
	WebhookTries = 4
)

// RetryDelays are the waits after the first, second and third failed
// attempt of a delivery.
var RetryDelays = []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
)

// SecretOverlap is how long the secret a rotation replaces goes on signing
// deliveries beside the new one, so that a receiver can move to the new
// secret at any moment within it without missing a delivery.
const SecretOverlap = 24 * time.Hour

// Webhook is a registered endpoint. Its secret signs every delivery and is
// never shown again.
type Webhook struct {
	ID       string
	TenantID string
	Env      Environment
	URL      string
	Events   []string
	Secret   string
	// PreviousSecret is the secret the last rotation replaced; it signs
	// too, until PreviousSecretExpiresAt.
	PreviousSecret          string
	PreviousSecretExpiresAt *time.Time
	CreatedAt               time.Time
	Deleted                 bool
}

// SigningSecrets returns the secrets that sign a delivery attempted at now:
// the webhook's secret, then the previous one while it has not expired.
func (w *Webhook) SigningSecrets(now time.Time) [][]byte {
	out := [][]byte{[]byte(w.Secret)}
	if w.PreviousSecret != "" && w.PreviousSecretExpiresAt != nil && now.Before(*w.PreviousSecretExpiresAt) {
		out = append(out, []byte(w.PreviousSecret))
	}
	return out
}

// PreviousSecretActive reports whether the previous secret still signs at
// now; the API shows its expiry only then.
func (w *Webhook) PreviousSecretActive(now time.Time) bool {
	return len(w.SigningSecrets(now)) > 1
}

// WebhookPatch is a change to a webhook; nil fields stay as they are.
type WebhookPatch struct {
	URL    *string
	Events []string
	Secret *string
}

// Delivery is one event on its way to one webhook.
type Delivery struct {
	ID            string
	WebhookID     string
	TenantID      string
	Env           Environment
	Event         string
	MessageID     string
	Payload       []byte
	Status        string
	Attempts      int
	Tries         int
	NextAttemptAt *time.Time
	CreatedAt     time.Time
	Log           []Attempt
}

// Attempt is one try at delivering.
type Attempt struct {
	At         time.Time
	StatusCode int // 0 when no response came
	Error      string
	Duration   time.Duration
}

// AttemptResult is the outcome of one attempt, to record.
type AttemptResult struct {
	DeliveryID string
	Attempt    Attempt
	OK         bool
}
