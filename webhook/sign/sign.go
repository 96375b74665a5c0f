// Package sign computes and verifies the signatures Switchboard attaches to
// webhook deliveries.
//
// Every delivery carries two independent signature schemes over the exact
// bytes of the request body as sent:
//
//   - X-Service-Signature: "sha256=" followed by the lowercase hex
//     HMAC-SHA256 of the body, keyed with the endpoint secret.
//   - The Standard Webhooks headers webhook-id, webhook-timestamp and
//     webhook-signature. The signature is "v1," followed by the standard
//     base64 HMAC-SHA256 of "<id>.<timestamp>.<body>", keyed with the
//     secret's bytes. Standard Webhooks libraries expect the secret in the
//     form returned by StandardSecret.
//
// Headers sets all of them on an outgoing request. Verify and
// VerifyStandard are what a receiver would use; Switchboard uses them in its
// own tests.
//
// While a webhook's secret is being rotated, a delivery is signed with the
// new secret and the previous one (HeadersRotating): X-Service-Signature
// then lists two values separated by ", " ("sha256=<new>, sha256=<old>"),
// and webhook-signature two space-separated "v1," entries, as Standard
// Webhooks (and Stripe's v1 signatures) allow. A receiver accepts a
// delivery when any value matches its secret, so it can move to the new
// secret at any moment of the overlap.
package sign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names set by Headers.
const (
	HeaderSignature         = "X-Service-Signature"
	HeaderEvent             = "X-Service-Event"
	HeaderDelivery          = "X-Service-Delivery"
	HeaderStandardID        = "webhook-id"
	HeaderStandardTimestamp = "webhook-timestamp"
	HeaderStandardSignature = "webhook-signature"
)

// UserAgent is the User-Agent header value sent with every delivery.
const UserAgent = "Switchboard-Webhooks/1"

// StandardSecretPrefix is the prefix Standard Webhooks libraries expect in
// front of the base64-encoded secret.
const StandardSecretPrefix = "whsec_"

// DefaultTolerance is the timestamp tolerance VerifyStandard applies when it
// is given a non-positive tolerance. It matches the Standard Webhooks
// reference libraries.
const DefaultTolerance = 5 * time.Minute

// Errors returned by VerifyStandard.
var (
	// ErrMissingHeaders means the id, timestamp or signature header is empty.
	ErrMissingHeaders = errors.New("sign: missing webhook-id, webhook-timestamp or webhook-signature")
	// ErrInvalidTimestamp means the timestamp is not a decimal Unix time.
	ErrInvalidTimestamp = errors.New("sign: invalid webhook-timestamp")
	// ErrTimestampTooOld means the timestamp is further in the past than the tolerance.
	ErrTimestampTooOld = errors.New("sign: webhook-timestamp too old")
	// ErrTimestampTooNew means the timestamp is further in the future than the tolerance.
	ErrTimestampTooNew = errors.New("sign: webhook-timestamp too new")
	// ErrNoMatchingSignature means no v1 signature in the header matches.
	ErrNoMatchingSignature = errors.New("sign: no matching signature")
)

