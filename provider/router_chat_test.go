package provider_test

import (
	"context"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/rbm"
	"github.com/switchboard/switchboard/provider/rbm/rbmtest"
	"github.com/switchboard/switchboard/provider/simulator"
	"github.com/switchboard/switchboard/sqlstore"
)

// A tenant bound to a chat engine and an SMS number gets channel auto
// resolved per recipient: chat where the agent reaches the number, else
// sms; each message goes out from the phone of its channel, and its record
// names the engine. Test traffic keeps the simulator's rules.
func TestAutoPerRecipient(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake := rbmtest.New("agent-1")
	defer fake.Close()
	const reachable, smsOnly, outage = "+15552220001", "+15552220002", "+15552220003"
	fake.Script(smsOnly, rbmtest.NotCapable)
	fake.Script(outage, rbmtest.Down)
	db, err := sqlstore.Open(ctx, dbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	tn := &sb.Tenant{ID: sb.NewID(), Name: "t", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	add := func(number, kind, link string, channels ...string) *sb.Phone {
		p := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: number, Kind: kind, Link: link, Channels: channels, Status: sb.PhoneOnline, CreatedAt: now}
		if err := db.AddPhone(ctx, p, nil); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sim := add("+15552229990", sb.PhoneSimulated, "", sb.ChannelSMS, sb.ChannelChat)
	chat := add("+15552229991", sb.PhoneRBM, "rcs", sb.ChannelChat)
	sms := add("+15552229992", sb.PhoneSMPP, "c1", sb.ChannelSMS)

	link, err := rbm.New(carrier.Config{Name: "rcs", Type: carrier.TypeRBM, BaseURL: fake.URL, AgentID: "agent-1",
		ServiceAccount: carrier.Secret(fake.KeyFile()), ClientToken: "tok"}, db, rbm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := simulator.New(0)
	defer s.Close()
	router := provider.NewRouter(s, db)
	defer router.Close()
	router.UseChatEngines(db, map[string]provider.ChatEngine{"rcs": link})

	send := func(env sb.Environment, to string) *sb.Message {
		t.Helper()
		ch, err := router.Detect(ctx, tn.ID, env, to)
		if err != nil {
			t.Fatalf("detect %s: %v", to, err)
		}
		m := &sb.Message{ID: sb.NewID(), TenantID: tn.ID, Env: env, Direction: sb.Outbound, To: to, Body: "hi", Channel: ch,
			Status: sb.StatusQueued, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
		if err := db.AcceptSend(ctx, &sb.Send{Message: m, Auto: true, NewContactLimit: 100}); err != nil {
			t.Fatalf("send to %s: %v", to, err)
		}
		return m
	}
	for _, c := range []struct {
		to, channel, phone, engine string
	}{
		{reachable, sb.ChannelChat, chat.ID, sb.EngineRBM},
		{smsOnly, sb.ChannelSMS, sms.ID, sb.EngineSMPP},
	} {
		m := send(sb.Live, c.to)
		if m.Channel != c.channel || m.PhoneID != c.phone || m.Engine != c.engine {
			t.Errorf("live auto to %s: %s from %s (%s), want %s from %s (%s)", c.to, m.Channel, m.PhoneID, m.Engine, c.channel, c.phone, c.engine)
		}
	}
	if _, err := router.Detect(ctx, tn.ID, sb.Live, outage); sb.ErrorCode(err) != sb.CodeDetectionUnavailable {
		t.Errorf("detection while the agent is down: %v", err)
	}
	if err := router.ChatAvailable(ctx, tn.ID, sb.Live); err != nil {
		t.Errorf("chat available: %v", err)
	}
	// The test environment: the simulator's rules and phone.
	if m := send(sb.Test, smsOnly); m.Channel != sb.ChannelChat || m.Engine != sb.EngineSimulator || m.PhoneID != sim.ID {
		t.Errorf("test auto: %s from %s (%s)", m.Channel, m.PhoneID, m.Engine)
	}
	// A tenant with a real SMS phone and no chat engine: no chat at all
	// (the simulator would say chat for this number).
	other := &sb.Tenant{ID: sb.NewID(), Name: "o", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now}
	if err := db.CreateTenant(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := db.AddPhone(ctx, &sb.Phone{ID: sb.NewID(), TenantID: other.ID, Number: "+15552229993", Kind: sb.PhoneSMPP, Link: "c1",
		Channels: []string{sb.ChannelSMS}, Status: sb.PhoneOnline, CreatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	if ch, err := router.Detect(ctx, other.ID, sb.Live, reachable); ch != sb.ChannelSMS || err != nil {
		t.Errorf("a tenant without a chat engine: %q %v, want sms", ch, err)
	}
	// A campaign's audience is asked in one batch.
	router.DetectMany(ctx, tn.ID, sb.Live, []string{"+15552220010", "+15552220011"})
	if n := fake.Requests("batchGet"); n != 1 {
		t.Errorf("batchGet: %d", n)
	}
}
