package sqlstore

import (
	"context"
	"strings"
	"sync"
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

// A chat message of channel auto that a chat engine carries goes again by
// SMS, once, when not delivered within its ttl; a delivered one, or one
// sent with channel chat, does not.
func TestChatFallback(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		chat := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+1555" + sb.NewID()[19:26], Kind: sb.PhoneRBM, Link: "rcs",
			Channels: []string{"chat"}, Status: sb.PhoneOnline, CreatedAt: time.Now().UTC()}
		chat.Number = "+15557" + strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[20:26])
		if err := db.AddPhone(ctx, chat, nil); err != nil {
			t.Fatal(err)
		}
		sms := addKindPhone(t, db, tn.ID, "+15558"+strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[20:26]), sb.PhoneSMPP, sb.PhoneOnline, "sms")
		send := func(auto bool, to string) *sb.Message {
			s := sendOn(tn.ID, sb.Live, sb.ChannelChat, "")
			s.Message.To, s.Auto = to, auto
			if err := db.AcceptSend(ctx, s); err != nil {
				t.Fatal(err)
			}
			if s.Message.PhoneID != chat.ID {
				t.Fatalf("the chat message went to %s", s.Message.PhoneID)
			}
			return s.Message
		}
		auto, explicit, delivered := send(true, "+15005550101"), send(false, "+15005550102"), send(true, "+15005550103")
		if auto.ChatFallbackAt == nil || explicit.ChatFallbackAt != nil {
			t.Fatalf("fallback deadlines: auto %v, chat %v", auto.ChatFallbackAt, explicit.ChatFallbackAt)
		}
		now := time.Now().UTC()
		for _, m := range []*sb.Message{auto, explicit, delivered} {
			if _, err := db.RecordCarrier(ctx, "rcs", []sb.CarrierEvent{{Kind: sb.CarrierAccepted, MessageID: m.ID, Parts: 1, ExternalID: "x-" + m.ID, At: now}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.RecordCarrier(ctx, "rcs", []sb.CarrierEvent{{Kind: sb.CarrierReceipt, ExternalID: "x-" + delivered.ID, State: sb.ReceiptDelivered, At: now}}); err != nil {
			t.Fatal(err)
		}
		if due, err := db.DueChatFallbacks(ctx, now, 10); err != nil || len(due) != 0 {
			t.Fatalf("due before the ttl: %v %v", due, err)
		}
		later := now.Add(sb.ChatFallbackAfter + time.Minute)
		due, err := db.DueChatFallbacks(ctx, later, 10)
		if err != nil {
			t.Fatal(err)
		}
		moved := map[string]bool{}
		for _, id := range due {
			ok, err := db.ChatFallback(ctx, id, "not delivered by chat within its ttl", later)
			if err != nil {
				t.Fatal(err)
			}
			moved[id] = ok
		}
		if !moved[auto.ID] || moved[delivered.ID] || moved[explicit.ID] || len(moved) != 2 {
			t.Fatalf("fell back: %v (auto %s, delivered %s)", moved, auto.ID, delivered.ID)
		}
		got, err := db.Message(ctx, tn.ID, sb.Live, auto.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Channel != sb.ChannelSMS || got.PhoneID != sms.ID || got.From != sms.Number || got.Engine != sb.EngineSMPP ||
			got.Status != sb.StatusQueued || got.Fallback == nil || got.Fallback.From != sb.ChannelChat || got.Fallback.Reason == "" {
			t.Errorf("after the fallback: channel %s phone %s engine %s status %s fallback %+v", got.Channel, got.PhoneID, got.Engine, got.Status, got.Fallback)
		}
		if again, err := db.ChatFallback(ctx, auto.ID, "again", later); again || err != nil {
			t.Errorf("a second fallback: %v %v", again, err)
		}
		if d, _ := db.Message(ctx, tn.ID, sb.Live, delivered.ID); d.Status != sb.StatusDelivered || d.Fallback != nil || d.Engine != sb.EngineRBM {
			t.Errorf("the delivered message changed: %s %+v", d.Status, d.Fallback)
		}
		if due, _ := db.DueChatFallbacks(ctx, later, 10); len(due) != 0 {
			t.Errorf("still due: %v", due)
		}
	})
}

// Two nodes that find the same message due: one falls back, the other
// changes nothing, and the SMS phone counts it once.
func TestChatFallbackOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		addKindPhone(t, db, tn.ID, "+15557"+strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[20:26]), sb.PhoneRBM, sb.PhoneOnline, "chat")
		sms := addKindPhone(t, db, tn.ID, "+15558"+strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[20:26]), sb.PhoneSMPP, sb.PhoneOnline, "sms")
		s := sendOn(tn.ID, sb.Live, sb.ChannelChat, "")
		s.Auto = true
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(2 * sb.ChatFallbackAfter)
		results := make(chan bool, 8)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				ok, err := db.ChatFallback(ctx, s.Message.ID, "ttl", later)
				if err != nil {
					t.Error(err)
				}
				results <- ok
			})
		}
		wg.Wait()
		close(results)
		n := 0
		for ok := range results {
			if ok {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d of 8 concurrent fallbacks moved the message, want 1", n)
		}
		if c := phoneCount(t, db, tn.ID, sms.ID); c != 1 {
			t.Errorf("the SMS phone counted %d messages, want 1", c)
		}
	})
}

