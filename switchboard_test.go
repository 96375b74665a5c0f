package switchboard

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

func TestValidID(t *testing.T) {
	if id := NewID(); !ValidID(id) {
		t.Errorf("ValidID(NewID()) = false for %q", id)
	}
	for _, bad := range []string{"", "garbage", "01ARZ3NDEKTSV4RRFFQ69G5FA", "01ARZ3NDEKTSV4RRFFQ69G5FAVX", "01arz3ndektsv4rrffq69g5fav",
		"01ARZ3NDEKTSV4RRFFQ69G5FAI", "01ARZ3NDEKTSV4RRFFQ69G5FAU", "81ARZ3NDEKTSV4RRFFQ69G5FAV", "01ARZ3NDEKTSV4RRFF-69G5FAV"} {
		if ValidID(bad) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}

// TestIDFloor: ids made at t's millisecond or later sort at or after IDFloor(t);
// ids of earlier milliseconds sort before it.
func TestIDFloor(t *testing.T) {
	at := time.Date(2026, 1, 31, 12, 0, 0, 123_456_789, time.UTC)
	var maxEntropy [10]byte
	for i := range maxEntropy {
		maxEntropy[i] = 0xff
	}
	idOf := func(t time.Time, entropy []byte) string {
		return ulid.MustNew(ulid.Timestamp(t), bytes.NewReader(entropy)).String()
	}
	b := IDFloor(at)
	if last := idOf(at.Add(-time.Millisecond), maxEntropy[:]); !(last < b) {
		t.Errorf("IDFloor(%v) = %s, not after the last id of the millisecond before (%s)", at, b, last)
	}
	if first := idOf(at.Truncate(time.Millisecond), make([]byte, 10)); first < b {
		t.Errorf("IDFloor(%v) = %s, after the first id of its millisecond (%s)", at, b, first)
	}
	if now := NewID(); IDFloor(time.Now().Add(-time.Second)) > now || IDFloor(time.Now().Add(time.Second)) < now {
		t.Errorf("NewID %s is not within a second of IDFloor", now)
	}
	if got := IDFloor(time.Unix(-1, 0)); got != strings.Repeat("0", 26) {
		t.Errorf("IDFloor before 1970 = %s", got)
	}
	if got := IDFloor(time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)); !ValidID(got) || got < NewID() {
		t.Errorf("IDFloor far in the future = %s", got)
	}
}

func TestSeconds(t *testing.T) {
	for n, want := range map[int]string{0: "0 seconds", 1: "1 second", 2: "2 seconds", 60: "60 seconds"} {
		if got := Seconds(n); got != want {
			t.Errorf("Seconds(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSigningSecrets(t *testing.T) {
	now := time.Now()
	later, earlier := now.Add(time.Hour), now.Add(-time.Second)
	for _, c := range []struct {
		w    Webhook
		want []string
	}{
		{Webhook{Secret: "new"}, []string{"new"}},
		{Webhook{Secret: "new", PreviousSecret: "old", PreviousSecretExpiresAt: &later}, []string{"new", "old"}},
		{Webhook{Secret: "new", PreviousSecret: "old", PreviousSecretExpiresAt: &earlier}, []string{"new"}},
		{Webhook{Secret: "new", PreviousSecret: "old", PreviousSecretExpiresAt: &now}, []string{"new"}}, // expired at that instant
		{Webhook{Secret: "new", PreviousSecret: "old"}, []string{"new"}},
	} {
		var got []string
		for _, s := range c.w.SigningSecrets(now) {
			got = append(got, string(s))
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") || c.w.PreviousSecretActive(now) != (len(c.want) == 2) {
			t.Errorf("%+v: signing secrets %v, want %v", c.w, got, c.want)
		}
	}
}

func TestSameRequest(t *testing.T) {
	prev := &IdempotencyRecord{RequestHash: "canon"}
	for _, c := range []struct {
		cur  IdempotencyRecord
		want bool
	}{
		{IdempotencyRecord{RequestHash: "canon", RawHash: "raw"}, true},
		{IdempotencyRecord{RequestHash: "other", RawHash: "canon"}, true}, // a record stored before: its hash was of the raw bytes
		{IdempotencyRecord{RequestHash: "other", RawHash: "raw"}, false},
		{IdempotencyRecord{RequestHash: "other"}, false},
	} {
		if got := prev.SameRequest(&c.cur); got != c.want {
			t.Errorf("SameRequest(%+v) = %v, want %v", c.cur, got, c.want)
		}
	}
}
