package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// renderSend writes the 202 (or QUIET_HOURS 200) body by hand: it must be
// byte for byte what json.Marshal of the envelope gives.
func TestRenderSend(t *testing.T) {
	at := time.Date(2026, 11, 21, 8, 0, 0, 123456000, time.UTC)
	later := at.Add(13 * time.Hour)
	whole := time.Date(2026, 11, 21, 8, 0, 0, 0, time.FixedZone("x", 3600))
	for _, m := range []*sb.Message{
		{ID: "01JD0000000000000000000000", Status: sb.StatusQueued, From: "+15550000001", To: "+15005550000", Channel: "sms", Env: sb.Live, CreatedAt: at},
		{ID: "01JD0000000000000000000001", Status: sb.StatusQueued, From: "+15550000001", To: "+4915112345678", Channel: "chat", Env: sb.Test, CreatedAt: whole, ScheduledAt: &later},
		{ID: "a<b>&c", Status: "q\"u\\e\u2028", From: "é", To: "\x00", Channel: "\xff", CreatedAt: at}, // escaped: json.Marshal writes it
	} {
		want := dataBody{Data: sendJSON{MessageID: m.ID, Status: m.Status, From: m.From, To: m.To, Channel: m.Channel,
			Livemode: m.Env == sb.Live, CreatedAt: m.CreatedAt, ScheduledAt: m.ScheduledAt}}
		if m.ScheduledAt != nil {
			want.Code = sb.CodeQuietHours
		}
		wb, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(renderSend(m)); got != string(wb)+"\n" {
			t.Errorf("renderSend:\n got %s\nwant %s", got, wb)
		}
	}
	if _, ok := appendSend(nil, &sb.Message{ID: "a<b", CreatedAt: at}); ok {
		t.Error("appendSend wrote a string that needs escaping")
	}
}
