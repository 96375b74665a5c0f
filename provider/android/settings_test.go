package android

import (
	"encoding/json"
	"testing"
)

// TestDeviceSettingsJSON pins GET /settings to the app's own names: the
// section names of modules/settings/SettingsService.kt, and the keys and
// values each section's import reads (modules/gateway/GatewaySettings.kt:
// notification_channel AUTO or SSE_ONLY; modules/messages/MessagesSettings.kt:
// send_interval_min and send_interval_max in seconds, null for none;
// limit_period an enum of Period, Disabled among them; limit_value;
// processing_order LIFO or FIFO). A key the app does not know is ignored
// by it, so a misspelt one would silently change nothing.
func TestDeviceSettingsJSON(t *testing.T) {
	b, err := json.Marshal(DeviceSettings)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"gateway":{"notification_channel":"SSE_ONLY"},` +
		`"messages":{"send_interval_min":0,"send_interval_max":null,"limit_period":"Disabled","limit_value":0,"processing_order":"FIFO"}}`
	if string(b) != want {
		t.Errorf("GET /settings:\n%s\nwant\n%s", b, want)
	}
}