// A send's ttl is stored with it and is its fallback deadline, counted from
// when it is due (its scheduled_at during quiet hours): an auto send keeps
// the ttl it was given, or the default; a send of channel sms or chat keeps
// none, and only a live auto message a chat engine carries has a deadline.
func TestChatFallbackTTL(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		chat := addKindPhone(t, db, tn.ID, "+15557"+strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[20:26]), sb.PhoneRBM, sb.PhoneOnline, "chat")
		addKindPhone(t, db, tn.ID, "+15558"+strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[20:26]), sb.PhoneSMPP, sb.PhoneOnline, "sms")
		now := time.Now().UTC().Truncate(time.Microsecond)
		send := func(env sb.Environment, channel string, auto bool, ttl time.Duration, to string, sched *time.Time) *sb.Message {
			t.Helper()
			s := sendOn(tn.ID, env, channel, "")
			s.Auto, s.Message.TTL, s.Message.To, s.Message.CreatedAt, s.Message.ScheduledAt = auto, ttl, to, now, sched
			if err := db.AcceptSend(ctx, s); err != nil {
				t.Fatal(err)
			}
			got, err := db.Message(ctx, tn.ID, env, s.Message.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		wake := now.Add(3 * time.Hour)
		given := send(sb.Live, sb.ChannelChat, true, 150*time.Second, "+15005550301", nil)
		dflt := send(sb.Live, sb.ChannelChat, true, 0, "+15005550302", nil)
		quiet := send(sb.Live, sb.ChannelChat, true, 600*time.Second, "+15005550303", &wake)
		explicit := send(sb.Live, sb.ChannelChat, false, 900*time.Second, "+15005550304", nil)
		bySMS := send(sb.Live, sb.ChannelSMS, true, 900*time.Second, "+15005550305", nil)
		test := send(sb.Test, sb.ChannelChat, true, 900*time.Second, "+15005550306", nil)
		for _, c := range []struct {
			m   *sb.Message
			ttl time.Duration
		}{{given, 150 * time.Second}, {dflt, time.Hour}, {quiet, 600 * time.Second}, {explicit, 0}, {bySMS, 900 * time.Second}, {test, 900 * time.Second}} {
			if c.m.TTL != c.ttl {
				t.Errorf("%s (to %s): ttl %v, want %v", c.m.ID, c.m.To, c.m.TTL, c.ttl)
			}
		}
		if given.PhoneID != chat.ID {
			t.Fatalf("the auto send went to phone %s, not the chat engine's", given.PhoneID)
		}
		due := func(at time.Time) []string {
			t.Helper()
			ids, err := db.DueChatFallbacks(ctx, at, 10)
			if err != nil {
				t.Fatal(err)
			}
			return ids
		}
		steps := []struct {
			at   time.Time
			want []string
		}{
			{now.Add(150*time.Second - time.Microsecond), nil},
			{now.Add(150 * time.Second), []string{given.ID}},
			{now.Add(time.Hour - time.Microsecond), []string{given.ID}},
			{now.Add(time.Hour), []string{given.ID, dflt.ID}},
			{wake.Add(600*time.Second - time.Microsecond), []string{given.ID, dflt.ID}},
			{wake.Add(600 * time.Second), []string{given.ID, dflt.ID, quiet.ID}},
			{now.AddDate(1, 0, 0), []string{given.ID, dflt.ID, quiet.ID}},
		}
		for _, s := range steps {
			if got := due(s.at); strings.Join(got, ",") != strings.Join(s.want, ",") {
				t.Errorf("due at now+%v: %v, want %v", s.at.Sub(now), got, s.want)
			}
		}
		// The ttl stays in the record after the fallback.
		if ok, err := db.ChatFallback(ctx, given.ID, "ttl", now.Add(150*time.Second)); !ok || err != nil {
			t.Fatalf("fallback: %v %v", ok, err)
		}
		if got, _ := db.Message(ctx, tn.ID, sb.Live, given.ID); got.Channel != sb.ChannelSMS || got.TTL != 150*time.Second {
			t.Errorf("after the fallback: channel %s ttl %v", got.Channel, got.TTL)
		}
	})
}

