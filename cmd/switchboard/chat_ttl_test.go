package main

import (
	"testing"
)

// A send's ttl: whole seconds from 60 to 86400, with channel auto only
// (given or by default), kept in the record; 3600 when left out of an auto
// send, null on a send of channel sms or chat and on a message received.
func TestMessageTTL(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := msgTenant(t, db)
		to := msgAwake(t)
		for _, body := range []map[string]any{
			{"to": to, "body": "x", "ttl": 59},
			{"to": to, "body": "x", "ttl": 86401},
			{"to": to, "body": "x", "ttl": -1},
			{"to": to, "body": "x", "ttl": 90.5},
			{"to": to, "body": "x", "ttl": "600"},
			{"to": to, "body": "x", "ttl": 600, "channel": "sms"},
			{"to": to, "body": "x", "ttl": 600, "channel": "chat"},
		} {
			r := s.do(t, "POST", "/v1/messages", tn.Test, body)
			if r.Status != 400 || r.Code() != "VALIDATION_ERROR" {
				t.Errorf("%v: %d %s, want 400 VALIDATION_ERROR", body, r.Status, r.Raw)
			} else if _, isInt := body["ttl"].(int); isInt && r.Field() != "ttl" {
				t.Errorf("%v: details.field %q, want ttl", body, r.Field())
			}
		}
		for _, c := range []struct {
			body map[string]any
			ttl  any
		}{
			{map[string]any{"to": to, "body": "x", "ttl": 60}, 60.0},
			{map[string]any{"to": to, "body": "x", "ttl": 86400, "channel": "auto"}, 86400.0},
			{map[string]any{"to": to, "body": "x", "ttl": 900}, 900.0},
			{map[string]any{"to": to, "body": "x"}, 3600.0},
			{map[string]any{"to": to, "body": "x", "channel": "sms"}, nil},
			{map[string]any{"to": to, "body": "x", "channel": "chat"}, nil},
		} {
			id := msgSend(t, s, tn.Test, c.body)["message_id"].(string)
			if got := msgGet(t, s, tn.Test, id)["ttl"]; got != c.ttl {
				t.Errorf("%v: the record's ttl is %v, want %v", c.body, got, c.ttl)
			}
		}
	})
}
