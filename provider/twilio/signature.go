package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"net/url"
	"sort"
)

// Signature returns the X-Twilio-Signature of a request Twilio makes to
// fullURL with the form params: the Base64 of the HMAC-SHA1, keyed with the
// account's auth token, of the URL (with its query string) followed by every
// parameter's name and value, sorted by name (and, for a name given more
// than once, by value).
func Signature(authToken, fullURL string, params url.Values) string {
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(fullURL))
	for _, k := range names {
		vs := append([]string(nil), params[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			mac.Write([]byte(k))
			mac.Write([]byte(v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// ValidSignature reports, in constant time, whether sig is the signature
// of a request to fullURL with params.
func ValidSignature(authToken, fullURL string, params url.Values, sig string) bool {
	want := Signature(authToken, fullURL, params)
	return sig != "" && subtle.ConstantTimeCompare([]byte(want), []byte(sig)) == 1
}
