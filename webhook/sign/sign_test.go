package sign

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The expected values below were computed independently with OpenSSL, e.g.
//
//	printf '%s' "$BODY" | openssl dgst -sha256 -hmac "$SECRET"
//	printf '%s' "$ID.$TS.$BODY" | openssl dgst -sha256 -hmac "$SECRET" -binary | base64
const (
	testSecret = "sb_whk_7f3c9a1e"
	testBody   = `{"id":"evt_01J9Z","type":"message.delivered","data":{"to":"+15551234567"}}`
	testID     = "dlv_42"
	testTS     = int64(1700000000)

	wantSig      = "sha256=6d4f2f6fd045475beec99979b9abfcb163a0eb00286dfcbbba01c072d19c6fc0"
	wantEmptySig = "sha256=8be634faab589435be9679badd42f0132340e172ea920fa1c256be0d7c2cfadb"
	wantStdSig   = "v1,jRZ1THHWZxf+1YZx1czzHWFSUXqyvOVGd1yD7hGXpjg="
	wantStdSec   = "whsec_c2Jfd2hrXzdmM2M5YTFl"
)

// The Standard Webhooks specification's published test vector (also
// reproduced with openssl using the base64-decoded key).
const (
	swSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID      = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTS      = int64(1614265330)
	swPayload = `{"test": 2432232314}`
	swSig     = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignatureVectors(t *testing.T) {
	cases := []struct {
		secret, body, want string
	}{
		{testSecret, testBody, wantSig},
		{testSecret, "", wantEmptySig},
		// RFC-style well-known vector (also on Wikipedia's HMAC page).
		{"key", "The quick brown fox jumps over the lazy dog",
			"sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"},
	}
	for _, c := range cases {
		if got := Signature([]byte(c.secret), []byte(c.body)); got != c.want {
			t.Errorf("Signature(%q, %q) = %q, want %q", c.secret, c.body, got, c.want)
		}
	}
}

func TestStandardSignatureVector(t *testing.T) {
	if got := StandardSignature([]byte(testSecret), testID, testTS, []byte(testBody)); got != wantStdSig {
		t.Errorf("StandardSignature = %q, want %q", got, wantStdSig)
	}
	if got := StandardSecret([]byte(testSecret)); got != wantStdSec {
		t.Errorf("StandardSecret = %q, want %q", got, wantStdSec)
	}
}

func TestStandardWebhooksPublishedVector(t *testing.T) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(swSecret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	if got := StandardSecret(key); got != swSecret {
		t.Errorf("StandardSecret round trip = %q, want %q", got, swSecret)
	}
	if got := StandardSignature(key, swID, swTS, []byte(swPayload)); got != swSig {
		t.Errorf("StandardSignature = %q, want %q", got, swSig)
	}
	now := time.Unix(swTS, 0)
	if err := VerifyStandard(key, swID, "1614265330", []byte(swPayload), swSig, now, 0); err != nil {
		t.Errorf("VerifyStandard published vector: %v", err)
	}
}

func TestVerify(t *testing.T) {
	secret, body := []byte(testSecret), []byte(testBody)
	if !Verify(secret, body, wantSig) {
		t.Error("Verify rejected a valid signature")
	}
	if !Verify(secret, body, "sha256="+strings.ToUpper(wantSig[7:])) {
		t.Error("Verify rejected upper-case hex")
	}
	bad := []string{
		"",
		"sha256=",
		wantSig[7:],                    // missing prefix
		"sha1=" + wantSig[7:],          // wrong algorithm
		wantSig[:len(wantSig)-1],       // odd-length hex
		wantSig[:len(wantSig)-2],       // truncated
		wantSig[:len(wantSig)-1] + "1", // one digit changed
		"sha256=zz" + wantSig[9:],      // not hex
		wantEmptySig,                   // signature of another body
	}
	for _, h := range bad {
		if Verify(secret, body, h) {
			t.Errorf("Verify accepted %q", h)
		}
	}
	if Verify([]byte("other"), body, wantSig) {
		t.Error("Verify accepted a signature under the wrong secret")
	}
	if Verify(secret, append(body, ' '), wantSig) {
		t.Error("Verify accepted a modified body")
	}
}

func TestVerifyStandard(t *testing.T) {
	secret, body := []byte(testSecret), []byte(testBody)
	ts := "1700000000"
	now := time.Unix(testTS, 0)
	other := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))

	cases := []struct {
		name      string
		id, ts    string
		body      []byte
		header    string
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{"valid", testID, ts, body, wantStdSig, now, time.Minute, nil},
		{"default tolerance", testID, ts, body, wantStdSig, now.Add(4 * time.Minute), 0, nil},
		{"several signatures", testID, ts, body, other + " v1a,AAAA " + wantStdSig, now, time.Minute, nil},
		{"extra whitespace", testID, ts, body, "  " + wantStdSig + "  ", now, time.Minute, nil},
		{"edge of tolerance past", testID, ts, body, wantStdSig, now.Add(time.Minute), time.Minute, nil},
		{"edge of tolerance future", testID, ts, body, wantStdSig, now.Add(-time.Minute), time.Minute, nil},
		{"too old", testID, ts, body, wantStdSig, now.Add(time.Minute + time.Second), time.Minute, ErrTimestampTooOld},
		{"too new", testID, ts, body, wantStdSig, now.Add(-time.Minute - time.Second), time.Minute, ErrTimestampTooNew},
		{"default tolerance exceeded", testID, ts, body, wantStdSig, now.Add(6 * time.Minute), 0, ErrTimestampTooOld},
		{"bad timestamp", testID, "17e8", body, wantStdSig, now, time.Minute, ErrInvalidTimestamp},
		{"missing id", "", ts, body, wantStdSig, now, time.Minute, ErrMissingHeaders},
		{"missing ts", testID, "", body, wantStdSig, now, time.Minute, ErrMissingHeaders},
		{"missing signature", testID, ts, body, " ", now, time.Minute, ErrMissingHeaders},
		{"wrong id", "dlv_43", ts, body, wantStdSig, now, time.Minute, ErrNoMatchingSignature},
		{"modified body", testID, ts, append([]byte(testBody), ' '), wantStdSig, now, time.Minute, ErrNoMatchingSignature},
		{"only other signature", testID, ts, body, other, now, time.Minute, ErrNoMatchingSignature},
		{"wrong version", testID, ts, body, "v2," + wantStdSig[3:], now, time.Minute, ErrNoMatchingSignature},
		{"no version", testID, ts, body, wantStdSig[3:], now, time.Minute, ErrNoMatchingSignature},
		{"bad base64", testID, ts, body, "v1,!!!", now, time.Minute, ErrNoMatchingSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := VerifyStandard(secret, c.id, c.ts, c.body, c.header, c.now, c.tolerance)
			if !errors.Is(err, c.want) {
				t.Fatalf("VerifyStandard = %v, want %v", err, c.want)
			}
		})
	}
	if err := VerifyStandard([]byte("other"), testID, ts, body, wantStdSig, now, time.Minute); !errors.Is(err, ErrNoMatchingSignature) {
		t.Errorf("wrong secret: got %v", err)
	}
}

