package rbm

import (
	"encoding/base64"
	"testing"
)

// FuzzParseEvent: any body is refused or read without panicking; a read
// event's data is what the signature covers, and a handshake carries both
// fields.
func FuzzParseEvent(f *testing.F) {
	data := `{"senderPhoneNumber":"+15551230001","eventType":"DELIVERED","eventId":"e1","messageId":"m1","sendTime":"2026-11-27T10:00:00Z"}`
	f.Add([]byte(`{"message":{"data":"` + base64.StdEncoding.EncodeToString([]byte(data)) + `","messageId":"1"}}`))
	f.Add([]byte(`{"clientToken":"t","secret":"s"}`))
	f.Add([]byte(`{"message":{"data":"!!"}}`))
	f.Add([]byte(`{"secret":"s"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		secret, token, raw, ev, err := ParseEvent(body)
		if err != nil {
			if ev != nil || raw != nil {
				t.Fatal("an error with an event")
			}
			return
		}
		if ev == nil && raw != nil {
			t.Fatal("data without an event")
		}
		if ev != nil && (secret != "" || token != "") {
			t.Fatal("an event that is also a handshake")
		}
	})
}
