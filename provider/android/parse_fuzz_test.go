package android

// Fuzz tests of the request bodies of the device protocol. Besides never
// failing on any input, the parsers must accept whatever the app's own Go
// types (github.com/android-sms-gateway/client-go) write, and read the same
// values from it.

import (
	"cmp"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/android-sms-gateway/client-go/smsgateway"

	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/provider/android/agent"
)

func FuzzParseReports(f *testing.F) {
	errText := "RESULT_ERROR_LIMIT_EXCEEDED"
	at := time.Date(2026, 11, 23, 12, 0, 0, 123e6, time.UTC)
	for _, req := range []smsgateway.MobilePatchMessageRequest{
		{},
		{{ID: "01M847TEDM5QQE4AZ62FSSSAAG", State: smsgateway.ProcessingStateProcessed,
			Recipients: []smsgateway.RecipientState{{PhoneNumber: "+15551234567", State: smsgateway.ProcessingStateProcessed}},
			States:     map[string]time.Time{"Processed": at}}},
		{{ID: "a", State: smsgateway.ProcessingStateFailed,
			Recipients: []smsgateway.RecipientState{{PhoneNumber: "x", State: smsgateway.ProcessingStateFailed, Error: &errText}},
			States:     map[string]time.Time{"Failed": at, "Sent": at.Add(-time.Second)}},
			{ID: "b", State: "Delivered"}},
	} {
		b, _ := json.Marshal(req)
		f.Add(b)
	}
	for _, s := range []string{`[{"id":""}]`, `{"id":"x"}`, `[{"id":"x","states":{"Sent":"yesterday"}}]`, `null`, `[null]`, ``,
		`[{"id":"x","state":"Processed","states":{"Processed":"2026-11-27T04:00:00.000+-5:00","Pending":5}}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		reports, err := parseReports(raw)
		if err == nil {
			if len(reports) > maxPatchItems {
				t.Fatalf("%d reports accepted", len(reports))
			}
			for _, r := range reports {
				if r.MessageID == "" || len(r.MessageID) > maxID || utf8.RuneCountInString(r.Error) > maxError {
					t.Fatalf("accepted report %+v", r)
				}
			}
		}
		// The app's types: what they read, the parser reads the same way.
		var req smsgateway.MobilePatchMessageRequest
		if json.Unmarshal(raw, &req) != nil || len(req) > maxPatchItems {
			return
		}
		for _, it := range req {
			if it.ID == "" || len(it.ID) > maxID {
				return
			}
		}
		if err != nil {
			t.Fatalf("client-go reads %q, the parser refuses it: %v", raw, err)
		}
		if len(reports) != len(req) {
			t.Fatalf("%d reports, client-go reads %d", len(reports), len(req))
		}
		for i, it := range req {
			r := reports[i]
			if r.MessageID != it.ID || r.State != string(it.State) || !r.At.Equal(it.States[string(it.State)]) || !r.SentAt.Equal(cmp.Or(it.States["Processed"], it.States["Sent"])) {
				t.Fatalf("report %d: %+v, client-go reads %+v", i, r, it)
			}
		}
	})
}

func FuzzParseInbound(f *testing.F) {
	for _, ev := range []agent.Event{
		{ID: "ev1", WebhookID: InboundWebhookID, Event: "sms:received", DeviceID: "d",
			Payload: map[string]any{"messageId": "m", "sender": "+15551234567", "message": "STOP", "receivedAt": "2026-11-23T12:00:00.000+01:00"}},
		{ID: "ev2", Event: "sms:sent", Payload: map[string]any{"messageId": "m"}},
		{ID: "", Event: "sms:received", Payload: map[string]any{"sender": "x", "message": "y"}},
		{ID: "ev3", Event: "sms:received", Payload: map[string]any{"sender": "(415) 555-0100", "message": "hi", "receivedAt": "2026-11-27T04:00:00.000+-5:00"}},
		{ID: "ev4", Event: "sms:received", Payload: map[string]any{"sender": "=HYPERLINK(\"x\")", "message": "hi"}},
	} {
		b, _ := json.Marshal(ev)
		f.Add(b)
	}
	f.Add([]byte(`{"event":"sms:received","id":"x","payload":"nope"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		text, drop := parseInboundBody(raw, "+14155550199")
		switch {
		case drop != "" && text != nil:
			t.Fatalf("dropped (%s) and accepted %+v", drop, text)
		case drop != "":
			for _, r := range []string{dropMalformed, dropNoID, dropEmpty, dropSender} {
				if drop == r {
					return
				}
			}
			t.Fatalf("unknown reason %q", drop)
		case text == nil:
			return
		}
		if _, ok := phonenum.InboundSender(text.Sender, ""); !ok || text.EventID == "" || len(text.EventID) > maxID ||
			strings.TrimSpace(text.Body) == "" || utf8.RuneCountInString(text.Body) > maxInboundBody {
			t.Fatalf("accepted %+v from %q", text, raw)
		}
	})
}

