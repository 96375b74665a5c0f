package android

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// appTime formats a time as the app parses it (Gson's
// yyyy-MM-dd'T'HH:mm:ss.SSSXXX).
type appTime time.Time

func (t appTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format("2006-01-02T15:04:05.000Z07:00") + `"`), nil
}

// sentTime is a time the app wrote (a report's states, an inbound text's
// receivedAt), read leniently: decoding never fails, and a time that cannot
// be read is the zero time, which the callers take as the time of receipt.
//
// The app writes dates with Gson. From Android 7 it uses the pattern
// yyyy-MM-dd'T'HH:mm:ss.SSSXXX (RFC 3339). Before, the app builds the zone
// into the pattern itself as "+" + hours + ":" + minutes of the zone's raw
// offset (extensions/GsonBuilder.kt), so that west of Greenwich the sign is
// doubled and the minutes signed too: New York writes
// 2026-11-27T04:00:00.000+-5:00, Newfoundland +-3:-30. The hours of those
// times are local wall-clock hours, which during summer time are an hour
// ahead of the raw offset written beside them: such a time reads an hour
// late, and the store takes a time ahead of its clock as the time of
// receipt.
type sentTime time.Time

func (t *sentTime) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) != nil {
		*t = sentTime{}
		return nil
	}
	v, _ := parseSentTime(s)
	*t = sentTime(v)
	return nil
}

// maxOffset is the largest zone offset Java accepts (ZoneOffset: 18 hours).
const maxOffset = 18 * 3600

// parseSentTime reads a date and time with a zone as the app writes one:
// RFC 3339 (with or without fraction, 'T' or a space between date and
// time, seconds optional), or with the zone of Android 5 and 6 (+-5:00,
// +-3:-30, -0500, +5). Any minus sign in the zone makes it west of
// Greenwich. It reports false, and the zero time, for anything else.
func parseSentTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	if len(s) < len("2006-01-02T15:04Z") || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') {
		return time.Time{}, false
	}
	day, err := time.Parse("2006-01-02", s[:10])
	if err != nil {
		return time.Time{}, false
	}
	rest := s[11:]
	z := strings.IndexAny(rest, "+-Zz")
	if z < 0 {
		return time.Time{}, false
	}
	var clock time.Time
	ok := false
	for _, layout := range []string{"15:04:05.999999999", "15:04:05", "15:04"} {
		if clock, err = time.Parse(layout, rest[:z]); err == nil {
			ok = true
			break
		}
	}
	if !ok {
		return time.Time{}, false
	}
	offset, ok := parseZone(rest[z:])
	if !ok {
		return time.Time{}, false
	}
	return time.Date(day.Year(), day.Month(), day.Day(), clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(),
		time.FixedZone("", offset)), true
}

// parseZone reads a zone: Z, or a sign, hours (one or two digits) and
// optionally minutes (two digits without a colon, one or two after one),
// where the hours and the minutes may each carry a minus sign of their own
// (the app pads "-1" to no more than two characters). It returns the
// offset in seconds east of Greenwich.
func parseZone(z string) (int, bool) {
	if z == "Z" || z == "z" {
		return 0, true
	}
	if z[0] != '+' && z[0] != '-' {
		return 0, false
	}
	west := strings.Contains(z, "-")
	body := strings.ReplaceAll(z[1:], "-", "")
	if strings.Count(z[1:], "-") > 2 || strings.ContainsAny(body, "+") {
		return 0, false
	}
	hours, minutes, colon := strings.Cut(body, ":")
	if !colon && len(hours) == 4 {
		hours, minutes = hours[:2], hours[2:]
	}
	if len(hours) < 1 || len(hours) > 2 || len(minutes) > 2 || (colon && minutes == "") {
		return 0, false
	}
	h, err := strconv.Atoi(hours)
	if err != nil || h < 0 {
		return 0, false
	}
	m := 0
	if minutes != "" {
		if m, err = strconv.Atoi(minutes); err != nil || m < 0 || m > 59 {
			return 0, false
		}
	}
	offset := h*3600 + m*60
	if offset > maxOffset {
		return 0, false
	}
	if west {
		offset = -offset
	}
	return offset, true
}
