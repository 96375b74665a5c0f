package twilio

import (
	"net/url"
	"strings"
	"testing"

	sb "github.com/switchboard/switchboard"
)

// The example of Twilio's request validators: auth token 12345, this URL
// and these parameters sign as RSOYDt4T1cUTdK1PDd93/VVr8B8=.
func TestSignatureKnownValue(t *testing.T) {
	u := "https://mycompany.com/myapp.php?foo=1&bar=2"
	params := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+14158675309"}, "Digits": {"1234"}, "From": {"+14158675309"}, "To": {"+18005551212"}}
	const want = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
	if got := Signature("12345", u, params); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	if !ValidSignature("12345", u, params, want) {
		t.Fatal("the valid signature was refused")
	}
	// Twilio signs the URL as configured: with or without the default port.
	if !ValidSignature("12345", "https://mycompany.com:443/myapp.php?foo=1&bar=2", params, want) {
		t.Fatal("the signature of the URL without its default port was refused")
	}
	for name, bad := range map[string]func() (string, url.Values, string){
		"another token":   func() (string, url.Values, string) { return u, params, Signature("54321", u, params) },
		"another URL":     func() (string, url.Values, string) { return u + "&x=1", params, want },
		"a changed param": func() (string, url.Values, string) { p := clone(params); p.Set("Digits", "1235"); return u, p, want },
		"an added param": func() (string, url.Values, string) {
			p := clone(params)
			p.Set("MessageStatus", "delivered")
			return u, p, want
		},
		"no signature":    func() (string, url.Values, string) { return u, params, "" },
		"a truncated one": func() (string, url.Values, string) { return u, params, want[:10] },
		"another port": func() (string, url.Values, string) {
			return "https://mycompany.com:8443/myapp.php?foo=1&bar=2", params, want
		},
	} {
		bu, bp, bs := bad()
		if ValidSignature("12345", bu, bp, bs) {
			t.Errorf("%s: accepted", name)
		}
	}
}

func clone(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func TestStatusOutcome(t *testing.T) {
	for status, want := range map[string]int{
		"delivered": sb.ReceiptDelivered, "read": sb.ReceiptDelivered,
		"undelivered": sb.ReceiptFailed, "failed": sb.ReceiptFailed, "canceled": sb.ReceiptFailed,
		"queued": sb.ReceiptPending, "accepted": sb.ReceiptPending, "sending": sb.ReceiptPending, "sent": sb.ReceiptPending, "new": sb.ReceiptPending,
	} {
		state, reason := StatusCallback{Status: status, ErrorCode: "30007"}.Outcome()
		if state != want {
			t.Errorf("%s: state %d, want %d", status, state, want)
		}
		if want == sb.ReceiptFailed && reason != "Twilio status "+status+": error 30007 (message filtered by the carrier)" {
			t.Errorf("%s: reason %q", status, reason)
		}
	}
}

func FuzzParseCallback(f *testing.F) {
	for _, s := range []string{
		"MessageSid=SM1&MessageStatus=delivered",
		"SmsSid=SM2&SmsStatus=undelivered&ErrorCode=30003",
		"MessageSid=SM3&MessageStatus=failed&ErrorCode=x",
		"a=%zz", "MessageSid=&MessageStatus=sent", "%E2%82%AC=%FF",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := ParseForm(body)
		if err != nil {
			return
		}
		// What parses encodes back to the same parameters.
		again, err := ParseForm([]byte(v.Encode()))
		if err != nil || again.Encode() != v.Encode() {
			t.Fatalf("%q re-encoded does not parse the same: %v", body, err)
		}
		c, err := ParseStatusCallback(v)
		if err != nil {
			return
		}
		if c.MessageSID == "" || c.Status == "" || c.Status != strings.ToLower(c.Status) {
			t.Fatalf("callback %+v", c)
		}
		state, reason := c.Outcome()
		if (state == sb.ReceiptFailed) != (reason != "") {
			t.Fatalf("state %d reason %q", state, reason)
		}
		// The signature of what parsed is checked without a panic.
		ValidSignature("token", "https://sb.example/api/providers/tw/status/x", v, "sig")
	})
}
