package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"net/url"
	"sort"
	"strings"
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
// of a request to fullURL with params. As Twilio's own validators do, it
// also accepts the signature of the URL with the scheme's default port
// written out or left out, since Twilio signs the URL as it was configured.
func ValidSignature(authToken, fullURL string, params url.Values, sig string) bool {
	if sig == "" {
		return false
	}
	ok := 0
	for _, u := range urlForms(fullURL) {
		want := Signature(authToken, u, params)
		ok |= subtle.ConstantTimeCompare([]byte(want), []byte(sig))
	}
	return ok == 1
}

// urlForms returns fullURL, and the same URL with its default port added
// or removed.
func urlForms(fullURL string) []string {
	u, err := url.Parse(fullURL)
	if err != nil || u.Host == "" {
		return []string{fullURL}
	}
	def := map[string]string{"https": "443", "http": "80"}[u.Scheme]
	if def == "" {
		return []string{fullURL}
	}
	other := *u
	switch u.Port() {
	case "":
		other.Host = u.Host + ":" + def
	case def:
		other.Host = strings.TrimSuffix(u.Host, ":"+def)
	default:
		return []string{fullURL}
	}
	return []string{fullURL, other.String()}
}