func FuzzParseRegister(f *testing.F) {
	name := "Pixel 8"
	b, _ := json.Marshal(smsgateway.MobileRegisterRequest{Name: &name})
	f.Add(b)
	f.Add([]byte(`{"name": "   ", "simCards": [{"slotIndex": 0, "simNumber": 1}]}`))
	f.Add([]byte(`{"name": 5}`))
	token := "gHz-T6NezDlOfllr7F-Be"
	b, _ = json.Marshal(smsgateway.MobileRegisterRequest{Name: &name, PushToken: &token})
	f.Add(b)
	f.Add([]byte(`{"pushToken": null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, push, err := parseRegister(raw)
		if err != nil {
			return
		}
		if strings.TrimSpace(got) == "" || utf8.RuneCountInString(got) > maxDeviceName {
			t.Fatalf("device name %q from %q", got, raw)
		}
		var req smsgateway.MobileRegisterRequest
		if json.Unmarshal(raw, &req) == nil && push != (req.PushToken != nil && strings.TrimSpace(*req.PushToken) != "") {
			t.Fatalf("push token %v from %q, client-go reads %v", push, raw, req.PushToken)
		}
		if json.Unmarshal(raw, &req) == nil && req.Name != nil && strings.TrimSpace(*req.Name) != "" &&
			utf8.RuneCountInString(strings.TrimSpace(*req.Name)) <= maxDeviceName && got != strings.TrimSpace(*req.Name) {
			t.Fatalf("device name %q, client-go reads %q", got, *req.Name)
		}
	})
}

// legacyAppTime writes t as the app writes a date on Android 5 and 6, in a
// zone of raw offset offset (extensions/GsonBuilder.kt): the wall-clock
// time, then "+" and the offset's hours and minutes, each a Kotlin Int
// division of the offset in milliseconds, padded to two characters.
func legacyAppTime(t time.Time, offset time.Duration) string {
	raw := int(offset / time.Millisecond)
	zone := "Z"
	if raw != 0 {
		pad := func(n int) string {
			s := strconv.Itoa(n)
			if len(s) < 2 {
				s = "0" + s
			}
			return s
		}
		zone = "+" + pad(raw/3600000) + ":" + pad(raw%3600000/60000)
	}
	return t.In(time.FixedZone("", int(offset/time.Second))).Format("2006-01-02T15:04:05.000") + zone
}

func TestParseSentTime(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
	}{
		{"2026-11-27T04:00:00.000+-5:00", at},                      // New York on Android 5 and 6
		{"2026-11-27T05:30:00.000+-3:-30", at},                     // Newfoundland
		{"2026-11-27T14:30:00.000+05:30", at},                      // India: as RFC 3339
		{"2026-11-27T09:00:00.000Z", at},                           // Greenwich
		{"2026-11-26T23:00:00.000+-10:00", at},                     // Hawaii
		{"2026-11-27T08:30:00.000+00:-30", at},                     // a raw offset of -30 minutes
		{"2026-11-27T04:00:00.000-05:00", at},                      // Android 7 and later
		{"2026-11-27T04:00:00-0500", at},                           // without colon or fraction
		{"2026-11-27 04:00:00.123456789-05:00", at.Add(123456789)}, // a space, nanoseconds
		{"2026-11-27T04:00-05:00", at},                             // no seconds
		{"2026-11-27T14:00:00.000+5", at},                          // hours alone
	} {
		got, ok := parseSentTime(tt.in)
		if !ok || !got.Equal(tt.want) {
			t.Errorf("parseSentTime(%q) = %v, %v; want %v", tt.in, got, ok, tt.want)
		}
		if got := legacyAppTime(at, 0); got != "2026-11-27T09:00:00.000Z" {
			t.Fatalf("legacyAppTime: %s", got)
		}
	}
	for _, in := range []string{"", "yesterday", "2026-11-27", "2026-11-27T04:00:00.000", "2026-11-27T04:00:00.000+-19:00", "2026-11-27T04:00:00.000+-5:60", "2026-11-27T04:00:00.000+-5:", "2026-11-27T25:00:00Z", "2026-13-27T04:00:00Z",
		"2026-11-27T04:00:00.000+--5:-00", "2026-11-27T04:00:00.000Zed", "2026-11-27T04:00:00.000++5:00"} {
		if got, ok := parseSentTime(in); ok || !got.IsZero() {
			t.Errorf("parseSentTime(%q) = %v, %v; want unreadable", in, got, ok)
		}
	}
	// As the app writes them for New York and Newfoundland.
	if got := legacyAppTime(at, -5*time.Hour); got != "2026-11-27T04:00:00.000+-5:00" {
		t.Errorf("legacyAppTime(New York) = %s", got)
	}
	if got := legacyAppTime(at, -(3*time.Hour + 30*time.Minute)); got != "2026-11-27T05:30:00.000+-3:-30" {
		t.Errorf("legacyAppTime(Newfoundland) = %s", got)
	}
}

// FuzzParseSentTime: any string is read or refused without failing; what
// Go reads as RFC 3339 is read the same; what the app writes on Android 5
// and 6, in any zone, is read as the instant it wrote.
func FuzzParseSentTime(f *testing.F) {
	for _, s := range []string{"2026-11-27T04:00:00.000+-5:00", "2026-11-27T05:30:00.000+-3:-30", "2026-11-27T09:00:00Z", "x"} {
		f.Add(s, int64(1_795_000_000_000), int16(-300))
	}
	f.Add("", int64(0), int16(0))
	f.Add("2026-11-27T04:00:00.000+18:00", int64(-62_135_596_800_000), int16(1080))
	f.Fuzz(func(t *testing.T, s string, ms int64, minutes int16) {
		got, ok := parseSentTime(s)
		if !ok && !got.IsZero() {
			t.Fatalf("parseSentTime(%q) refused it with %v", s, got)
		}
		if want, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s)); err == nil && (!ok || !got.Equal(want)) {
			t.Fatalf("parseSentTime(%q) = %v, %v; Go's RFC 3339 reads %v", s, got, ok, want)
		}
		if ok {
			if _, off := got.Zone(); off <= -24*3600 || off >= 24*3600 {
				t.Fatalf("parseSentTime(%q): zone of %d s", s, off)
			}
		}
		// The app's own dates, years 1 to 9999, zones within 18 hours.
		const lo, hi = -62_135_596_800_000, 253_402_300_799_000
		if ms < lo || ms > hi {
			ms = lo + (ms%(hi-lo)+(hi-lo))%(hi-lo)
		}
		offset := time.Duration(int(minutes)%(18*60+1)) * time.Minute
		at := time.UnixMilli(ms).UTC()
		if at.In(time.FixedZone("", int(offset/time.Second))).Year() > 9999 || at.In(time.FixedZone("", int(offset/time.Second))).Year() < 1 {
			return
		}
		in := legacyAppTime(at, offset)
		if got, ok := parseSentTime(in); !ok || !got.Equal(at) {
			t.Fatalf("parseSentTime(%q) = %v, %v; the app wrote %v", in, got, ok, at)
		}
	})
}

// TestParseReportsLegacyTimes: a report is never refused for its times:
// Android 5 and 6's are read, an unreadable one is zero (the time of
// receipt, for the store).
func TestParseReportsLegacyTimes(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	raw := `[{"id":"a","state":"Sent","recipients":[{"phoneNumber":"+15551234567","state":"Sent"}],
		"states":{"Processed":"2026-11-27T05:30:00.000+-3:-30","Sent":"2026-11-27T04:00:01.000+-5:00"}},
		{"id":"b","state":"Failed","states":{"Failed":"soon","Pending":12345,"Processed":null}}]`
	reports, err := parseReports([]byte(raw))
	if err != nil || len(reports) != 2 {
		t.Fatalf("parseReports: %v %v", reports, err)
	}
	if r := reports[0]; !r.At.Equal(at.Add(time.Second)) || !r.SentAt.Equal(at) {
		t.Errorf("report a: at %v, sent at %v; want %v and %v", r.At, r.SentAt, at.Add(time.Second), at)
	}
	if r := reports[1]; !r.At.IsZero() || !r.SentAt.IsZero() {
		t.Errorf("report b: at %v, sent at %v; want zero times", r.At, r.SentAt)
	}
	text, drop := parseInboundBody([]byte(`{"id":"e","event":"sms:received","payload":{"sender":"+15551234567","message":"STOP","receivedAt":"2026-11-27T05:30:00.000+-3:-30"}}`), "")
	if drop != "" || text == nil || text.Body != "STOP" {
		t.Errorf("parseInbound with an Android 5 time: %+v %v", text, drop)
	}
}
