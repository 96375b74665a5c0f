package smpp

import (
	"fmt"
	"strings"
	"testing"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/smpp/smsc"
)

// TestReceiptReusedID: an SMSC that gives a new message an id it gave
// before: each receipt settles the message to its own recipient (the
// receipt's source address), never the older one with the same id.
func TestReceiptReusedID(t *testing.T) {
	sm := &smsc.Server{NextID: func(uint64) string { return "77" }}
	gateX, gateY := make(chan struct{}), make(chan struct{})
	sm.OnSubmit = func(s *smsc.Submit) smsc.Action {
		switch s.To {
		case "15005550001":
			return smsc.Action{ReceiptWait: gateX}
		case "15005550002":
			return smsc.Action{Stat: "UNDELIV", Err: "005", ReceiptWait: gateY}
		}
		return smsc.Action{NoReceipt: true}
	}
	f := start(t, sm, carrier.Config{}, Options{}, true)
	waitFor(t, 20e9, "the bind", f.link.Up)
	w := f.send(t, "+15005550009", "to w") // its receipt never comes
	f.waitStatus(t, w.ID, sb.StatusSent)
	x := f.send(t, "+15005550001", "to x")
	f.waitStatus(t, x.ID, sb.StatusSent)
	y := f.send(t, "+15005550002", "to y")
	f.waitStatus(t, y.ID, sb.StatusSent)
	// x's receipt, after y took the id: it settles x, not the latest.
	close(gateX)
	f.waitStatus(t, x.ID, sb.StatusDelivered)
	if st, _ := f.status(t, y.ID); st != sb.StatusSent {
		t.Fatalf("message y is %s after x's receipt", st)
	}
	close(gateY)
	f.waitStatus(t, y.ID, sb.StatusFailed)
	if st, _ := f.status(t, w.ID); st != sb.StatusSent {
		t.Fatalf("message w, whose receipt never came, is %s: another message's receipt settled it", st)
	}
}

// TestReceiptIDForms: receipts whose id is in another form than the
// submit_sm_resp's still settle their message: the zero-padded 10-digit
// decimal of SMPP 3.4 Appendix B, hex letters in another case, and hex
// for decimal; with and without the receipted_message_id TLV.
func TestReceiptIDForms(t *testing.T) {
	for name, sm := range map[string]*smsc.Server{
		"padded decimal": {NextID: func(n uint64) string { return fmt.Sprint(123455 + n) },
			ReceiptID: func(id string) string { return fmt.Sprintf("%010s", id) }},
		"padded decimal in the TLV": {NextID: func(n uint64) string { return fmt.Sprint(123455 + n) },
			ReceiptID: func(id string) string { return fmt.Sprintf("%010s", id) }, ReceiptTLVs: true},
		"hex in lower case":     {NextID: func(n uint64) string { return fmt.Sprintf("ABCDEF%02X", n) }, ReceiptID: strings.ToLower},
		"hex as padded decimal": {ReceiptID: smsc.PadDecimal},
	} {
		t.Run(name, func(t *testing.T) {
			f := start(t, sm, carrier.Config{}, Options{}, true)
			waitFor(t, 20e9, "the bind", f.link.Up)
			m := f.send(t, "+15005550001", "hello")
			f.waitStatus(t, m.ID, sb.StatusDelivered)
		})
	}
}

// TestReceiptStateInTLV: a receipt whose state is only in the
// message_state TLV (no stat: in its text) decides the message, and a
// message_state that disagrees with the text wins.
func TestReceiptStateInTLV(t *testing.T) {
	sm := &smsc.Server{StateOnlyInTLV: true}
	sm.OnSubmit = func(s *smsc.Submit) smsc.Action {
		switch s.Text {
		case "undeliv":
			return smsc.Action{Stat: "UNDELIV"}
		case "expired":
			return smsc.Action{Stat: "EXPIRED"}
		case "text says delivered":
			return smsc.Action{Stat: "DELIVRD", TLVStat: "REJECTD"}
		}
		return smsc.Action{Stat: "DELIVRD"}
	}
	f := start(t, sm, carrier.Config{}, Options{}, true)
	waitFor(t, 20e9, "the bind", f.link.Up)
	d := f.send(t, "+15005550001", "delivrd")
	u := f.send(t, "+15005550002", "undeliv")
	e := f.send(t, "+15005550003", "expired")
	f.waitStatus(t, d.ID, sb.StatusDelivered)
	if reason := f.waitStatus(t, u.ID, sb.StatusFailed); !strings.HasPrefix(reason, "SMPP receipt stat:UNDELIV") {
		t.Errorf("undeliv: %q", reason)
	}
	if reason := f.waitStatus(t, e.ID, sb.StatusFailed); !strings.HasPrefix(reason, "SMPP receipt stat:EXPIRED") {
		t.Errorf("expired: %q", reason)
	}
	sm2 := &smsc.Server{OnSubmit: sm.OnSubmit}
	f2 := start(t, sm2, carrier.Config{}, Options{}, true)
	waitFor(t, 20e9, "the second bind", f2.link.Up)
	r := f2.send(t, "+15005550004", "text says delivered")
	if reason := f2.waitStatus(t, r.ID, sb.StatusFailed); !strings.HasPrefix(reason, "SMPP receipt stat:REJECTD") {
		t.Errorf("a message_state REJECTD under a text saying DELIVRD: %q", reason)
	}
}