// A chat user writes to the agent, not to a number, and tenants may share
// the engine: the text belongs to the tenant whose phone of the link last
// wrote to the user live. From a user no tenant wrote to (or one written
// to only in test mode, or over another link), it is dropped: not stored,
// counted in the result.
func TestChatInboundOwner(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		a, b := writeTestTenant(t, db), writeTestTenant(t, db)
		phone := func(tenantID, link string) *sb.Phone {
			p := &sb.Phone{ID: sb.NewID(), TenantID: tenantID, Kind: sb.PhoneRBM, Link: link, Channels: []string{"chat"}, Status: sb.PhoneOnline, CreatedAt: time.Now().UTC(),
				Number: "+15557" + strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[20:26])}
			if err := db.AddPhone(ctx, p, nil); err != nil {
				t.Fatal(err)
			}
			return p
		}
		pa, pb := phone(a.ID, "rcs"), phone(b.ID, "rcs")
		po := phone(b.ID, "rcs-other")
		const u1, u2, u3, u4, u5 = "+15005550401", "+15005550402", "+15005550403", "+15005550404", "+15005550405"
		send := func(tenantID string, env sb.Environment, from, to string) {
			t.Helper()
			s := sendOn(tenantID, env, sb.ChannelChat, from)
			s.Message.To = to
			if err := db.AcceptSend(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		send(a.ID, sb.Live, pa.Number, u1)
		send(b.ID, sb.Test, pb.Number, u2) // test mode never reached u2
		send(a.ID, sb.Live, pa.Number, u4)
		send(b.ID, sb.Live, pb.Number, u4) // the last to write to u4
		send(b.ID, sb.Live, po.Number, u5) // over another engine
		inbound := func(from string) (sb.CarrierResult, *sb.Message) {
			t.Helper()
			m := &sb.Message{From: from, Body: "hello " + from, ExternalID: "in-" + from, Channel: sb.ChannelChat, CreatedAt: time.Now().UTC()}
			res, err := db.RecordCarrier(ctx, "rcs", []sb.CarrierEvent{{Kind: sb.CarrierInbound, At: m.CreatedAt, Inbound: m}})
			if err != nil {
				t.Fatal(err)
			}
			return res, m
		}
		for _, c := range []struct {
			from    string
			tenant  string
			to      string
			dropped int
		}{{u1, a.ID, pa.Number, 0}, {u2, "", "", 1}, {u3, "", "", 1}, {u4, b.ID, pb.Number, 0}, {u5, "", "", 1}} {
			res, m := inbound(c.from)
			if res.Dropped != c.dropped || m.TenantID != c.tenant || m.To != c.to {
				t.Errorf("from %s: dropped %d tenant %q to %q, want %d %q %q", c.from, res.Dropped, m.TenantID, m.To, c.dropped, c.tenant, c.to)
			}
		}
		for _, tn := range []struct {
			id   string
			want []string
		}{{a.ID, []string{u1}}, {b.ID, []string{u4}}} {
			var got []string
			for _, env := range []sb.Environment{sb.Live, sb.Test} {
				in, err := db.Messages(ctx, tn.id, env, sb.MessageFilter{Direction: sb.Inbound}, sb.Page{Limit: 10})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range in {
					got = append(got, m.From)
				}
			}
			if strings.Join(got, ",") != strings.Join(tn.want, ",") {
				t.Errorf("tenant %s received from %v, want %v", tn.id, got, tn.want)
			}
		}
	})
}

