// Package phonenum validates recipient phone numbers and works out the
// recipient's quiet hours.
//
// Valid applies the API's E.164 rule, which is deliberately strict: a
// '+', then 10 to 15 digits, the first of which is not 0, and nothing else.
//
// Quiet hours are 21:00 to 08:00 in the recipient's local time. Zones finds
// the recipient's time zones from libphonenumber's prefix data, and
// QuietUntil says whether a send must wait and until when. A number that
// libphonenumber places in several zones waits until it is 08:00 or later in
// all of them; a number with no geographic zone (toll-free, premium-rate,
// shared-cost, VoIP, personal and other non-geographic types, and numbers
// libphonenumber cannot classify) uses UTC.
//
// The package embeds the Go time-zone database (time/tzdata) as a fallback,
// so quiet hours stay correct on hosts without /usr/share/zoneinfo instead of
// silently degrading to UTC. A system database, when present, takes
// precedence.
package phonenum

import (
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// Valid reports whether s is a phone number in the API's E.164 form: a
// leading '+' followed only by ASCII digits, 10 to 15 of them, the first of
// which is not 0. Spaces, dashes, brackets and any other characters make the
// number invalid. Valid does not allocate.
func Valid(s string) bool {
	// len(s) counts the '+', so 11..16 bytes means 10..15 digits. Checking the
	// length first makes the indexing below safe.
	if len(s) < 11 || len(s) > 16 || s[0] != '+' || s[1] < '1' || s[1] > '9' {
		return false
	}
	for i := 2; i < len(s); i++ {
		if c := s[i]; c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Compact returns s without the spaces, dashes, dots and brackets people
// write between the digits of a number ("+1 555 000-3333", "+44 (20)
// 7123 4567"), and whether what is left is Valid. A number must still
// start with '+': without its country code it is not E.164.
func Compact(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if Valid(s) {
		return s, true
	}
	var b strings.Builder
	for _, r := range s {
		switch r {
		case ' ', '\u00a0', '\t', '-', '.', '(', ')', '\u2010', '\u2011', '\u2012', '\u2013':
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	return out, Valid(out)
}

// Normalize returns raw, a number as a phone received it (a sender's
// number: "+15551234567", "(555) 123-4567", "0044 20 7123 4567" or an
// alphanumeric sender such as "AMAZON"), in E.164 when it is one: read in
// the country of like (the receiving phone's own E.164 number) when it has
// no country code. Anything that is not a valid number comes back trimmed,
// as it was.
func Normalize(raw, like string) string {
	raw = strings.TrimSpace(raw)
	if Valid(raw) {
		return raw
	}
	region := ""
	if Valid(like) {
		if n, err := phonenumbers.Parse(like, ""); err == nil {
			region = phonenumbers.GetRegionCodeForNumber(n)
		}
	}
	n, err := phonenumbers.Parse(raw, region)
	if err != nil || !phonenumbers.IsValidNumber(n) {
		return raw
	}
	if e := phonenumbers.Format(n, phonenumbers.E164); Valid(e) {
		return e
	}
	return raw
}

// Limits of an alphanumeric sender id (GSM 03.40 allows 11 characters).
const (
	MinSenderID = 3
	MaxSenderID = 11
)

// InboundSender returns the sender of a received text as stored, and
// whether it is one: a number in E.164 (read with Normalize, in the
// country of like), or an alphanumeric sender id or short code of
// MinSenderID to MaxSenderID characters: ASCII letters, digits and inner
// spaces ("AMAZON", "My Bank", "12345"). Anything else ("<script>",
// "=HYPERLINK(...)", a 64-character string) is no sender Switchboard
// stores.
func InboundSender(raw, like string) (string, bool) {
	s := Normalize(raw, like)
	if Valid(s) {
		return s, true
	}
	if len(s) < MinSenderID || len(s) > MaxSenderID || s[0] == ' ' || s[len(s)-1] == ' ' {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ' ') {
			return "", false
		}
	}
	return s, true
}
