package examples

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
)

// VerifySignature reports whether header, the X-Service-Signature value,
// signs body, the raw request body exactly as received. For 24 hours after
// a secret rotation the header holds two values separated by ", " (the new
// secret's and the old one's): one that matches is enough.
func VerifySignature(body []byte, header, secret string) bool {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	ok := false
	for _, value := range strings.Split(header, ",") {
		if hmac.Equal([]byte(strings.TrimSpace(value)), []byte(want)) {
			ok = true
		}
	}
	return ok
}

// Handler verifies each delivery before it parses it, and answers 2xx
// only once the event is handled (anything else is retried).
func Handler(secret string, handle func(event []byte) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !VerifySignature(body, r.Header.Get("X-Service-Signature"), secret) {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		if err := handle(body); err != nil {
			http.Error(w, "try again later", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}
