package simulator

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// outcomeWait bounds how long a test waits for an outcome. The simulator
// reports within its delay (100 ms by default); the bound is generous so a
// loaded machine does not fail the test, and the test asserts only that the
// outcome arrives.
const outcomeWait = 5 * time.Second

func receive(t *testing.T, s *Simulator) sb.Outcome {
	t.Helper()
	select {
	case o := <-s.Outcomes():
		return o
	case <-time.After(outcomeWait):
		t.Fatalf("no outcome within %v", outcomeWait)
		return sb.Outcome{}
	}
}

func TestIsMagic(t *testing.T) {
	for n, want := range map[string]bool{
		FailNumber: true, NoDetectionNumber: true, SMSOnlyNumber: true, "+15005550000": true, "+15005550009": true,
		"+15005550010": false, "+150055500001": false, "+1500555000": false, "+12125550123": false, "": false,
	} {
		if got := IsMagic(n); got != want {
			t.Errorf("IsMagic(%q) = %v, want %v", n, got, want)
		}
	}
}

func TestDetect(t *testing.T) {
	s := New(0)
	defer s.Close()
	ctx := context.Background()

	if _, err := s.Detect(ctx, "t1", sb.Live, NoDetectionNumber); sb.ErrorCode(err) != sb.CodeDetectionUnavailable {
		t.Errorf("Detect(%s): %v, want DETECTION_UNAVAILABLE", NoDetectionNumber, err)
	}
	if ch, err := s.Detect(ctx, "t1", sb.Live, SMSOnlyNumber); err != nil || ch != sb.ChannelSMS {
		t.Errorf("Detect(%s) = %q, %v; want sms", SMSOnlyNumber, ch, err)
	}
	for _, n := range []string{"+12125550123", FailNumber, "+15005550000"} {
		if ch, err := s.Detect(ctx, "t1", sb.Live, n); err != nil || ch != sb.ChannelChat {
			t.Errorf("Detect(%s) = %q, %v; want chat", n, ch, err)
		}
	}
}

func TestSetChatDownPerTenant(t *testing.T) {
	s := New(0)
	defer s.Close()
	ctx := context.Background()

	if err := s.ChatAvailable(ctx, "a", sb.Live); err != nil {
		t.Fatalf("chat starts up: %v", err)
	}
	s.SetChatDown("a", sb.Live, true)
	if err := s.ChatAvailable(ctx, "a", sb.Live); sb.ErrorCode(err) != sb.CodeChannelUnavailable {
		t.Errorf("tenant a, chat down: %v, want CHANNEL_UNAVAILABLE", err)
	}
	if ch, err := s.Detect(ctx, "a", sb.Live, "+12125550123"); err != nil || ch != sb.ChannelSMS {
		t.Errorf("tenant a, chat down: Detect = %q, %v; want sms", ch, err)
	}
	// Detection of the magic numbers does not depend on the chat engine.
	if _, err := s.Detect(ctx, "a", sb.Live, NoDetectionNumber); sb.ErrorCode(err) != sb.CodeDetectionUnavailable {
		t.Errorf("tenant a, chat down: Detect(%s): %v", NoDetectionNumber, err)
	}
	// The test environment of the same tenant is not affected, nor are
	// other tenants.
	if err := s.ChatAvailable(ctx, "a", sb.Test); err != nil {
		t.Errorf("tenant a, test environment: %v", err)
	}
	if err := s.ChatAvailable(ctx, "b", sb.Live); err != nil {
		t.Errorf("tenant b: %v", err)
	}
	if ch, _ := s.Detect(ctx, "b", sb.Live, "+12125550123"); ch != sb.ChannelChat {
		t.Errorf("tenant b: Detect = %q, want chat", ch)
	}
	s.SetChatDown("a", sb.Live, false)
	if err := s.ChatAvailable(ctx, "a", sb.Live); err != nil {
		t.Errorf("tenant a, chat up again: %v", err)
	}
	if ch, _ := s.Detect(ctx, "a", sb.Live, "+12125550123"); ch != sb.ChannelChat {
		t.Errorf("tenant a, chat up again: Detect = %q, want chat", ch)
	}
}

func TestOutcomes(t *testing.T) {
	s := New(0)
	defer s.Close()
	ctx := context.Background()

	msgs := map[string]*sb.Message{
		"m-ok":   {ID: "m-ok", To: "+12125550123", Channel: sb.ChannelChat},
		"m-fail": {ID: "m-fail", To: FailNumber, Channel: sb.ChannelSMS},
		"m-sms":  {ID: "m-sms", To: SMSOnlyNumber, Channel: sb.ChannelSMS},
		"m-nod":  {ID: "m-nod", To: NoDetectionNumber, Channel: sb.ChannelSMS},
		"m-chat": {ID: "m-chat", To: SMSOnlyNumber, Channel: sb.ChannelChat},
	}
	start := time.Now()
	for _, m := range msgs {
		if err := s.Send(ctx, m); err != nil {
			t.Fatalf("Send(%s): %v", m.ID, err)
		}
	}
	got := map[string]sb.Outcome{}
	for range msgs {
		o := receive(t, s)
		if _, dup := got[o.MessageID]; dup {
			t.Fatalf("two outcomes for %s", o.MessageID)
		}
		got[o.MessageID] = o
	}
	for id := range msgs {
		o, ok := got[id]
		if !ok {
			t.Fatalf("no outcome for %s", id)
		}
		if o.At.IsZero() || o.At.Before(start.Add(-time.Second)) || o.At.Location() != time.UTC {
			t.Errorf("%s: outcome time %v", id, o.At)
		}
		want := map[string]string{"m-fail": FailureReason, "m-chat": NoChatReason}[id]
		if want != "" {
			if o.Delivered || o.FailureReason != want {
				t.Errorf("%s: %+v, want failed with %q", id, o, want)
			}
		} else if !o.Delivered || o.FailureReason != "" {
			t.Errorf("%s: %+v, want delivered", id, o)
		}
	}
	if s.Duplicates() != 0 {
		t.Errorf("Duplicates() = %d, want 0", s.Duplicates())
	}
}

