package switchboard

import "time"

// Webhook limits (contract section 5).
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

// Webhook is a registered endpoint. Its secret signs every delivery and is
// never shown again.
type Webhook struct {
	ID        string
	TenantID  string
	Env       Environment
	URL       string
	Events    []string
	Secret    string
	CreatedAt time.Time
	Deleted   bool
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
