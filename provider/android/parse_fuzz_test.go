package android

// Fuzz tests of the request bodies of the device protocol. Besides never
// failing on any input, the parsers must accept whatever the app's own Go
// types (github.com/android-sms-gateway/client-go) write, and read the same
// values from it.

import (
	"cmp"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/android-sms-gateway/client-go/smsgateway"

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
	for _, s := range []string{`[{"id":""}]`, `{"id":"x"}`, `[{"id":"x","states":{"Sent":"yesterday"}}]`, `null`, `[null]`, ``} {
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
	} {
		b, _ := json.Marshal(ev)
		f.Add(b)
	}
	f.Add([]byte(`{"event":"sms:received","id":"x","payload":"nope"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		text, err := parseInbound(raw)
		if err != nil || text == nil {
			return
		}
		if text.EventID == "" || len(text.EventID) > maxID || strings.TrimSpace(text.Sender) == "" || len(text.Sender) > 64 ||
			text.Body == "" || utf8.RuneCountInString(text.Body) > maxInboundBody {
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
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := parseRegister(raw)
		if err != nil {
			return
		}
		if strings.TrimSpace(got) == "" || utf8.RuneCountInString(got) > maxDeviceName {
			t.Fatalf("device name %q from %q", got, raw)
		}
		var req smsgateway.MobileRegisterRequest
		if json.Unmarshal(raw, &req) == nil && req.Name != nil && strings.TrimSpace(*req.Name) != "" &&
			utf8.RuneCountInString(strings.TrimSpace(*req.Name)) <= maxDeviceName && got != strings.TrimSpace(*req.Name) {
			t.Fatalf("device name %q, client-go reads %q", got, *req.Name)
		}
	})
}
