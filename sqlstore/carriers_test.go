package sqlstore

import (
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// TestStoreCarrierRecords: what a carrier link records, in the orders it
// can come in.
func TestStoreCarrierRecords(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "scale")
		now := time.Now().UTC().Truncate(time.Microsecond)
		ph := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15551239001", Kind: sb.PhoneSMPP, Link: "c1", Channels: []string{sb.ChannelSMS},
			Status: sb.PhoneOnline, CreatedAt: now}
		if err := db.AddPhone(bg, ph, nil); err != nil {
			t.Fatal(err)
		}
		if kind, link, err := db.PhoneLink(bg, ph.ID); err != nil || kind != sb.PhoneSMPP || link != "c1" {
			t.Fatalf("PhoneLink: %q %q %v", kind, link, err)
		}
		send := func(to, body string) string {
			t.Helper()
			m := &sb.Message{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Direction: sb.Outbound, To: to, Body: body, Channel: sb.ChannelSMS,
				Status: sb.StatusQueued, CreatedAt: time.Now().UTC()}
			if err := db.AcceptSend(bg, &sb.Send{Message: m, From: ph.Number}); err != nil {
				t.Fatal(err)
			}
			return m.ID
		}
		record := func(evs ...sb.CarrierEvent) sb.CarrierResult {
			t.Helper()
			res, err := db.RecordCarrier(bg, "c1", evs)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		status := func(id string) *sb.Message {
			t.Helper()
			m, err := db.Message(bg, tn.ID, sb.Live, id)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		at := time.Now().UTC()

		// A receipt before the answer that gives its id (another node's
		// bind): kept, and applied when the id comes.
		a := send("+15005550000", "receipt first")
		record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "X1", State: sb.ReceiptDelivered, From: ph.Number, To: "+15005550000", At: at})
		if m := status(a); m.Status != sb.StatusQueued {
			t.Fatalf("an orphan receipt moved the message: %s", m.Status)
		}
		record(sb.CarrierEvent{Kind: sb.CarrierAccepted, MessageID: a, Parts: 1, ExternalID: "X1", At: at})
		if m := status(a); m.Status != sb.StatusDelivered {
			t.Fatalf("after its id came: %s", m.Status)
		}

		// A part in doubt adopts a receipt for an unknown id with its
		// addresses and text; another message's text does not.
		b := send("+15005550002", "in doubt message b")
		c := send("+15005550002", "in doubt message c")
		record(sb.CarrierEvent{Kind: sb.CarrierWritten, MessageID: b, Parts: 1, At: at},
			sb.CarrierEvent{Kind: sb.CarrierWritten, MessageID: c, Parts: 1, At: at.Add(time.Millisecond)})
		res := record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "Y9", State: sb.ReceiptFailed, Reason: "stat:UNDELIV err:001",
			From: ph.Number, To: "+15005550002", Text: "in doubt message c", At: at})
		if len(res.Adopted) != 1 || res.Adopted[0].MessageID != c {
			t.Fatalf("adopted %v, want message c", res.Adopted)
		}
		if m := status(c); m.Status != sb.StatusFailed || m.FailureReason != "stat:UNDELIV err:001" {
			t.Fatalf("message c: %s %q", m.Status, m.FailureReason)
		}
		parts, err := db.CarrierParts(bg, []string{b, c})
		if err != nil || len(parts[b]) != 1 || parts[b][0].State != sb.PartWritten || parts[b][0].WrittenAt.IsZero() {
			t.Fatalf("parts of b: %+v %v", parts, err)
		}

		// A receipt that came before its part was even recorded as written
		// is adopted when it is.
		d := send("+15005550003", "early receipt d")
		record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "Z1", State: sb.ReceiptDelivered, From: ph.Number, To: "+15005550003",
			Text: "early receipt d", At: at})
		res = record(sb.CarrierEvent{Kind: sb.CarrierWritten, MessageID: d, Parts: 1, At: at})
		if len(res.Adopted) != 1 || status(d).Status != sb.StatusDelivered {
			t.Fatalf("early receipt: %v %s", res.Adopted, status(d).Status)
		}

		// A message of three parts: sent when all are accepted, failed as
		// soon as one fails, and a final message never changes.
		e := send("+15005550004", "three parts")
		for i := range 3 {
			record(sb.CarrierEvent{Kind: sb.CarrierAccepted, MessageID: e, Part: i, Parts: 3, ExternalID: "E" + string(rune('0'+i)), At: at})
			want := sb.StatusQueued
			if i == 2 {
				want = sb.StatusSent
			}
			if m := status(e); m.Status != want {
				t.Fatalf("after part %d accepted: %s, want %s", i, m.Status, want)
			}
		}
		record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "E0", State: sb.ReceiptDelivered, At: at})
		if m := status(e); m.Status != sb.StatusSent {
			t.Fatalf("one part of three delivered: %s", m.Status)
		}
		record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "E1", State: sb.ReceiptFailed, Reason: "stat:EXPIRED err:000", At: at})
		if m := status(e); m.Status != sb.StatusFailed || m.FailureReason != "part 2 of 3: stat:EXPIRED err:000" {
			t.Fatalf("a part failed: %s %q", m.Status, m.FailureReason)
		}
		record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "E2", State: sb.ReceiptDelivered, At: at},
			sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "E1", State: sb.ReceiptDelivered, At: at})
		if m := status(e); m.Status != sb.StatusFailed {
			t.Fatalf("a final message changed: %s", m.Status)
		}

		// Alternative forms of an id; an inbound text for the link's number.
		f := send("+15005550005", "hex id")
		record(sb.CarrierEvent{Kind: sb.CarrierAccepted, MessageID: f, Parts: 1, ExternalID: "1F", At: at})
		record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "31", AltIDs: []string{"1f", "1F"}, State: sb.ReceiptDelivered, At: at})
		if m := status(f); m.Status != sb.StatusDelivered {
			t.Fatalf("decimal receipt id: %s", m.Status)
		}
		// A receipt on another link to the same account (its bind got it).
		f2 := send("+15005550005", "sibling link")
		record(sb.CarrierEvent{Kind: sb.CarrierAccepted, MessageID: f2, Parts: 1, ExternalID: "S1", At: at})
		if _, err := db.RecordCarrier(bg, "c2", []sb.CarrierEvent{{Kind: sb.CarrierReceipt, ExternalID: "S1", AltLinks: []string{"c1"},
			State: sb.ReceiptDelivered, At: at}}); err != nil {
			t.Fatal(err)
		}
		if m := status(f2); m.Status != sb.StatusDelivered {
			t.Fatalf("a receipt on a sibling link: %s", m.Status)
		}
		in := &sb.Message{From: "+15005550006", To: ph.Number, Body: "STOP", CreatedAt: at}
		record(sb.CarrierEvent{Kind: sb.CarrierInbound, Inbound: in},
			sb.CarrierEvent{Kind: sb.CarrierInbound, Inbound: &sb.Message{From: "+15005550006", To: "+15550000000", Body: "not ours", CreatedAt: at}})
		if in.TenantID != tn.ID {
			t.Fatalf("inbound stored for %q", in.TenantID)
		}
		if _, opted, err := db.Recipient(bg, tn.ID, sb.Live, "+15005550006"); err != nil || !opted {
			t.Fatalf("STOP on a carrier number: opted %v %v", opted, err)
		}

		// Deleting the phone fails what is still queued for it.
		g := send("+15005550007", "never went out")
		if err := db.DeletePhone(bg, tn.ID, ph.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if m := status(g); m.Status != sb.StatusFailed || m.FailureReason != "the carrier phone this message was to go out from was deleted before it went out" {
			t.Fatalf("queued message of a deleted phone: %s %q", m.Status, m.FailureReason)
		}
		if m := status(f); m.Status != sb.StatusDelivered {
			t.Fatalf("a delivered message changed: %s", m.Status)
		}
	})
}

