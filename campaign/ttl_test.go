package campaign

import (
	"context"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/sqlstore"
)

// channels is a Channels whose detection and quiet hours are given per
// number.
type channels struct {
	detect map[string]string
	quiet  map[string]time.Time
}

func (c channels) Detect(_ context.Context, _ string, _ sb.Environment, number string) (string, error) {
	return c.detect[number], nil
}

func (channels) ChatAvailable(context.Context, string, sb.Environment) error { return nil }

func (c channels) QuietUntil(number string, now time.Time) (time.Time, bool) {
	until, ok := c.quiet[number]
	return until, ok && now.Before(until)
}

// A campaign of channel auto gives the messages a chat engine carries the
// fallback deadline of a single send: the default ttl after they are due
// (now, or the end of quiet hours), and the record's ttl; its messages that
// go by SMS have no deadline, and a campaign of channel chat sets neither.
func TestCampaignChatFallbackDeadline(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, err := sqlstore.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		now := time.Date(2026, 3, 2, 15, 0, 0, 0, time.UTC)
		tn := &sb.Tenant{ID: sb.NewID(), Name: "c", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.AddDate(1, 0, 0), CreatedAt: now}
		if err := db.CreateTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
		for _, p := range []*sb.Phone{
			{ID: sb.NewID(), TenantID: tn.ID, Number: "+15557000001", Kind: sb.PhoneRBM, Link: "rcs", Channels: []string{"chat"}, Status: sb.PhoneOnline, CreatedAt: now},
			{ID: sb.NewID(), TenantID: tn.ID, Number: "+15558000001", Kind: sb.PhoneSMPP, Link: "smsc", Channels: []string{"sms"}, Status: sb.PhoneOnline, CreatedAt: now},
		} {
			if err := db.AddPhone(ctx, p, nil); err != nil {
				t.Fatal(err)
			}
		}
		const chatNow, chatQuiet, smsNow = "+15005550201", "+15005550202", "+15005550203"
		wake := now.Add(5 * time.Hour)
		ch := channels{
			detect: map[string]string{chatNow: sb.ChannelChat, chatQuiet: sb.ChannelChat, smsNow: sb.ChannelSMS},
			quiet:  map[string]time.Time{chatQuiet: wake},
		}
		launch := func(channel string, to ...string) *sb.Campaign {
			c := &sb.Campaign{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Name: channel, Body: "hi", Channel: channel,
				Audience: sb.AudienceTo, Recipients: to, Status: sb.CampaignDraft, Total: len(to), CreatedAt: now}
			if err := db.CreateCampaign(ctx, c, 0); err != nil {
				t.Fatal(err)
			}
			c, err := db.LaunchCampaign(ctx, tn.ID, sb.Live, c.ID, now)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		auto := launch(sb.ChannelAuto, chatNow, chatQuiet, smsNow)
		explicit := launch(sb.ChannelChat, "+15005550204")
		r := New(db, ch, sb.DefaultPlans(), Options{})
		r.now = func() time.Time { return now }
		for _, c := range []*sb.Campaign{auto, explicit} {
			if _, err := r.turn(ctx, c); err != nil {
				t.Fatal(err)
			}
		}

		msgs, err := db.Messages(ctx, tn.ID, sb.Live, sb.MessageFilter{}, sb.Page{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		byTo := map[string]*sb.Message{}
		for _, m := range msgs {
			byTo[m.To] = m
		}
		if len(byTo) != 4 {
			t.Fatalf("%d messages, want 4", len(msgs))
		}
		for to, want := range map[string]struct {
			channel string
			ttl     time.Duration
		}{chatNow: {sb.ChannelChat, time.Hour}, chatQuiet: {sb.ChannelChat, time.Hour}, smsNow: {sb.ChannelSMS, time.Hour}, "+15005550204": {sb.ChannelChat, 0}} {
			if m := byTo[to]; m.Channel != want.channel || m.TTL != want.ttl {
				t.Errorf("%s: channel %s ttl %v, want %s %v", to, m.Channel, m.TTL, want.channel, want.ttl)
			}
		}
		due := func(at time.Time) map[string]bool {
			t.Helper()
			ids, err := db.DueChatFallbacks(ctx, at, 10)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, id := range ids {
				got[id] = true
			}
			return got
		}
		// Due exactly one hour after it is due to go out, not a
		// microsecond before.
		if got := due(now.Add(time.Hour - time.Microsecond)); len(got) != 0 {
			t.Errorf("due before the ttl: %v", got)
		}
		if got := due(now.Add(time.Hour)); len(got) != 1 || !got[byTo[chatNow].ID] {
			t.Errorf("due at the ttl: %v, want only %s", got, byTo[chatNow].ID)
		}
		if got := due(wake.Add(time.Hour - time.Microsecond)); len(got) != 1 {
			t.Errorf("the quiet-hours message is due before its ttl from the end of quiet hours: %v", got)
		}
		if got := due(wake.Add(time.Hour)); len(got) != 2 || !got[byTo[chatQuiet].ID] {
			t.Errorf("due an hour after quiet hours: %v, want %s too", got, byTo[chatQuiet].ID)
		}
		if got := due(now.AddDate(0, 0, 30)); got[byTo[smsNow].ID] || got[byTo["+15005550204"].ID] {
			t.Errorf("an SMS message or a channel chat one has a deadline: %v", got)
		}
	})
}
