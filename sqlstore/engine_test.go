package sqlstore

import (
	"context"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

func addKindPhone(t *testing.T, db *DB, tenantID, number, kind string, status string, channels ...string) *sb.Phone {
	t.Helper()
	p := &sb.Phone{ID: sb.NewID(), TenantID: tenantID, Number: number, Kind: kind, Channels: channels, Status: status, CreatedAt: time.Now().UTC()}
	if err := db.AddPhone(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

func sendOn(tenantID string, env sb.Environment, channel, from string) *sb.Send {
	s := testSend(tenantID)
	s.Message.Env, s.Message.Channel, s.From = env, channel, from
	return s
}

// Live traffic never goes out from a simulated phone once the tenant has a
// phone of another kind; test traffic needs no phone at all; every message
// records its engine.
func TestEngineAndSimulatedPhones(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		// No phone at all: live says so; test goes from the sandbox.
		err := db.AcceptSend(ctx, sendOn(tn.ID, sb.Live, sb.ChannelSMS, ""))
		if sb.ErrorCode(err) != sb.CodeNoPhoneAvailable || !strings.Contains(err.Error(), "this tenant has no sending phone") {
			t.Fatalf("live send, no phones: %v", err)
		}
		s := sendOn(tn.ID, sb.Test, sb.ChannelChat, "")
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatalf("test send, no phones: %v", err)
		}
		got, err := db.Message(ctx, tn.ID, sb.Test, s.Message.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.From != sb.SandboxNumber || got.Engine != sb.EngineSimulator || got.Channel != sb.ChannelChat || got.PhoneID != "" {
			t.Errorf("test send with no phones: from %s engine %s channel %s phone %q", got.From, got.Engine, got.Channel, got.PhoneID)
		}

		// Only a simulated phone: live goes through the simulator.
		sim := addKindPhone(t, db, tn.ID, "+15550107001", sb.PhoneSimulated, sb.PhoneOnline, "sms", "chat")
		s = sendOn(tn.ID, sb.Live, sb.ChannelSMS, "")
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		if s.Message.PhoneID != sim.ID || s.Message.Engine != sb.EngineSimulator {
			t.Errorf("live with only a simulated phone: phone %s engine %s", s.Message.PhoneID, s.Message.Engine)
		}

		// A real phone, switched off: live never falls back to the
		// simulated one, not even when from names it.
		real := addKindPhone(t, db, tn.ID, "+15550107002", sb.PhoneSMPP, sb.PhoneOffline, "sms")
		for _, from := range []string{"", sim.Number} {
			err := db.AcceptSend(ctx, sendOn(tn.ID, sb.Live, sb.ChannelSMS, from))
			if sb.ErrorCode(err) != sb.CodeNoPhoneAvailable {
				t.Errorf("live from %q with the real phone off: %v, want NO_PHONE_AVAILABLE", from, err)
			}
			if from != "" && err != nil && !strings.Contains(err.Error(), "simulated") {
				t.Errorf("live from the simulated phone: %v does not say why", err)
			}
		}
		// The test environment still goes through the simulated phone.
		s = sendOn(tn.ID, sb.Test, sb.ChannelSMS, "")
		if err := db.AcceptSend(ctx, s); err != nil || s.Message.PhoneID != sim.ID {
			t.Errorf("test send: %v, phone %s", err, s.Message.PhoneID)
		}
		// Delete the simulated phone: test sends go from the sandbox, or
		// from a named phone whatever its state.
		if err := db.DeletePhone(ctx, tn.ID, sim.ID, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
		s = sendOn(tn.ID, sb.Test, sb.ChannelSMS, "")
		if err := db.AcceptSend(ctx, s); err != nil || s.Message.From != sb.SandboxNumber {
			t.Errorf("test send after the simulated phone was deleted: %v, from %s", err, s.Message.From)
		}
		s = sendOn(tn.ID, sb.Test, sb.ChannelSMS, real.Number)
		if err := db.AcceptSend(ctx, s); err != nil || s.Message.PhoneID != real.ID || s.Message.Engine != sb.EngineSimulator {
			t.Errorf("test send from the offline real phone: %v, phone %s engine %s", err, s.Message.PhoneID, s.Message.Engine)
		}
		if _, err := db.SetPhoneStatus(ctx, real.ID, sb.PhoneOnline); err != nil {
			t.Fatal(err)
		}
		s = sendOn(tn.ID, sb.Live, sb.ChannelSMS, "")
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		got, err = db.Message(ctx, tn.ID, sb.Live, s.Message.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.PhoneID != real.ID || got.Engine != sb.EngineSMPP || got.ReadAt != nil || got.Fallback != nil {
			t.Errorf("live send on the real phone: phone %s engine %s", got.PhoneID, got.Engine)
		}
	})
}
