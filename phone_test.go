package switchboard

import (
	"math"
	"strings"
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
	phones := []PhoneUse{{Phone: a, Used: 7}, {Phone: b, Used: 3}, {Phone: c, Used: 0}, {Phone: d, Used: 5}, {Phone: off, Used: 0}}
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
		if got := id(r.Pick(Test, phones, tt.channel, tt.from, tt.sticky, tt.exclude, now)); got != tt.want {
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
	if got := id(r.Pick(Test, []PhoneUse{{Phone: b, Used: 1}, {Phone: a, Used: 1}}, ChannelSMS, "", "", "", now)); got != "2" {
		t.Errorf("tie: %q, want the first", got)
	}
	// Live traffic never goes to a simulated phone once the tenant has a
	// phone of another kind, even an offline one, even named by from.
	for _, tt := range []struct {
		name          string
		phones        []PhoneUse
		channel, from string
		want          string
	}{
		{"live: the android phone, not the less used simulated one", []PhoneUse{{Phone: a, Used: 0}, {Phone: b, Used: 3}}, ChannelSMS, "", "2"},
		{"live: chat only simulated, android present: none", []PhoneUse{{Phone: a, Used: 0}, {Phone: b, Used: 3}}, ChannelChat, "", ""},
		{"live: android offline: none", []PhoneUse{{Phone: a, Used: 0}, {Phone: c, Used: 0}}, ChannelSMS, "", ""},
		{"live: from the simulated phone: none", []PhoneUse{{Phone: a, Used: 0}, {Phone: b, Used: 3}}, ChannelSMS, a.Number, ""},
		{"live: only simulated phones", []PhoneUse{{Phone: a, Used: 0}}, ChannelChat, "", "1"},
	} {
		if got := id(r.Pick(Live, tt.phones, tt.channel, tt.from, "", "", now)); got != tt.want {
			t.Errorf("%s: picked %q, want %q", tt.name, got, tt.want)
		}
		if got := id(r.Pick(Test, tt.phones, ChannelSMS, "", "", "", now)); got == "" {
			t.Errorf("%s: test mode picked none", tt.name)
		}
	}
	if got := LiveSenders(Live, []*Phone{a, c}); len(got) != 1 || got[0] != c {
		t.Errorf("LiveSenders(live, simulated+android) = %v", got)
	}
	if got := LiveSenders(Test, []*Phone{a, c}); len(got) != 2 {
		t.Errorf("LiveSenders(test) = %v", got)
	}
	if EngineOf(Test, PhoneAndroid) != EngineSimulator || EngineOf(Live, PhoneSimulated) != EngineSimulator ||
		EngineOf(Live, "") != EngineSimulator || EngineOf(Live, PhoneSMPP) != EngineSMPP {
		t.Errorf("EngineOf")
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

// TestRoutingSweep: what the sweeper may do with a message of the device
// queue. One no device took moves when its phone cannot take it, unless its
// sender named the phone: then it waits for it, and fails once it is
// deleted; one a device took never moves, and fails as outcome unknown exactly at
// validUntil + ClockGrace + OutcomeAfter, whatever its phone does.
func TestRoutingSweep(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r := Routing{OfflineAfter: 2 * time.Minute, ClockGrace: 30 * time.Second, OutcomeAfter: time.Hour}
	seen, stale := now.Add(-time.Minute), now.Add(-2*time.Minute)
	online := &Phone{ID: "p", Kind: PhoneAndroid, Status: PhoneOnline, Device: &Device{ID: "d"}, LastSeenAt: &seen}
	offline := &Phone{ID: "p", Kind: PhoneAndroid, Status: PhoneOnline, Device: &Device{ID: "d"}, LastSeenAt: &stale}
	off := &Phone{ID: "p", Kind: PhoneAndroid, Status: PhoneOffline, Device: &Device{ID: "d"}, LastSeenAt: &seen}
	unpaired := &Phone{ID: "p", Kind: PhoneAndroid, Status: PhoneOnline}
	valid := now.Add(-time.Hour - 30*time.Second) // OutcomeUnknownAt is now
	for _, tt := range []struct {
		name string
		m    DeviceQueued
		at   time.Time
		want DeviceAction
	}{
		{"waiting, phone online", DeviceQueued{Phone: online}, now, DeviceWait},
		{"waiting, phone not seen for OfflineAfter", DeviceQueued{Phone: offline}, now, DeviceMove},
		{"waiting, phone switched off", DeviceQueued{Phone: off}, now, DeviceMove},
		{"waiting, phone unpaired", DeviceQueued{Phone: unpaired}, now, DeviceMove},
		{"waiting, phone deleted", DeviceQueued{}, now, DeviceMove},
		{"waiting for the phone its sender named, phone offline", DeviceQueued{Phone: offline, Pinned: true}, now, DeviceMove},
		{"waiting for the phone its sender named, phone switched off", DeviceQueued{Phone: off, Pinned: true}, now, DeviceMove},
		{"waiting for the phone its sender named, phone deleted", DeviceQueued{Pinned: true}, now, DeviceSenderDeleted},
		{"held, sender named the phone, phone deleted", DeviceQueued{Holder: "old", ValidUntil: now.Add(-time.Minute), Pinned: true}, now, DeviceWait},
		{"held, sender named the phone, phone deleted, at OutcomeUnknownAt", DeviceQueued{Holder: "old", ValidUntil: valid, Pinned: true}, now, DeviceOutcomeUnknown},
		{"held, validUntil passed long ago", DeviceQueued{Holder: "d", ValidUntil: now.Add(-time.Hour), Phone: offline}, now, DeviceWait},
		{"held, a microsecond before OutcomeUnknownAt", DeviceQueued{Holder: "d", ValidUntil: valid, Phone: online}, now.Add(-time.Microsecond), DeviceWait},
		{"held, at OutcomeUnknownAt", DeviceQueued{Holder: "d", ValidUntil: valid, Phone: online}, now, DeviceOutcomeUnknown},
		{"held, phone offline, deleted or replaced: still waits", DeviceQueued{Holder: "old", ValidUntil: now.Add(-time.Minute)}, now, DeviceWait},
		{"held by a deleted phone, at OutcomeUnknownAt", DeviceQueued{Holder: "old", ValidUntil: valid}, now, DeviceOutcomeUnknown},
	} {
		if got := r.Sweep(tt.m, tt.at); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if got, want := r.OutcomeUnknownAt(now), now.Add(time.Hour+30*time.Second); !got.Equal(want) {
		t.Errorf("OutcomeUnknownAt: %v, want %v", got, want)
	}
	// The defaults: a minute's grace, an hour's wait.
	if got, want := (Routing{}).OutcomeUnknownAt(now), now.Add(time.Hour+time.Minute); !got.Equal(want) {
		t.Errorf("OutcomeUnknownAt with the defaults: %v, want %v", got, want)
	}
	if got := SenderDeletedReason("+15551230001", "01PHONE"); !strings.Contains(got, "deleted") ||
		!strings.Contains(got, "+15551230001") || !strings.Contains(got, "01PHONE") {
		t.Errorf("SenderDeletedReason names neither the phone nor the rule: %q", got)
	}
	if got := OutcomeUnknownReason("+15551230001", "01PHONE", now); !strings.HasPrefix(got, "outcome unknown: ") ||
		!strings.Contains(got, "+15551230001") || !strings.Contains(got, "01PHONE") {
		t.Errorf("OutcomeUnknownReason names neither the phone nor the rule: %q", got)
	}
}

// TestProvesUnsent: only the app's Failed "TTL expired", before anything
// said the message was handed to Android, proves it was not sent.
func TestProvesUnsent(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ttl := DeviceReport{MessageID: "m", State: DeviceFailed, Error: DeviceTTLExpired, At: at}
	for _, tt := range []struct {
		name string
		rep  DeviceReport
		prev string
		want bool
	}{
		{"TTL expired, nothing reported before", ttl, "", true},
		{"TTL expired after Pending", ttl, DevicePending, true},
		{"TTL expired after Processed", ttl, DeviceProcessed, false},
		{"TTL expired after Sent", ttl, DeviceSent, false},
		{"TTL expired with a Processed time in the report", DeviceReport{State: DeviceFailed, Error: DeviceTTLExpired, SentAt: at}, "", false},
		{"another failure", DeviceReport{State: DeviceFailed, Error: "RESULT_ERROR_GENERIC_FAILURE"}, "", false},
		{"a failure that quotes TTL expired", DeviceReport{State: DeviceFailed, Error: "Send result: TTL expired"}, "", false},
		{"not a failure", DeviceReport{State: DevicePending, Error: DeviceTTLExpired}, "", false},
	} {
		if got := ProvesUnsent(tt.rep, tt.prev); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDeviceStatus(t *testing.T) {
	for state, want := range map[string]string{DevicePending: StatusQueued, DeviceProcessed: StatusSent, DeviceSent: StatusSent,
		DeviceDelivered: StatusDelivered, DeviceFailed: StatusFailed, DeviceCancelled: StatusFailed, "Canceled": "", "processed": ""} {
		if got := DeviceStatus(state); got != want {
			t.Errorf("DeviceStatus(%q) = %q, want %q", state, got, want)
		}
	}
}

func TestDeviceTime(t *testing.T) {
	created := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	for _, tt := range []struct{ said, want time.Time }{
		{time.Time{}, now}, // unreadable: the time of receipt
		{created.Add(time.Minute), created.Add(time.Minute)},
		{now.Add(time.Second), now},          // a clock ahead
		{created.Add(-time.Minute), created}, // a clock behind
	} {
		if got := DeviceTime(tt.said, created, now); !got.Equal(tt.want) {
			t.Errorf("DeviceTime(%v) = %v, want %v", tt.said, got, tt.want)
		}
	}
}

// A send that found no phone waits until the next UTC day when a phone
// that could take it is at its daily limit, PhoneBackAfter when one is
// offline but may come back, the shorter of the two when both; waiting
// does not help when no phone sends on the channel, or each is switched
// off or unpaired.
func TestNoPhoneWait(t *testing.T) {
	now := time.Date(2026, 11, 23, 22, 30, 15, 0, time.UTC)
	toMidnight := 90*time.Minute - 15*time.Second
	seen, stale := now.Add(-time.Minute), now.Add(-3*time.Minute)
	r := Routing{OfflineAfter: 2 * time.Minute}
	phone := func(number, kind string, limit int, lastSeen *time.Time, paired bool, channels ...string) *Phone {
		p := &Phone{ID: number, Number: number, Kind: kind, DailyLimit: limit, Channels: channels, Status: PhoneOnline, LastSeenAt: lastSeen}
		if paired {
			p.Device = &Device{ID: "d" + number}
		}
		return p
	}
	full := phone("+15550000001", PhoneAndroid, 5, &seen, true, ChannelSMS)         // online, at its limit
	quiet := phone("+15550000002", PhoneAndroid, 0, &stale, true, ChannelSMS)       // paired, device silent
	unpaired := phone("+15550000003", PhoneAndroid, 0, nil, false, ChannelSMS)      // never paired
	switchedOff := phone("+15550000004", PhoneSimulated, 0, nil, false, ChannelSMS) // operator's switch
	switchedOff.Status = PhoneOffline
	chatFull := phone("+15550000005", PhoneSimulated, 3, nil, false, ChannelChat)
	quietFull := phone("+15550000006", PhoneAndroid, 2, &stale, true, ChannelSMS) // offline and at its limit
	uses := func(us ...PhoneUse) []PhoneUse { return us }
	for _, c := range []struct {
		name          string
		phones        []PhoneUse
		channel, from string
		want          time.Duration // 0: no wait helps
	}{
		{"at its limit: the next UTC day", uses(PhoneUse{Phone: full, Used: 5}), ChannelSMS, "", toMidnight},
		{"offline: a minute", uses(PhoneUse{Phone: quiet, Used: 0}), ChannelSMS, "", PhoneBackAfter},
		{"both: the shorter", uses(PhoneUse{Phone: full, Used: 5}, PhoneUse{Phone: quiet, Used: 0}), ChannelSMS, "", PhoneBackAfter},
		{"offline at its limit: the next day", uses(PhoneUse{Phone: quietFull, Used: 2}), ChannelSMS, "", toMidnight},
		{"from: only that phone", uses(PhoneUse{Phone: full, Used: 5}, PhoneUse{Phone: quiet, Used: 0}), ChannelSMS, full.Number, toMidnight},
		{"from: a number not a phone", uses(PhoneUse{Phone: quiet, Used: 0}), ChannelSMS, "+15559999999", 0},
		{"no phone", nil, ChannelSMS, "", 0},
		{"unpaired", uses(PhoneUse{Phone: unpaired, Used: 0}), ChannelSMS, "", 0},
		{"switched off by the operator", uses(PhoneUse{Phone: switchedOff, Used: 0}), ChannelSMS, "", 0},
		{"none sends the channel", uses(PhoneUse{Phone: chatFull, Used: 3}, PhoneUse{Phone: quiet, Used: 0}), ChannelChat, "", toMidnight},
		{"none sends sms but a chat one", uses(PhoneUse{Phone: chatFull, Used: 3}), ChannelSMS, "", 0},
	} {
		got, ok := r.NoPhoneWait(Test, c.phones, c.channel, c.from, now)
		if ok != (c.want > 0) || got != c.want {
			t.Errorf("%s: %v %v, want %v", c.name, got, ok, c.want)
		}
	}
	// Live: a simulated phone skipped for a real one is nothing to wait for.
	if got, ok := r.NoPhoneWait(Live, uses(PhoneUse{Phone: chatFull, Used: 3}, PhoneUse{Phone: quiet, Used: 0}), ChannelChat, "", now); ok {
		t.Errorf("live, simulated chat phone beside an android one: wait %v", got)
	}
	// Just before midnight: the wait is what is left of the day.
	late := time.Date(2026, 11, 23, 23, 59, 59, 500_000_000, time.UTC)
	if got, _ := r.NoPhoneWait(Live, uses(PhoneUse{Phone: full, Used: 5}), ChannelSMS, "", late); got != 500*time.Millisecond {
		t.Errorf("half a second before midnight: %v", got)
	}
}

func TestWarmupLimit(t *testing.T) {
	from := time.Date(2026, 11, 1, 18, 0, 0, 0, time.UTC)
	w := &Warmup{Start: 50, Days: 14, From: from}
	p := &Phone{DailyLimit: 1000, Warmup: w}
	// The first day is the UTC day of From, to its end.
	if got := p.LimitOn(from.Add(5 * time.Hour)); got != 50 {
		t.Errorf("day 1 late evening: %d, want 50", got)
	}
	if got := p.LimitOn(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)); got == 50 {
		t.Errorf("day 2 at midnight is still 50")
	}
	at := func(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }
	prev := 0
	for d := 1; d <= 16; d++ {
		got := p.LimitOn(at(d))
		want := int(math.Floor(50*math.Pow(20, float64(d-1)/13) + 1e-9))
		if d >= 14 {
			want = 1000
		}
		if got != want || got < prev {
			t.Errorf("day %d: limit %d, want %d (after %d)", d, got, want, prev)
		}
		prev = got
	}
	if p.LimitOn(at(1)) != 50 || p.LimitOn(at(14)) != 1000 {
		t.Errorf("day 1 %d, day 14 %d", p.LimitOn(at(1)), p.LimitOn(at(14)))
	}
	// Day 1 of 50/14 refuses the 51st.
	r := Routing{}
	now := at(1)
	p.Kind, p.Status, p.Channels = PhoneSimulated, PhoneOnline, []string{ChannelSMS}
	if !r.Usable(PhoneUse{Phone: p, Used: 49}, ChannelSMS, now) || r.Usable(PhoneUse{Phone: p, Used: 50}, ChannelSMS, now) {
		t.Errorf("day 1: usable at 49 %v, at 50 %v", r.Usable(PhoneUse{Phone: p, Used: 49}, ChannelSMS, now), r.Usable(PhoneUse{Phone: p, Used: 50}, ChannelSMS, now))
	}
	if w, ok := r.NoPhoneWait(Live, []PhoneUse{{Phone: p, Used: 50}}, ChannelSMS, "", now); !ok || w != 12*time.Hour {
		t.Errorf("NoPhoneWait at the warm-up's limit: %v %v, want the next day", w, ok)
	}
	// No daily limit, or no warm-up: the daily limit.
	if (&Phone{DailyLimit: 0, Warmup: w}).LimitOn(now) != 0 || (&Phone{DailyLimit: 7}).LimitOn(now) != 7 {
		t.Error("LimitOn without a limit or a warm-up")
	}
	if (&Phone{DailyLimit: 30, Warmup: w}).LimitOn(now) != 30 {
		t.Error("a start above the daily limit gives the daily limit")
	}
}

func TestQuarantinePolicy(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	outcomes := func(failed, ok int, age time.Duration) []SendOutcome {
		var out []SendOutcome
		for i := 0; i < ok; i++ {
			out = append(out, SendOutcome{At: now.Add(-age)})
		}
		for i := 0; i < failed; i++ {
			out = append(out, SendOutcome{At: now.Add(-age), Failed: true, Reason: "RESULT_ERROR_GENERIC_FAILURE"})
		}
		return out
	}
	var q QuarantinePolicy // the default: 5 of 10
	if got := q.Trips(outcomes(5, 5, time.Minute), now); got == nil || len(got.Reasons) != 1 || got.Reasons[0] != "RESULT_ERROR_GENERIC_FAILURE" {
		t.Errorf("5 of 10: %+v, want quarantined with the reason", got)
	}
	if got := q.Trips(outcomes(4, 6, time.Minute), now); got != nil {
		t.Errorf("4 of 10: %+v, want not quarantined", got)
	}
	// Only the last 10 count: 5 failures followed by 10 successes is not.
	if got := q.Trips(append(outcomes(5, 0, 2*time.Minute), outcomes(0, 10, time.Minute)...), now); got != nil {
		t.Errorf("5 failures then 10 sent: %+v", got)
	}
	// Only the last hour counts.
	if got := q.Trips(outcomes(5, 0, 61*time.Minute), now); got != nil {
		t.Errorf("5 failures over an hour ago: %+v", got)
	}
	// A policy of the phone's own.
	if got := (QuarantinePolicy{Failed: 2, Of: 3}).Trips(outcomes(2, 1, time.Minute), now); got == nil {
		t.Error("2 of 3 with a policy of 2 of 3: not quarantined")
	}
	if len(q.Recent(outcomes(3, 20, time.Minute), now)) != 10 {
		t.Error("Recent keeps the last 10")
	}
	// What counts: Failed but TTL expired; the first Sent or Delivered.
	for _, tt := range []struct {
		rep          DeviceReport
		prev         string
		counts, fail bool
	}{
		{DeviceReport{State: DeviceFailed, Error: "x"}, DeviceProcessed, true, true},
		{DeviceReport{State: DeviceFailed, Error: DeviceTTLExpired}, "", false, false},
		{DeviceReport{State: DeviceSent}, DeviceProcessed, true, false},
		{DeviceReport{State: DeviceDelivered}, DeviceSent, false, false},
		{DeviceReport{State: DeviceDelivered}, DeviceProcessed, true, false},
		{DeviceReport{State: DeviceProcessed}, "", false, false},
	} {
		o, ok := CountsForQuarantine(tt.rep, tt.prev)
		if ok != tt.counts || o.Failed != tt.fail {
			t.Errorf("%+v after %q: counts %v failed %v", tt.rep, tt.prev, ok, o.Failed)
		}
	}
}

func TestPhoneTrouble(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	p := func(h *Health) *Phone {
		return &Phone{Kind: PhoneAndroid, Device: &Device{PairedAt: now.Add(-time.Hour)}, Health: h}
	}
	fresh := now.Add(-30 * time.Second)
	for _, tt := range []struct {
		name string
		h    *Health
		want string
	}{
		{"healthy", &Health{BatteryLevel: 80, Network: NetworkWiFi, ReportedAt: fresh}, ""},
		{"low battery", &Health{BatteryLevel: 14, Network: NetworkWiFi, ReportedAt: fresh}, TroubleLowBattery},
		{"15% is not low", &Health{BatteryLevel: 15, Network: NetworkWiFi, ReportedAt: fresh}, ""},
		{"low but charging", &Health{BatteryLevel: 5, Charging: true, Network: NetworkWiFi, ReportedAt: fresh}, ""},
		{"no network", &Health{BatteryLevel: 80, Network: NetworkNone, ReportedAt: fresh}, TroubleNoNetwork},
		{"ping three intervals old", &Health{BatteryLevel: 80, Network: NetworkWiFi, ReportedAt: now.Add(-3 * time.Minute)}, ""},
		{"ping older than three intervals", &Health{BatteryLevel: 80, Network: NetworkWiFi, ReportedAt: now.Add(-3*time.Minute - time.Second)}, TroublePingLate},
		{"never pinged", nil, TroublePingLate},
	} {
		if got := strings.Join(PhoneTrouble(p(tt.h), time.Minute, now), ","); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if PhoneTrouble(&Phone{Kind: PhoneSimulated}, time.Minute, now) != nil {
		t.Error("a simulated phone is never in trouble")
	}
}

func TestQuarantinedPhoneTakesNothing(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	q := &Phone{ID: "q", Kind: PhoneSimulated, Status: PhoneQuarantined, Channels: []string{ChannelSMS}}
	r := Routing{}
	if r.Pick(Live, []PhoneUse{{Phone: q, Used: 0}}, ChannelSMS, "", "", "", now) != nil || r.Status(q, now) != PhoneQuarantined {
		t.Error("a quarantined phone was picked, or shows another status")
	}
	if _, ok := r.NoPhoneWait(Live, []PhoneUse{{Phone: q, Used: 0}}, ChannelSMS, "", now); ok {
		t.Error("NoPhoneWait waits for a quarantined phone, which only the tenant brings back")
	}
}

// TestCancelOnDevice: a canceled message is withdrawn from its device only
// while the device has not reported it Processed; the device's Cancelled
// confirms it, and so does a TTL-expired proof that it was not sent, but
// only when the cancel was asked; nothing confirms a cancel once the
// message got as far as Processed.
func TestCancelOnDevice(t *testing.T) {
	for _, c := range []struct {
		prev string
		want bool
	}{{"", true}, {DevicePending, true}, {DeviceProcessed, false}, {DeviceSent, false}, {DeviceDelivered, false}, {DeviceFailed, false}} {
		if got := CancelOnDevice(c.prev); got != c.want {
			t.Errorf("CancelOnDevice(%q) = %v", c.prev, got)
		}
	}
	cancelled := DeviceReport{State: DeviceCancelled}
	ttl := DeviceReport{State: DeviceFailed, Error: DeviceTTLExpired}
	failed := DeviceReport{State: DeviceFailed, Error: "RESULT_ERROR_GENERIC_FAILURE"}
	for _, c := range []struct {
		rep   DeviceReport
		prev  string
		asked bool
		want  bool
	}{
		{cancelled, DevicePending, true, true},
		{cancelled, "", false, true}, // unasked: the store fails it, not as a campaign cancel
		{cancelled, DeviceProcessed, true, false},
		{cancelled, DeviceSent, true, false},
		{ttl, DevicePending, true, true},
		{ttl, DevicePending, false, false}, // not asked: it moves to another phone
		{ttl, DeviceProcessed, true, false},
		{failed, DevicePending, true, false},
		{DeviceReport{State: DeviceCancelled, SentAt: time.Now()}, DevicePending, true, false},
	} {
		if got := ConfirmsCancel(c.rep, c.prev, c.asked); got != c.want {
			t.Errorf("ConfirmsCancel(%+v, %q, asked %v) = %v", c.rep, c.prev, c.asked, got)
		}
	}
}
