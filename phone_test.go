package switchboard

import (
	"testing"
	"time"
)

func TestRoutingPick(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	seen := now.Add(-time.Minute)
	stale := now.Add(-3 * time.Minute)
	dev := &Device{ID: "d"}
	phone := func(id, kind string, limit int, lastSeen *time.Time, channels ...string) *Phone {
		p := &Phone{ID: id, Number: "+1555000000" + id, Kind: kind, DailyLimit: limit, Channels: channels, Status: PhoneOnline, LastSeenAt: lastSeen}
		if kind == PhoneAndroid && lastSeen != nil {
			p.Device = dev
		}
		return p
	}
	a := phone("1", PhoneSimulated, 0, nil, ChannelSMS, ChannelChat)
	b := phone("2", PhoneAndroid, 10, &seen, ChannelSMS)
	c := phone("3", PhoneAndroid, 0, &stale, ChannelSMS) // offline: not seen for 3 minutes
	d := phone("4", PhoneAndroid, 5, &seen, ChannelSMS)  // at its limit
	off := phone("5", PhoneSimulated, 0, nil, ChannelSMS)
	off.Status = PhoneOffline
	phones := []PhoneUse{{a, 7}, {b, 3}, {c, 0}, {d, 5}, {off, 0}}
	r := Routing{OfflineAfter: 2 * time.Minute}
	id := func(u *PhoneUse) string {
		if u == nil {
			return ""
		}
		return u.Phone.ID
	}
	for _, tt := range []struct {
		name                           string
		channel, from, sticky, exclude string
		want                           string
	}{
		{"least used of the usable", ChannelSMS, "", "", "", "2"},
		{"chat: only a sends it", ChannelChat, "", "", "", "1"},
		{"sticky while usable", ChannelSMS, "", "1", "", "1"},
		{"sticky offline: least used", ChannelSMS, "", "3", "", "2"},
		{"sticky at its limit: least used", ChannelSMS, "", "4", "", "2"},
		{"from", ChannelSMS, a.Number, "2", "", "1"},
		{"from offline: none", ChannelSMS, c.Number, "", "", ""},
		{"from at its limit: none", ChannelSMS, d.Number, "", "", ""},
		{"from switched off: none", ChannelSMS, off.Number, "", "", ""},
		{"exclude", ChannelSMS, "", "", "2", "1"},
		{"exclude the sticky one", ChannelSMS, "", "2", "2", "1"},
		{"exclude the only chat phone", ChannelChat, "", "", "1", ""},
	} {
		if got := id(r.Pick(phones, tt.channel, tt.from, tt.sticky, tt.exclude, now)); got != tt.want {
			t.Errorf("%s: picked %q, want %q", tt.name, got, tt.want)
		}
	}
	// An android phone is online while seen within OfflineAfter, and paired.
	if r.Online(c, now) || !r.Online(b, now) || r.Online(&Phone{Kind: PhoneAndroid, Status: PhoneOnline, LastSeenAt: &seen}, now) {
		t.Errorf("Online: stale %v, seen %v, unpaired %v", r.Online(c, now), r.Online(b, now), r.Online(&Phone{Kind: PhoneAndroid, Status: PhoneOnline, LastSeenAt: &seen}, now))
	}
	if !(Routing{OfflineAfter: 5 * time.Minute}).Online(c, now) {
		t.Errorf("seen 3 minutes ago is online with OfflineAfter 5m")
	}
	// On a tie the first phone wins.
	if got := id(r.Pick([]PhoneUse{{b, 1}, {a, 1}}, ChannelSMS, "", "", "", now)); got != "2" {
		t.Errorf("tie: %q, want the first", got)
	}
}

type links map[string]bool

func (l links) LinkUp(name string) bool { return l[name] }

// TestRoutingOnlineCarrier: a carrier phone is online while the operator
// has it on and its link is up; with no link state at hand (the operator
// commands), the switch alone decides.
func TestRoutingOnlineCarrier(t *testing.T) {
	now := time.Now()
	p := &Phone{Kind: PhoneSMPP, Link: "c1", Status: PhoneOnline}
	up := Routing{Links: links{"c1": true}}
	down := Routing{Links: links{"c1": false, "c2": true}}
	if !up.Online(p, now) || down.Online(p, now) {
		t.Fatalf("online with the link up: %v, down: %v", up.Online(p, now), down.Online(p, now))
	}
	if !(Routing{}).Online(p, now) {
		t.Fatal("no link state: the switch decides")
	}
	p.Status = PhoneOffline
	if up.Online(p, now) {
		t.Fatal("switched off, yet online")
	}
	// A phone of no link is not asked about links.
	sim := &Phone{Kind: PhoneSimulated, Status: PhoneOnline}
	if !down.Online(sim, now) {
		t.Fatal("a simulated phone offline because a link is down")
	}
}
