package switchboard

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable, machine-readable error code (docs/api.md).
type Code string

// The error codes of the API. They never change between API versions.
const (
	CodeInvalidAPIKey        Code = "INVALID_API_KEY"
	CodeKeyInactive          Code = "KEY_INACTIVE"
	CodeTrialExpired         Code = "TRIAL_EXPIRED"
	CodeTenantSuspended      Code = "TENANT_SUSPENDED"
	CodeForbidden            Code = "FORBIDDEN"
	CodeTokenExpired         Code = "TOKEN_EXPIRED"
	CodeInvalidToken         Code = "INVALID_TOKEN"
	CodeValidation           Code = "VALIDATION_ERROR"
	CodeInvalidPhoneNumber   Code = "INVALID_PHONE_NUMBER"
	CodeInvalidTemplate      Code = "INVALID_TEMPLATE"
	CodeMissingTemplateVar   Code = "MISSING_TEMPLATE_VAR"
	CodeRecipientOptedOut    Code = "RECIPIENT_OPTED_OUT"
	CodeNoPhoneAvailable     Code = "NO_PHONE_AVAILABLE"
	CodeDeliveryFailed       Code = "DELIVERY_FAILED"
	CodeQuietHours           Code = "QUIET_HOURS"
	CodeRateLimitExceeded    Code = "RATE_LIMIT_EXCEEDED"
	CodeQuotaExceeded        Code = "QUOTA_EXCEEDED"
	CodeNewContactLimit      Code = "NEW_CONTACT_LIMIT"
	CodeNotFound             Code = "NOT_FOUND"
	CodeContactNotFound      Code = "CONTACT_NOT_FOUND"
	CodeCampaignNotFound     Code = "CAMPAIGN_NOT_FOUND"
	CodeDuplicateContact     Code = "DUPLICATE_CONTACT"
	CodeDuplicateTemplate    Code = "DUPLICATE_TEMPLATE"
	CodeDuplicatePhone       Code = "DUPLICATE_PHONE"
	CodeIdempotencyConflict  Code = "IDEMPOTENCY_CONFLICT"
	CodeCampaignNotDraft     Code = "CAMPAIGN_NOT_DRAFT"
	CodeDeliveryNotFailed    Code = "DELIVERY_NOT_FAILED"
	CodeDetectionUnavailable Code = "DETECTION_UNAVAILABLE"
	CodeChannelUnavailable   Code = "CHANNEL_UNAVAILABLE"
	// CodeDatabaseUnavailable: the database could not take the request in
	// time (the node's connection pool stayed exhausted, the server refused
	// more clients, or it could not be reached). Retry later.
	CodeDatabaseUnavailable Code = "DATABASE_UNAVAILABLE"
	CodeMethodNotAllowed    Code = "METHOD_NOT_ALLOWED"
	CodePayloadTooLarge     Code = "PAYLOAD_TOO_LARGE"
	CodeInternal            Code = "INTERNAL_ERROR"
)

// Error is the one error type of the service. Its Message is safe to show to
// end users; anything that is not an *Error is an internal failure whose text
// never leaves the process.
type Error struct {
	Code    Code
	Message string
	// Details is rendered as the envelope's optional "details" object, e.g.
	// {"field": "rate_limit"} or {"existing_id": "..."}.
	Details map[string]any
	// RetryAfter, when set, is how long the caller should wait before it
	// tries again; the API sends it as Retry-After, in whole seconds
	// rounded up.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns a VALIDATION_ERROR naming the offending field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeValidation, Message: fmt.Sprintf(format, args...), Details: map[string]any{"field": field}}
}

// InvalidPhone returns an INVALID_PHONE_NUMBER naming the field that holds
// the number.
func InvalidPhone(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidPhoneNumber, Message: fmt.Sprintf(format, args...), Details: map[string]any{"field": field}}
}

// Seconds writes a count of seconds for an error message: "1 second", "2
// seconds".
func Seconds(n int) string {
	if n == 1 {
		return "1 second"
	}
	return fmt.Sprintf("%d seconds", n)
}

// ErrorCode returns the code of err, or INTERNAL_ERROR when err is not an *Error.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return CodeInternal
}

// ErrNotFound is the general NOT_FOUND error returned by stores; handlers may
// replace it with a resource-specific code.
var ErrNotFound = &Error{Code: CodeNotFound, Message: "The resource does not exist."}
