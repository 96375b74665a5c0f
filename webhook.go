package switchboard

import "time"

// Webhook limits (docs/webhooks.md).
const (
	MaxWebhooksPerEnv = 20
	MinSecretLength   = 16
	MaxSecretLength   = 256
)

// Retry policies: how long a delivery that keeps failing is tried.
const (
	// RetryStandard is the default schedule: three
	// retries, 2, 4 and 8 seconds after the failures.
	RetryStandard = "standard"
	// RetryExtended rides out an endpoint's outage or a deploy, as Stripe
	// and Svix retry for days: six retries, 1 minute, 5 minutes, 30
	// minutes, 2 hours, 8 hours and 24 hours after the failures (about
	// 34.6 hours in all).
	RetryExtended = "extended"
)

// RetryPolicies lists the retry policies, the default first.
var RetryPolicies = []string{RetryStandard, RetryExtended}

// retrySchedules are each policy's waits after the first, second, ...
// failed attempt of a cycle; a failure past the last is final.
var retrySchedules = map[string][]time.Duration{
	RetryStandard: {2 * time.Second, 4 * time.Second, 8 * time.Second},
	RetryExtended: {time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 8 * time.Hour, 24 * time.Hour},
}

// RetrySchedule returns the waits of policy after each failed attempt of a
// cycle; an unknown policy (none is stored) is the standard one.
func RetrySchedule(policy string) []time.Duration {
	if s, ok := retrySchedules[policy]; ok {
		return s
	}
	return retrySchedules[RetryStandard]
}

// RetryDelay returns how long after the tries-th failed attempt of a cycle
// (1 for the first) the next attempt falls due under policy, and false when
// that attempt was the cycle's last: the delivery is failed.
func RetryDelay(policy string, tries int) (time.Duration, bool) {
	s := RetrySchedule(policy)
	if tries < 1 || tries > len(s) {
		return 0, false
	}
	return s[tries-1], true
}

// CheckRetryPolicy checks a webhook's retry_policy.
func CheckRetryPolicy(policy string) error {
	if _, ok := retrySchedules[policy]; !ok {
		return Invalid("retry_policy", "retry_policy must be %q (retries after 2, 4 and 8 seconds) or %q (retries for about a day and a half).",
			RetryStandard, RetryExtended)
	}
	return nil
}

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
	// RetryPolicy is RetryStandard or RetryExtended.
	RetryPolicy string
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
	URL         *string
	Events      []string
	Secret      *string
	RetryPolicy *string
}

// Delivery is one event on its way to one webhook.
type Delivery struct {
	ID            string
	WebhookID     string
	TenantID      string
	Env           Environment
	Event         string
	MessageID     string // empty for a phone event
	PhoneID       string // the phone of a phone event
	Payload       []byte
	Status        string
	Attempts      int
	Tries         int
	NextAttemptAt *time.Time
	CreatedAt     time.Time
	Log           []Attempt
	// Test marks a delivery of a test event sent from the dashboard: its
	// MessageID names no message.
	Test bool
}

// Attempt is one try at delivering.
type Attempt struct {
	At         time.Time
	StatusCode int // 0 when no response came
	Error      string
	Duration   time.Duration
	// Response is the start of the endpoint's answer (MaxResponseKept
	// bytes at most, as valid UTF-8).
	Response string
}

// MaxResponseKept is how much of an endpoint's answer to an attempt is
// kept for the delivery log.
const MaxResponseKept = 2048

// AttemptResult is the outcome of one attempt, to record.
type AttemptResult struct {
	DeliveryID string
	Attempt    Attempt
	OK         bool
}