func TestHeaders(t *testing.T) {
	secret, body := []byte(testSecret), []byte(testBody)
	h := http.Header{}
	h.Set("Content-Type", "text/plain") // must be replaced
	at := time.Unix(testTS, 999_000_000)
	Headers(h, secret, testID, "message.delivered", at, body)

	want := map[string]string{
		"Content-Type":        "application/json",
		"User-Agent":          "Switchboard-Webhooks/1",
		"X-Service-Signature": wantSig,
		"X-Service-Event":     "message.delivered",
		"X-Service-Delivery":  testID,
		"webhook-id":          testID,
		"webhook-timestamp":   "1700000000",
		"webhook-signature":   wantStdSig,
	}
	for k, v := range want {
		if got := h.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("header %s = %q, want [%q]", k, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("got %d headers, want %d: %v", len(h), len(want), h)
	}

	// A receiver can verify both schemes from the headers alone.
	if !Verify(secret, body, h.Get(HeaderSignature)) {
		t.Error("Verify rejected the X-Service-Signature header")
	}
	err := VerifyStandard(secret, h.Get(HeaderStandardID), h.Get(HeaderStandardTimestamp), body,
		h.Get(HeaderStandardSignature), at, DefaultTolerance)
	if err != nil {
		t.Errorf("VerifyStandard rejected the webhook-signature header: %v", err)
	}
}

// TestHeadersRotating: while a secret is rotated, both headers carry a
// signature per secret, the new one first, and a receiver with either
// secret verifies the delivery; one with another secret does not.
func TestHeadersRotating(t *testing.T) {
	oldSecret, newSecret, body := []byte(testSecret), []byte("the-new-secret-0123456789"), []byte(testBody)
	h := http.Header{}
	at := time.Unix(testTS, 0)
	HeadersRotating(h, [][]byte{newSecret, oldSecret}, testID, "message.delivered", at, body)
	if got, want := h.Get(HeaderSignature), Signature(newSecret, body)+", "+wantSig; got != want {
		t.Errorf("X-Service-Signature = %q, want %q", got, want)
	}
	if got, want := h.Get(HeaderStandardSignature), StandardSignature(newSecret, testID, testTS, body)+" "+wantStdSig; got != want {
		t.Errorf("webhook-signature = %q, want %q", got, want)
	}
	for _, secret := range [][]byte{oldSecret, newSecret} {
		if !Verify(secret, body, h.Get(HeaderSignature)) {
			t.Errorf("Verify with %q rejected the rotated X-Service-Signature", secret)
		}
		if err := VerifyStandard(secret, testID, h.Get(HeaderStandardTimestamp), body, h.Get(HeaderStandardSignature), at, 0); err != nil {
			t.Errorf("VerifyStandard with %q: %v", secret, err)
		}
	}
	if Verify([]byte("a-third-secret-0123456789"), body, h.Get(HeaderSignature)) {
		t.Error("Verify accepted the rotated header under a third secret")
	}
	if Verify(oldSecret, append(body, ' '), h.Get(HeaderSignature)) {
		t.Error("Verify accepted a modified body")
	}
}