// A claim holds a due message for its lease (one claimer, due again after
// it); a revoked message is revoked once, and when no phone can send it by
// SMS it waits for one (due again after RevokedRetry) instead of staying
// with the engine that gave it up.
func TestChatFallbackRevoked(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		chat := addKindPhone(t, db, tn.ID, "+15557"+strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[20:26]), sb.PhoneRBM, sb.PhoneOnline, "chat")
		s := sendOn(tn.ID, sb.Live, sb.ChannelChat, "")
		s.Auto = true
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		id := s.Message.ID
		later := time.Now().UTC().Add(2 * sb.ChatFallbackAfter)
		if c, err := db.ClaimChatFallback(ctx, id, s.Message.ChatFallbackAt.Add(-time.Microsecond), time.Minute); c != nil || err != nil {
			t.Fatalf("claimed before its deadline: %+v %v", c, err)
		}
		c, err := db.ClaimChatFallback(ctx, id, later, time.Minute)
		if err != nil || c == nil {
			t.Fatalf("claim: %+v %v", c, err)
		}
		if c.Link != chat.Link || c.Kind != sb.PhoneRBM || c.To != s.Message.To || c.Status != sb.StatusQueued || c.Revoked || c.TenantID != tn.ID {
			t.Errorf("claim: %+v", c)
		}
		if again, _ := db.ClaimChatFallback(ctx, id, later, time.Minute); again != nil {
			t.Error("claimed twice within the lease")
		}
		if due, _ := db.DueChatFallbacks(ctx, later.Add(time.Minute-time.Microsecond), 10); len(due) != 0 {
			t.Errorf("due within the lease: %v", due)
		}
		if err := db.ChatRevoked(ctx, id, later); err != nil {
			t.Fatal(err)
		}
		if err := db.ChatRevoked(ctx, id, later); err == nil {
			t.Error("revoked twice")
		}
		// No SMS phone: it waits.
		if moved, err := db.ChatFallback(ctx, id, "revoked", later); moved || err != nil {
			t.Fatalf("fallback without an SMS phone: %v %v", moved, err)
		}
		if due, _ := db.DueChatFallbacks(ctx, later.Add(RevokedRetry-time.Microsecond), 10); len(due) != 0 {
			t.Errorf("due before RevokedRetry: %v", due)
		}
		if due, _ := db.DueChatFallbacks(ctx, later.Add(RevokedRetry), 10); len(due) != 1 {
			t.Fatalf("a revoked message with no SMS phone is not due again: %v", due)
		}
		c, err = db.ClaimChatFallback(ctx, id, later.Add(RevokedRetry), time.Minute)
		if err != nil || c == nil || !c.Revoked {
			t.Fatalf("the claim after the revoke: %+v %v", c, err)
		}
		sms := addKindPhone(t, db, tn.ID, "+15558"+strings.Map(func(r rune) rune { return '0' + r%10 }, sb.NewID()[20:26]), sb.PhoneSMPP, sb.PhoneOnline, "sms")
		if moved, err := db.ChatFallback(ctx, id, "revoked", later.Add(RevokedRetry)); !moved || err != nil {
			t.Fatalf("fallback once an SMS phone is there: %v %v", moved, err)
		}
		if got, _ := db.Message(ctx, tn.ID, sb.Live, id); got.PhoneID != sms.ID || got.Channel != sb.ChannelSMS {
			t.Errorf("after the fallback: %s %s", got.PhoneID, got.Channel)
		}
	})
}