// TestStoreCarrierReusedID: an id the carrier gave two messages settles,
// by the receipt's recipient, each its own; without a recipient, the one
// not final yet.
func TestStoreCarrierReusedID(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "scale")
		now := time.Now().UTC().Truncate(time.Microsecond)
		ph := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15551239002", Kind: sb.PhoneSMPP, Link: "c1", Channels: []string{sb.ChannelSMS},
			Status: sb.PhoneOnline, CreatedAt: now}
		if err := db.AddPhone(bg, ph, nil); err != nil {
			t.Fatal(err)
		}
		send := func(to string) string {
			t.Helper()
			m := &sb.Message{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Direction: sb.Outbound, To: to, Body: "b", Channel: sb.ChannelSMS,
				Status: sb.StatusQueued, CreatedAt: time.Now().UTC()}
			if err := db.AcceptSend(bg, &sb.Send{Message: m, From: ph.Number}); err != nil {
				t.Fatal(err)
			}
			return m.ID
		}
		record := func(evs ...sb.CarrierEvent) {
			t.Helper()
			if _, err := db.RecordCarrier(bg, "c1", evs); err != nil {
				t.Fatal(err)
			}
		}
		status := func(id string) string {
			t.Helper()
			m, err := db.Message(bg, tn.ID, sb.Live, id)
			if err != nil {
				t.Fatal(err)
			}
			return m.Status
		}
		at := time.Now().UTC()
		x, y, z := send("+15005550001"), send("+15005550002"), send("+15005550003")
		record(sb.CarrierEvent{Kind: sb.CarrierAccepted, MessageID: x, Parts: 1, ExternalID: "7", At: at},
			sb.CarrierEvent{Kind: sb.CarrierAccepted, MessageID: y, Parts: 1, ExternalID: "7", At: at.Add(time.Millisecond)})
		record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "7", State: sb.ReceiptDelivered, From: ph.Number, To: "+15005550001", At: at})
		if status(x) != sb.StatusDelivered || status(y) != sb.StatusSent {
			t.Fatalf("x %s, y %s: want delivered, sent", status(x), status(y))
		}
		// A receipt without addresses: the part not final yet.
		record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "7", State: sb.ReceiptFailed, Reason: "r", At: at})
		if status(x) != sb.StatusDelivered || status(y) != sb.StatusFailed {
			t.Fatalf("x %s, y %s: want delivered, failed", status(x), status(y))
		}
		// A receipt kept for an unknown id goes to no message to another
		// recipient when that id comes.
		record(sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: "8", State: sb.ReceiptDelivered, From: ph.Number, To: "+15005550009", At: at})
		record(sb.CarrierEvent{Kind: sb.CarrierAccepted, MessageID: z, Parts: 1, ExternalID: "8", At: at})
		if status(z) != sb.StatusSent {
			t.Fatalf("z %s: a receipt about another recipient settled it", status(z))
		}
	})
}
