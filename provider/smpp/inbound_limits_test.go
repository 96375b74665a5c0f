package smpp

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/smpp/smsc"
)

func (f *fixture) inbound(t *testing.T) []*sb.Message {
	t.Helper()
	msgs, err := f.db.Messages(f.ctx, f.tn.ID, sb.Live, sb.MessageFilter{Direction: sb.Inbound}, sb.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestInboundBodyBounded: a text received in message_payload, or a long
// text of big parts, is stored cut to 16,000 characters, as for android
// phones.
func TestInboundBodyBounded(t *testing.T) {
	sm := &smsc.Server{}
	f := start(t, sm, carrier.Config{}, Options{}, true)
	waitFor(t, 20*time.Second, "the bind", f.link.Up)
	sm.SendMOPart("+15005550001", f.phone.Number, strings.Repeat("a", 20000), 0, 1, 1, true)
	for i := 1; i <= 3; i++ {
		sm.SendMOPart("+15005550002", f.phone.Number, strings.Repeat("b", 9000), 7, 3, i, true)
	}
	waitFor(t, 20*time.Second, "two texts stored", func() bool { return len(f.inbound(t)) == 2 })
	for _, m := range f.inbound(t) {
		if n := utf8.RuneCountInString(m.Body); n != MaxInboundBody {
			t.Errorf("a text from %s of %d characters stored, want %d", m.From, n, MaxInboundBody)
		}
	}
	waitFor(t, 20*time.Second, "every part answered", func() bool { return sm.Pending() == 0 })
}

// TestInboundPendingPartsBounded: the parts of unfinished long texts a
// link holds are bounded: past the cap, the oldest text is stored with the
// parts that came (and answered), not held for the minute a text may take.
func TestInboundPendingPartsBounded(t *testing.T) {
	sm := &smsc.Server{}
	f := start(t, sm, carrier.Config{}, Options{ConcatMaxParts: 4, ConcatMaxBytes: 1 << 20}, true)
	waitFor(t, 20*time.Second, "the bind", f.link.Up)
	for i := range 4 {
		sm.SendMOPart("+15005550001", f.phone.Number, "first part of text "+string(rune('a'+i)), i, 3, 1, false)
	}
	waitFor(t, 20*time.Second, "the first parts held", func() bool { return sm.Pending() == 4 })
	if n := len(f.inbound(t)); n != 0 {
		t.Fatalf("%d texts stored under the cap", n)
	}
	sm.SendMOPart("+15005550001", f.phone.Number, "first part of text e", 4, 3, 1, false)
	waitFor(t, 20*time.Second, "the oldest stored", func() bool { return len(f.inbound(t)) == 1 })
	if got := f.inbound(t)[0].Body; got != "first part of text a" {
		t.Fatalf("stored %q, want the oldest", got)
	}
	waitFor(t, 20*time.Second, "its part answered", func() bool { return sm.Pending() == 4 })

	// Bytes too.
	sm2 := &smsc.Server{}
	f2 := start(t, sm2, carrier.Config{}, Options{ConcatMaxParts: 1000, ConcatMaxBytes: 25000}, true)
	waitFor(t, 20*time.Second, "the bind", f2.link.Up)
	sm2.SendMOPart("+15005550001", f2.phone.Number, strings.Repeat("x", 15000), 1, 3, 1, true)
	sm2.SendMOPart("+15005550001", f2.phone.Number, strings.Repeat("y", 15000), 2, 3, 1, true)
	waitFor(t, 20*time.Second, "the oldest stored", func() bool { return len(f2.inbound(t)) == 1 })
}
