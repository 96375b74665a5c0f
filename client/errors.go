package client

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Code is a stable, machine-readable error code of the API. Codes never
// change between API versions; match on them, never on an error's text.
//
// A Code is also an error value, so that errors.Is finds it in any error the
// client returns:
//
//	if errors.Is(err, client.CodeRecipientOptedOut) { ... }
type Code string

// Error returns the code itself, so that a Code can be the target of
// errors.Is.
func (c Code) Error() string { return string(c) }

// The codes of the API (the ErrorCode schema of the OpenAPI document, and the
// error_code values of failed messages).
const (
	CodeInvalidAPIKey        Code = "INVALID_API_KEY"       // 401: key missing, malformed or revoked
	CodeKeyInactive          Code = "KEY_INACTIVE"          // 403: key deactivated by the operator
	CodeTrialExpired         Code = "TRIAL_EXPIRED"         // 403: the trial ended with no plan chosen
	CodeTenantSuspended      Code = "TENANT_SUSPENDED"      // 403: tenant suspended by the operator
	CodeForbidden            Code = "FORBIDDEN"             // 403: e.g. a test key creating a live key or a phone
	CodeTokenExpired         Code = "TOKEN_EXPIRED"         // 401: identity-provider token expired
	CodeInvalidToken         Code = "INVALID_TOKEN"         // 401: identity-provider token otherwise invalid
	CodeValidation           Code = "VALIDATION_ERROR"      // 400: a field is invalid; Details.Field names it
	CodeInvalidPhoneNumber   Code = "INVALID_PHONE_NUMBER"  // 400: not E.164
	CodeInvalidTemplate      Code = "INVALID_TEMPLATE"      // 400: no template of that name
	CodeMissingTemplateVar   Code = "MISSING_TEMPLATE_VAR"  // 400: a template variable has no value
	CodeRecipientOptedOut    Code = "RECIPIENT_OPTED_OUT"   // 400: the recipient sent STOP
	CodeNoPhoneAvailable     Code = "NO_PHONE_AVAILABLE"    // 503: no sending phone available
	CodeDeliveryFailed       Code = "DELIVERY_FAILED"       // never an answer: the ErrorCode of a failed message
	CodeCampaignCanceled     Code = "CAMPAIGN_CANCELED"     // never an answer: the ErrorCode of a withdrawn campaign message
	CodeQuietHours           Code = "QUIET_HOURS"           // 200: not an error, see SendResult.QuietHours
	CodeRateLimitExceeded    Code = "RATE_LIMIT_EXCEEDED"   // 429: see Error.RetryAfter
	CodeQuotaExceeded        Code = "QUOTA_EXCEEDED"        // 429: the month's API calls are used up
	CodeNewContactLimit      Code = "NEW_CONTACT_LIMIT"     // 429: the day's first-time recipients are used up
	CodeNotFound             Code = "NOT_FOUND"             // 404
	CodeContactNotFound      Code = "CONTACT_NOT_FOUND"     // 404
	CodeCampaignNotFound     Code = "CAMPAIGN_NOT_FOUND"    // 404
	CodeDuplicateContact     Code = "DUPLICATE_CONTACT"     // 409: Details.ExistingID is the contact
	CodeDuplicateTemplate    Code = "DUPLICATE_TEMPLATE"    // 409
	CodeDuplicatePhone       Code = "DUPLICATE_PHONE"       // 409: Details.ExistingID is the phone, when it is yours
	CodeIdempotencyConflict  Code = "IDEMPOTENCY_CONFLICT"  // 409: the Idempotency-Key was used with another body
	CodeCampaignNotDraft     Code = "CAMPAIGN_NOT_DRAFT"    // 409
	CodeDeliveryNotFailed    Code = "DELIVERY_NOT_FAILED"   // 409: only a failed webhook delivery is sent again
	CodeDetectionUnavailable Code = "DETECTION_UNAVAILABLE" // 503: channel detection unreachable
	CodeChannelUnavailable   Code = "CHANNEL_UNAVAILABLE"   // 503: the chat engine is down
	CodeDatabaseUnavailable  Code = "DATABASE_UNAVAILABLE"  // 503: the database is busy or unreachable; retried
	CodeMethodNotAllowed     Code = "METHOD_NOT_ALLOWED"    // 405
	CodePayloadTooLarge      Code = "PAYLOAD_TOO_LARGE"     // 413
	CodeInternal             Code = "INTERNAL_ERROR"        // 500
)

// ErrorDetails are the optional details of an error answer.
type ErrorDetails struct {
	// Field is the field, parameter or header at fault (VALIDATION_ERROR,
	// MISSING_TEMPLATE_VAR, ...): "to", "data.name", "contact_ids[3]".
	Field string `json:"field,omitempty"`
	// ExistingID is the resource that already exists (DUPLICATE_CONTACT,
	// DUPLICATE_PHONE).
	ExistingID string `json:"existing_id,omitempty"`
	// Checks are a node's checks when GET /readyz answers 503.
	Checks map[string]ReadinessCheck `json:"checks,omitempty"`
}

// Error is an error answer of the API, after any retries. Every error the
// client returns for an answer of the server is an *Error; transport
// failures and a canceled context are returned as they are.
type Error struct {
	// StatusCode is the HTTP status of the answer.
	StatusCode int
	// Code is the stable error code. It is empty only when the answer was not
	// the API's envelope (a proxy's error page, say).
	Code Code
	// Message is the server's explanation, safe to show to people; its
	// wording may change.
	Message string
	// Details holds the optional details of the error.
	Details ErrorDetails
	// RequestID is the answer's X-Request-Id: quote it when reporting a
	// problem.
	RequestID string
	// RetryAfter is the answer's Retry-After (429 answers, and 503
	// NO_PHONE_AVAILABLE when a phone may be back or a daily limit starts
	// again), zero when absent.
	RetryAfter time.Duration
}

// Error describes the error; it never contains the API key.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "switchboard: %d", e.StatusCode)
	if e.Code != "" {
		b.WriteString(" " + string(e.Code))
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Details.Field != "" {
		b.WriteString(" (field " + e.Details.Field + ")")
	}
	if e.RequestID != "" {
		b.WriteString(" [request " + e.RequestID + "]")
	}
	return b.String()
}

// Is reports whether target is e's Code, or an *Error with the same Code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code != "" && e.Code == t
	case *Error:
		return t != nil && e.Code != "" && e.Code == t.Code
	}
	return false
}

// ErrorCode returns the Code of the *Error in err's chain, or "" when there
// is none (nil, a transport failure, a canceled context).
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
