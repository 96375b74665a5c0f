package switchboard

import (
	"crypto/rand"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
)

// Dashboard sign-in (docs/dashboard.md): a one-time link that an operator
// makes, or an API key pasted on the sign-in page, opens a session kept on
// the server. Only SHA-256 hashes (HashSecret) of link tokens and session
// ids are stored.
const (
	// DashboardLinkTTL is how long a sign-in link stays valid, unused.
	DashboardLinkTTL = 15 * time.Minute
	// DashboardSessionTTL is how long a session lasts from its sign-in.
	DashboardSessionTTL = 12 * time.Hour
)

// How a dashboard session began.
const (
	SignInLink = "link"
	SignInKey  = "key"
)

// DashboardLink is a one-time sign-in link of a tenant.
type DashboardLink struct {
	TokenHash string
	TenantID  string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// DashboardSession is a signed-in browser.
type DashboardSession struct {
	// IDHash is the stored form of the session id the browser holds.
	IDHash   string
	TenantID string
	// Method is SignInLink or SignInKey; KeyID is the key pasted
	// (SignInKey), whose revocation or deactivation ends the session.
	Method string
	KeyID  string
	// TestOnly is set for a session opened with a test key, which sees the
	// test environment only, as the key does.
	TestOnly bool
	// Ended, when set, says why a rule ended the session: it opens no
	// page any more.
	Ended     string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Why a rule ended a dashboard session.
const (
	SessionEndedSuspended = "suspended"
	SessionEndedKey       = "key"
	// SessionEndedElsewhere: another session of the tenant signed it out
	// (sign out everywhere, or this one by name).
	SessionEndedElsewhere = "elsewhere"
)

// NewDashboardSecret returns a fresh sign-in token or session id: 43
// characters of [0-9A-Za-z] (about 256 bits).
func NewDashboardSecret() (string, error) { return randomAlnum(rand.Reader, 43) }

// IDFloor returns the smallest id that NewID can make at t or later (the
// ULID of t's millisecond with zero entropy), so that `id >= IDFloor(t)`
// selects what was created from t on, and `id < IDFloor(t)` what was
// created before t's millisecond. A t before 1970 gives the smallest id of
// all; one past the ULID's last millisecond (the year 10889), an id above
// every id NewID makes.
func IDFloor(t time.Time) string {
	var u ulid.ULID
	if t.Before(time.UnixMilli(0)) {
		return u.String()
	}
	if err := u.SetTime(ulid.Timestamp(t)); err != nil {
		u = ulid.ULID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	return u.String()
}

// DayCount is how many messages of a status were created on a UTC day.
type DayCount struct {
	Day    time.Time
	Status string
	N      int
}

// WebhookHealth sums up a webhook's recent deliveries that did not succeed:
// Failed gave up, Retrying are failing and still being retried. Latest is
// the newest of them, with its attempts.
type WebhookHealth struct {
	WebhookID string
	Failed    int
	Retrying  int
	Latest    *Delivery
}

// MaxKeyName is the longest name of an API key, in characters.
const MaxKeyName = 100

// CheckKeyName applies the rule of a key's name.
func CheckKeyName(name string) error {
	if strings.TrimSpace(name) == "" {
		return Invalid("name", "name is required.")
	}
	if utf8.RuneCountInString(name) > MaxKeyName {
		return Invalid("name", "name must be at most %d characters.", MaxKeyName)
	}
	return nil
}

// CheckKeyRateLimit applies the rules of a key's own rate limit, given:
// at least 1, at most the plan's ceiling, and at most MaxRateLimit.
func CheckKeyRateLimit(limit int, plan Plan) error {
	if limit < 1 {
		return Invalid("rate_limit", "rate_limit must be a whole number of at least 1.")
	}
	if plan.RateLimit > 0 && limit > plan.RateLimit {
		return Invalid("rate_limit", "rate_limit %d is above the %s plan's ceiling of %d requests per minute.", limit, plan.Name, plan.RateLimit)
	}
	if limit > MaxRateLimit {
		return Invalid("rate_limit", "rate_limit must be at most %d requests per minute.", MaxRateLimit)
	}
	return nil
}

// CheckWebhookURL applies the form rules of a webhook url: required, an
// absolute http or https URL of at most 2,048 bytes. Where it may point is
// checked apart (SSRF).
func CheckWebhookURL(raw string) error {
	if raw == "" {
		return Invalid("url", "url is required.")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(raw) > 2048 {
		return Invalid("url", "url must be an absolute http or https URL.")
	}
	return nil
}

// CheckWebhookEvents checks a webhook's events and returns them without
// repeats.
func CheckWebhookEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, Invalid("events", "events must list at least one of %s.", strings.Join(EventTypes, ", "))
	}
	var out []string
	for _, e := range events {
		if !slices.Contains(EventTypes, e) {
			return nil, Invalid("events", "Unknown event %q; events are %s.", e, strings.Join(EventTypes, ", "))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// CheckWebhookSecret applies the length rule of a webhook's secret.
func CheckWebhookSecret(secret string) error {
	if n := utf8.RuneCountInString(secret); n < MinSecretLength || n > MaxSecretLength {
		return Invalid("secret", "secret must be %d to %d characters.", MinSecretLength, MaxSecretLength)
	}
	return nil
}

// templateName is the rule of a template's name.
var templateName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// CheckTemplateName applies the rule of a template's name: 1 to 64
// characters of a-z, 0-9, _ and -; a name in capitals is told the lower
// case one.
func CheckTemplateName(name string) error {
	if name == "" {
		return Invalid("name", "name is required: 1 to 64 characters of a-z, 0-9, _ and -.")
	}
	if templateName.MatchString(name) {
		return nil
	}
	hint := ""
	if lower := strings.ToLower(name); lower != name && templateName.MatchString(lower) {
		hint = fmt.Sprintf(" (lower case only: %q would do)", lower)
	}
	if len(name) > 80 {
		name = name[:80] + "..."
	}
	return Invalid("name", "name must be 1 to 64 characters of a-z, 0-9, _ and -%s; %q is not.", hint, name)
}
