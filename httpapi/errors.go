package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	sb "github.com/switchboard/switchboard"
)

// statusOf maps every error code to its HTTP status. It is the only place
// that decides a status for an error.
var statusOf = map[sb.Code]int{
	sb.CodeInvalidAPIKey:        http.StatusUnauthorized,
	sb.CodeTokenExpired:         http.StatusUnauthorized,
	sb.CodeInvalidToken:         http.StatusUnauthorized,
	sb.CodeKeyInactive:          http.StatusForbidden,
	sb.CodeTrialExpired:         http.StatusForbidden,
	sb.CodeTenantSuspended:      http.StatusForbidden,
	sb.CodeForbidden:            http.StatusForbidden,
	sb.CodeValidation:           http.StatusBadRequest,
	sb.CodeInvalidPhoneNumber:   http.StatusBadRequest,
	sb.CodeInvalidTemplate:      http.StatusBadRequest,
	sb.CodeMissingTemplateVar:   http.StatusBadRequest,
	sb.CodeRecipientOptedOut:    http.StatusBadRequest,
	sb.CodeNotFound:             http.StatusNotFound,
	sb.CodeContactNotFound:      http.StatusNotFound,
	sb.CodeCampaignNotFound:     http.StatusNotFound,
	sb.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	sb.CodeDuplicateContact:     http.StatusConflict,
	sb.CodeDuplicateTemplate:    http.StatusConflict,
	sb.CodeDuplicatePhone:       http.StatusConflict,
	sb.CodeIdempotencyConflict:  http.StatusConflict,
	sb.CodeCampaignNotDraft:     http.StatusConflict,
	sb.CodeDeliveryNotFailed:    http.StatusConflict,
	sb.CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	sb.CodeRateLimitExceeded:    http.StatusTooManyRequests,
	sb.CodeQuotaExceeded:        http.StatusTooManyRequests,
	sb.CodeNewContactLimit:      http.StatusTooManyRequests,
	sb.CodeDeliveryFailed:       http.StatusInternalServerError,
	sb.CodeInternal:             http.StatusInternalServerError,
	sb.CodeNoPhoneAvailable:     http.StatusServiceUnavailable,
	sb.CodeDetectionUnavailable: http.StatusServiceUnavailable,
	sb.CodeChannelUnavailable:   http.StatusServiceUnavailable,
	sb.CodeDatabaseUnavailable:  http.StatusServiceUnavailable,
	sb.CodeQuietHours:           http.StatusOK,
}

type errorBody struct {
	Error   string         `json:"error"`
	Code    sb.Code        `json:"code"`
	Details map[string]any `json:"details,omitempty"`
}

// writeError renders err as the error envelope. An *sb.Error keeps its code
// and message; anything else is an internal failure: it is logged with the
// request id and the client learns only that id.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *sb.Error
	if !errors.As(err, &e) {
		id := w.Header().Get("X-Request-Id")
		if r.Context().Err() != nil {
			// The client went away: nobody reads this answer, and it is no
			// server failure.
			s.log.Debug("request canceled by the client", "request_id", id, "method", r.Method, "route", r.Pattern)
		} else {
			s.log.Error("internal error", "request_id", id, "method", r.Method, "route", r.Pattern, "err", err)
		}
		e = sb.Errorf(sb.CodeInternal, "An unexpected error occurred. Quote request id %s when contacting support.", id)
	}
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	if e.Code == sb.CodeDatabaseUnavailable {
		if w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", "1")
		}
	}
	writeJSON(w, status, errorBody{Error: e.Message, Code: e.Code, Details: e.Details})
}
