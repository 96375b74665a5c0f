package twilio

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
)

// MaxCallbackBytes bounds the body of a callback.
const MaxCallbackBytes = 64 << 10

// ParseForm reads an application/x-www-form-urlencoded body as Twilio sends
// its callbacks. It refuses what Twilio never sends: a body over
// MaxCallbackBytes, malformed escapes, and text that is not UTF-8.
func ParseForm(body []byte) (url.Values, error) {
	if len(body) > MaxCallbackBytes {
		return nil, errors.New("the body is too large")
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, errors.New("the body is not a form")
	}
	for k, vs := range v {
		if !utf8.ValidString(k) {
			return nil, errors.New("a parameter name is not UTF-8")
		}
		for _, s := range vs {
			if !utf8.ValidString(s) {
				return nil, fmt.Errorf("the parameter %q is not UTF-8", k)
			}
		}
	}
	return v, nil
}

// StatusCallback is what a status callback says about a message.
type StatusCallback struct {
	MessageSID string
	Status     string
	ErrorCode  string
}

// ParseStatusCallback reads a status callback's parameters: MessageSid
// (SmsSid in older callbacks), MessageStatus (SmsStatus) and ErrorCode.
func ParseStatusCallback(v url.Values) (StatusCallback, error) {
	c := StatusCallback{MessageSID: v.Get("MessageSid"), Status: strings.ToLower(v.Get("MessageStatus")), ErrorCode: strings.TrimSpace(v.Get("ErrorCode"))}
	if c.MessageSID == "" {
		c.MessageSID = v.Get("SmsSid")
	}
	if c.Status == "" {
		c.Status = strings.ToLower(v.Get("SmsStatus"))
	}
	if c.MessageSID == "" || c.Status == "" {
		return c, errors.New("a status callback needs MessageSid and MessageStatus")
	}
	if len(c.MessageSID) > 64 {
		return c, errors.New("MessageSid is too long")
	}
	if c.ErrorCode != "" {
		if _, err := strconv.Atoi(c.ErrorCode); err != nil {
			return c, errors.New("ErrorCode is not a number")
		}
	}
	return c, nil
}

// Outcome maps a status to what it says of the message: delivered (and
// read) delivered; undelivered, failed and canceled failed, with the status
// and the error code and its meaning as the reason; the others (queued,
// accepted, scheduled, sending, sent) are not final.
func (c StatusCallback) Outcome() (state int, reason string) {
	switch c.Status {
	case "delivered", "read":
		return sb.ReceiptDelivered, ""
	case "undelivered", "failed", "canceled":
		reason = "Twilio status " + c.Status
		if c.ErrorCode != "" {
			reason += ": " + ErrorText(c.ErrorCode)
		}
		return sb.ReceiptFailed, reason
	}
	return sb.ReceiptPending, ""
}

// errorCodes are the meanings of the Twilio error codes a message meets
// most (https://www.twilio.com/docs/api/errors).
var errorCodes = map[string]string{
	"20003": "authentication failed",
	"20429": "too many requests",
	"21211": "invalid 'To' phone number",
	"21212": "invalid 'From' phone number",
	"21408": "permission to send an SMS has not been enabled for the region",
	"21606": "the 'From' number is not a valid, SMS-capable number of the account",
	"21608": "the number is unverified (trial accounts send only to verified numbers)",
	"21610": "the recipient unsubscribed (replied STOP)",
	"21611": "the 'From' number has too many messages queued",
	"21612": "Twilio cannot route to this number",
	"21614": "the 'To' number is not a valid mobile number",
	"21617": "the message body exceeds 1,600 characters",
	"30001": "queue overflow",
	"30002": "account suspended",
	"30003": "unreachable destination handset",
	"30004": "message blocked",
	"30005": "unknown destination handset",
	"30006": "landline or unreachable carrier",
	"30007": "message filtered by the carrier",
	"30008": "unknown error",
	"30010": "message price exceeds the max price",
	"30034": "the sender is not registered for A2P 10DLC",
}

// ErrorText is "error CODE (meaning)" for a Twilio error code.
func ErrorText(code string) string {
	if d, ok := errorCodes[code]; ok {
		return "error " + code + " (" + d + ")"
	}
	return "error " + code
}