func TestOutcomesKeepComing(t *testing.T) {
	// Sends spread over time each get their outcome: the clock goroutine
	// wakes for a new hand-off after it has gone idle.
	s := New(10 * time.Millisecond)
	defer s.Close()
	for i := range 3 {
		m := &sb.Message{ID: "m" + string(rune('0'+i)), To: "+12125550123"}
		if err := s.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		if o := receive(t, s); o.MessageID != m.ID || !o.Delivered {
			t.Fatalf("outcome %+v, want %s delivered", o, m.ID)
		}
	}
}

func TestDuplicates(t *testing.T) {
	// A message id handed over again, even after its outcome was
	// reported, is a duplicate: counted, and its first outcome reported
	// again (the queue learns the result of every hand-off).
	s := New(time.Millisecond)
	defer s.Close()
	m := &sb.Message{ID: "dup", To: FailNumber}
	s.Send(context.Background(), m)
	if o := receive(t, s); o.MessageID != "dup" || o.FailureReason != FailureReason {
		t.Fatalf("outcome %+v", o)
	}
	s.Send(context.Background(), &sb.Message{ID: "other", To: "+12125550123"})
	receive(t, s)
	if n := s.Duplicates(); n != 0 {
		t.Errorf("Duplicates() = %d, want 0", n)
	}
	// Sent again to another number: not sent again, the first outcome stands.
	s.Send(context.Background(), &sb.Message{ID: "dup", To: "+12125550123"})
	if n := s.Duplicates(); n != 1 {
		t.Errorf("Duplicates() = %d, want 1", n)
	}
	if o := receive(t, s); o.MessageID != "dup" || o.Delivered || o.FailureReason != FailureReason {
		t.Errorf("outcome of the duplicate %+v, want the first one's (failed)", o)
	}
}

func TestDuplicatesForgotten(t *testing.T) {
	// Ids accepted before the window are forgotten, and the memory holds
	// at most DedupMax of them.
	s := New(time.Millisecond)
	defer s.Close()
	now := time.Now()
	s.mu.Lock()
	s.accepted[keyOf("old")] = acceptance{at: now.Add(-DedupWindow - time.Second).UnixNano()}
	s.accepted[keyOf("recent")] = acceptance{at: now.Add(-DedupWindow + time.Minute).UnixNano()}
	s.order = []idKey{keyOf("old"), keyOf("recent")}
	s.mu.Unlock()
	s.Send(context.Background(), &sb.Message{ID: "old", To: "+12125550123"})
	s.Send(context.Background(), &sb.Message{ID: "recent", To: "+12125550123"})
	if n := s.Duplicates(); n != 1 {
		t.Errorf("Duplicates() = %d, want 1 (only the id within the window)", n)
	}
	s.mu.Lock()
	s.order = s.order[:0]
	clear(s.accepted)
	for i := range DedupMax + 10 {
		k := keyOf(fmt.Sprint("m", i))
		s.accepted[k] = acceptance{at: now.UnixNano()}
		s.order = append(s.order, k)
	}
	s.forget(now)
	n, first := len(s.accepted), s.order[0]
	s.mu.Unlock()
	if n != DedupMax || first != keyOf("m10") {
		t.Errorf("%d ids kept, oldest %x; want %d, m10's key %x", n, first, DedupMax, keyOf("m10"))
	}
}

func TestDedupMemoryHoldsNoPointers(t *testing.T) {
	// The dedup memory holds up to DedupMax entries; with a pointer in
	// them (a string id, an outcome's reason or a time.Time's location)
	// the garbage collector scans them all at every collection.
	for _, v := range []any{map[idKey]acceptance{}, []idKey{}} {
		typ := reflect.TypeOf(v)
		for _, elem := range []reflect.Type{typ.Elem(), keyType(typ)} {
			if elem != nil && hasPointers(elem) {
				t.Errorf("%v holds %v, which has pointers", typ, elem)
			}
		}
	}
	// Distinct ids get distinct keys, the same id the same one.
	if keyOf("01J0000000000000000000000A") == keyOf("01J0000000000000000000000B") || keyOf("a") != keyOf("a") {
		t.Error("keyOf does not tell ids apart")
	}
}

func keyType(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Map {
		return t.Key()
	}
	return nil
}

// hasPointers reports whether values of t hold any pointer the garbage
// collector follows.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true
}

func TestDelayBounds(t *testing.T) {
	// A delay of 1 s or more, or none, falls back to the default, which is
	// under the promised 1 s.
	for _, d := range []time.Duration{0, -time.Second, time.Second, time.Hour} {
		s := New(d)
		if s.delay <= 0 || s.delay >= time.Second {
			t.Errorf("New(%v).delay = %v", d, s.delay)
		}
		s.Close()
	}
}
