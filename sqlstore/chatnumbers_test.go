package sqlstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// randNumber is an E.164 number no other test has.
func randNumber(prefix string) string {
	return prefix + strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[18:26])
}

// A chat engine's phone holds its number within its tenant only: another
// tenant binds the same number, and a carrier phone of another tenant's
// number neither stands in its way nor is stood in the way of; within the
// tenant the number is a DUPLICATE_PHONE naming the phone that has it.
// Carrier phones stay unique among every tenant.
func TestChatNumbersPerTenant(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		a, b, c := writeTestTenant(t, db), writeTestTenant(t, db), writeTestTenant(t, db)
		add := func(tenant *sb.Tenant, number, kind, link string) error {
			ch := "sms"
			if kind == sb.PhoneRBM || kind == sb.PhoneIMessage {
				ch = "chat"
			}
			return db.AddPhone(ctx, &sb.Phone{ID: sb.NewID(), TenantID: tenant.ID, Number: number, Kind: kind, Link: link,
				Channels: []string{ch}, Status: sb.PhoneOnline, CreatedAt: time.Now().UTC()}, nil)
		}
		chat, carrierNum := randNumber("+1555"), randNumber("+1556")
		if err := add(a, chat, sb.PhoneRBM, "rcs"); err != nil {
			t.Fatal(err)
		}
		if err := add(b, chat, sb.PhoneRBM, "rcs"); err != nil {
			t.Errorf("another tenant's chat number, bound to the same engine: %v", err)
		}
		if err := add(b, carrierNum, sb.PhoneSMPP, "c1"); err != nil {
			t.Fatal(err)
		}
		for _, tk := range []struct {
			tenant *sb.Tenant
			kind   string
		}{{a, sb.PhoneRBM}, {c, sb.PhoneIMessage}} {
			if err := add(tk.tenant, carrierNum, tk.kind, "rcs"); err != nil {
				t.Errorf("a %s phone with another tenant's carrier number: %v (the answer must not tell it exists)", tk.kind, err)
			}
		}
		// A carrier number after another tenant's chat phone has it.
		other := randNumber("+1557")
		if err := add(a, other, sb.PhoneIMessage, "mac"); err != nil {
			t.Fatal(err)
		}
		if err := add(b, other, sb.PhoneTwilio, "tw"); err != nil {
			t.Errorf("a carrier number another tenant's chat phone has: %v", err)
		}
		// Within the tenant: DUPLICATE_PHONE naming it.
		err := add(a, chat, sb.PhoneIMessage, "mac")
		var e *sb.Error
		if sb.ErrorCode(err) != sb.CodeDuplicatePhone || !errors.As(err, &e) || e.Details["existing_id"] == nil {
			t.Errorf("the tenant's own chat number again: %v", err)
		}
		// Carrier numbers across tenants: still unique, naming none.
		err = add(a, randNumber("+1559"), sb.PhoneTwilio, "tw")
		if err != nil {
			t.Fatal(err)
		}
		e = nil
		err = add(writeTestTenant(t, db), carrierNum, sb.PhoneTwilio, "tw")
		if sb.ErrorCode(err) != sb.CodeDuplicatePhone || (errors.As(err, &e) && e.Details != nil) {
			t.Errorf("another tenant's carrier number as a carrier phone: %v", err)
		}
	})
}

// The observer learns the engine that carried each outcome: a delivered
// chat message's is its engine's, also on the batch path that makes
// deliveries final (finish_delivered on PostgreSQL).
func TestObservedEngine(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		var mu sync.Mutex
		seen := map[string]string{}
		tn := writeTestTenant(t, db)
		if err := db.AddPhone(ctx, &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: randNumber("+1558"), Kind: sb.PhoneRBM, Link: "rcs",
			Channels: []string{"chat"}, Status: sb.PhoneOnline, CreatedAt: time.Now().UTC()}, nil); err != nil {
			t.Fatal(err)
		}
		db.SetObserver(func(m *sb.Message, event string) {
			mu.Lock()
			seen[m.ID+" "+event] = m.Engine
			mu.Unlock()
		})
		s := sendOn(tn.ID, sb.Live, sb.ChannelChat, "")
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		if _, err := db.RecordCarrier(ctx, "rcs", []sb.CarrierEvent{{Kind: sb.CarrierAccepted, MessageID: s.Message.ID, Parts: 1, ExternalID: "x-" + s.Message.ID, At: now}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.RecordCarrier(ctx, "rcs", []sb.CarrierEvent{{Kind: sb.CarrierReceipt, ExternalID: "x-" + s.Message.ID, State: sb.ReceiptDelivered, At: now}}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if got := seen[s.Message.ID+" "+sb.EventDelivered]; got != sb.EngineRBM {
			t.Errorf("the delivered chat message's engine, as observed: %q, want rbm (seen %v)", got, seen)
		}
	})
}
