package httpapi

import (
	"errors"
	"fmt"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// ttl: whole seconds from 60 to 86400, with channel auto only (given or by
// default); the record shows it in seconds, or null.
func TestSendTTL(t *testing.T) {
	str := func(s string) *string { return &s }
	n := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		ttl     *int64
		channel *string
		ok      bool
	}{
		{n(59), nil, false}, {n(60), nil, true}, {n(86400), nil, true}, {n(86401), nil, false}, {n(-60), nil, false},
		{n(900), str("auto"), true}, {n(900), str("sms"), false}, {n(900), str("chat"), false}, {nil, str("sms"), true},
	} {
		req := sendRequest{To: str("+15005550000"), Body: str("x"), TTL: c.ttl, Channel: c.channel}
		_, err := req.validate()
		var e *sb.Error
		if c.ok != (err == nil) || err != nil && (!errors.As(err, &e) || e.Code != sb.CodeValidation || e.Details["field"] != "ttl") {
			t.Errorf("ttl %s channel %s: %v, want ok %v", showPtr(c.ttl), showPtr(c.channel), err, c.ok)
		}
	}
	for d, want := range map[time.Duration]any{0: nil, time.Hour: int64(3600), 90 * time.Second: int64(90)} {
		got := ttlJSON(d)
		if want == nil && got != nil || want != nil && (got == nil || *got != want.(int64)) {
			t.Errorf("ttlJSON(%v) = %s, want %v", d, showPtr(got), want)
		}
	}
}

func showPtr[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}