func mac(secret []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func standardMAC(secret []byte, id, ts string, body []byte) []byte {
	return mac(secret, []byte(id), []byte{'.'}, []byte(ts), []byte{'.'}, body)
}

// Signature returns the X-Service-Signature value for body: "sha256="
// followed by the lowercase hex HMAC-SHA256 of body keyed with secret.
func Signature(secret, body []byte) string {
	return "sha256=" + hex.EncodeToString(mac(secret, body))
}

// StandardSignature returns the Standard Webhooks webhook-signature value:
// "v1," followed by the standard base64 HMAC-SHA256, keyed with secret, of
// id, ".", the decimal Unix timestamp ts, ".", and body.
func StandardSignature(secret []byte, id string, ts int64, body []byte) string {
	sum := standardMAC(secret, id, strconv.FormatInt(ts, 10), body)
	return "v1," + base64.StdEncoding.EncodeToString(sum)
}

// StandardSecret returns secret in the form Standard Webhooks libraries
// accept: "whsec_" followed by the standard base64 encoding of its bytes.
// It is meant for documentation and for receivers.
func StandardSecret(secret []byte) string {
	return StandardSecretPrefix + base64.StdEncoding.EncodeToString(secret)
}

// Signatures returns the X-Service-Signature value for body signed with
// each of secrets, in order: one "sha256=<hex>" value, or several
// separated by ", " while a secret is rotated.
func Signatures(secrets [][]byte, body []byte) string {
	vals := make([]string, len(secrets))
	for i, s := range secrets {
		vals[i] = Signature(s, body)
	}
	return strings.Join(vals, ", ")
}

// Verify reports whether header is a valid X-Service-Signature for body
// under secret: one value of the form "sha256=<hex>", or several separated
// by commas (while the sender rotates its secret), of which one must match.
// The hex digits may be in either case. MAC comparisons are constant-time.
func Verify(secret, body []byte, header string) bool {
	want := mac(secret, body)
	ok := false
	for _, v := range strings.Split(header, ",") {
		hexSum, found := strings.CutPrefix(strings.TrimSpace(v), "sha256=")
		if !found {
			continue
		}
		got, err := hex.DecodeString(hexSum)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	return ok
}

// VerifyStandard checks a Standard Webhooks signature as a receiver would.
// id and ts are the webhook-id and webhook-timestamp header values and
// header is the webhook-signature value, which may carry several
// space-separated signatures of the form "<version>,<base64>"; the check
// succeeds if any "v1" entry matches, and other versions are ignored. The
// timestamp must lie within tolerance of now in either direction; a
// non-positive tolerance means DefaultTolerance. MAC comparisons are
// constant-time. VerifyStandard returns nil on success and one of the
// package's Err values otherwise.
func VerifyStandard(secret []byte, id, ts string, body []byte, header string, now time.Time, tolerance time.Duration) error {
	if id == "" || ts == "" || strings.TrimSpace(header) == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrInvalidTimestamp
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Compare in whole seconds to avoid overflowing time.Duration with
	// absurd timestamps.
	tol := int64(tolerance / time.Second)
	nowSec := now.Unix()
	if sec < nowSec && nowSec-sec > tol {
		return ErrTimestampTooOld
	}
	if sec > nowSec && sec-nowSec > tol {
		return ErrTimestampTooNew
	}
	want := standardMAC(secret, id, ts, body)
	matched := false
	for _, entry := range strings.Fields(header) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			matched = true
		}
	}
	if !matched {
		return ErrNoMatchingSignature
	}
	return nil
}

// Headers sets the delivery headers on h for a request whose body is
// exactly body: Content-Type (application/json), User-Agent
// (Switchboard-Webhooks/1), X-Service-Signature, X-Service-Event (event),
// X-Service-Delivery (deliveryID), and the Standard Webhooks headers
// webhook-id (deliveryID), webhook-timestamp (ts as Unix seconds) and
// webhook-signature. deliveryID must stay the same across retries of one
// delivery; ts should be the time of the attempt. Existing values of these
// headers are replaced. Header names are stored in canonical form, which
// HTTP treats as equivalent to the lowercase spelling.
func Headers(h http.Header, secret []byte, deliveryID, event string, ts time.Time, body []byte) {
	HeadersRotating(h, [][]byte{secret}, deliveryID, event, ts, body)
}

// HeadersRotating is Headers for a delivery signed with several secrets
// (the new one first, while a rotation overlaps): X-Service-Signature lists
// a value per secret separated by ", ", and webhook-signature a "v1," entry
// per secret separated by spaces.
func HeadersRotating(h http.Header, secrets [][]byte, deliveryID, event string, ts time.Time, body []byte) {
	unix := ts.Unix()
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	h.Set(HeaderSignature, Signatures(secrets, body))
	h.Set(HeaderEvent, event)
	h.Set(HeaderDelivery, deliveryID)
	h.Set(HeaderStandardID, deliveryID)
	h.Set(HeaderStandardTimestamp, strconv.FormatInt(unix, 10))
	std := make([]string, len(secrets))
	for i, s := range secrets {
		std[i] = StandardSignature(s, deliveryID, unix, body)
	}
	h.Set(HeaderStandardSignature, strings.Join(std, " "))
}
