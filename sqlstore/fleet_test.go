package sqlstore

// The fleet's rules against a real database: quarantine from a phone's own
// reports, its way back, its event; warm-up limits at the send; health.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// TestQuarantineFromReports: a phone whose own reports fail 5 of its last
// 10 is quarantined (4 of 10 is not), with its reasons in the record and
// a phone.quarantined delivery; its messages no device holds move to
// another phone; PATCH status online brings it back.
func TestQuarantineFromReports(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		hook := &sb.Webhook{ID: sb.NewID(), TenantID: f.tenant.ID, Env: sb.Live, URL: "https://example.com/h",
			Events: []string{sb.EventPhoneQuarantined}, Secret: strings.Repeat("s", 20), CreatedAt: time.Now()}
		if err := f.db.CreateWebhook(bg, hook); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551260001", t0)
		b, devB := f.phone("+15551260002", t0.Add(-time.Hour)) // offline: a takes every message
		var ids []string
		for range 12 {
			ids = append(ids, f.send(t0))
		}
		taken, _, _ := f.take(a, devA, t0)
		if len(taken) != 12 {
			t.Fatalf("a took %d", len(taken))
		}
		report := func(id, state, reason string) {
			f.report(a, devA, t0.Add(time.Minute), sb.DeviceReport{MessageID: id, State: sb.DeviceProcessed})
			f.report(a, devA, t0.Add(time.Minute), sb.DeviceReport{MessageID: id, State: state, Error: reason})
		}
		status := func() *sb.Phone {
			p, err := f.db.Phone(bg, f.tenant.ID, sb.Live, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		for i := range 6 {
			report(ids[i], sb.DeviceSent, "")
		}
		for i := 6; i < 10; i++ {
			report(ids[i], sb.DeviceFailed, "RESULT_ERROR_GENERIC_FAILURE")
		}
		// A TTL expired says nothing of the SIM, and a Delivered after Sent
		// is the same outcome again.
		f.report(a, devA, t0.Add(time.Minute), sb.DeviceReport{MessageID: ids[0], State: sb.DeviceDelivered})
		if p := status(); p.Status != sb.PhoneOnline || p.Quarantine != nil {
			t.Fatalf("4 of 10 failed: %s %+v, want online", p.Status, p.Quarantine)
		}
		// A message waiting for a (not handed out yet).
		f.seen(a, devA, t0.Add(time.Minute))
		waiting := f.send(t0.Add(time.Minute))
		if m := f.message(waiting); m.PhoneID != a.ID {
			t.Fatalf("waiting on %s, want a", m.PhoneID)
		}
		report(ids[10], sb.DeviceFailed, "RESULT_ERROR_RADIO_OFF") // the last 10: 5 sent, 5 failed
		p := status()
		if p.Status != sb.PhoneQuarantined || p.Quarantine == nil || strings.Join(p.Quarantine.Reasons, "|") != "RESULT_ERROR_RADIO_OFF|RESULT_ERROR_GENERIC_FAILURE" {
			t.Fatalf("5 of 10 failed: %s %+v, want quarantined with both reasons", p.Status, p.Quarantine)
		}
		ds, err := f.db.Deliveries(bg, f.tenant.ID, sb.Live, hook.ID, sb.Page{Limit: 10})
		if err != nil || len(ds) != 1 || ds[0].Event != sb.EventPhoneQuarantined || ds[0].PhoneID != a.ID || ds[0].MessageID != "" {
			t.Fatalf("deliveries: %v %+v", err, ds)
		}
		var ev sb.PhoneEvent
		if err := json.Unmarshal(ds[0].Payload, &ev); err != nil || ev.PhoneID != a.ID || ev.Number != a.Number || ev.Reason == "" || ev.Timestamp == "" {
			t.Fatalf("payload %s: %v", ds[0].Payload, err)
		}
		// Its waiting message moves to b; a is handed nothing new.
		at := t0.Add(2*time.Minute + time.Second)
		f.seen(b, devB, at)
		f.sweep(at)
		if m := f.message(waiting); m.PhoneID != b.ID {
			t.Errorf("the waiting message is on %s, want b", m.PhoneID)
		}
		// Another failure report changes nothing more: no second event.
		report(ids[11], sb.DeviceFailed, "x")
		if ds, _ := f.db.Deliveries(bg, f.tenant.ID, sb.Live, hook.ID, sb.Page{Limit: 10}); len(ds) != 1 {
			t.Errorf("%d deliveries after another failure, want 1", len(ds))
		}
		// Back with PATCH: online, its quarantine and outcomes forgotten.
		online := sb.PhoneOnline
		if err := f.db.UpdatePhone(bg, f.tenant.ID, a.ID, sb.PhonePatch{Status: &online}); err != nil {
			t.Fatal(err)
		}
		if p := status(); p.Status != sb.PhoneOnline || p.Quarantine != nil {
			t.Fatalf("after PATCH: %s %+v", p.Status, p.Quarantine)
		}
	})
}

// TestWarmupLimitAtSend: on day 1 of a 50/14 warm-up (daily limit 1000),
// the 51st send finds no phone; PATCH can end the warm-up.
func TestWarmupLimitAtSend(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tenant := newTestTenant(t, db, "scale")
		now := time.Now().UTC()
		p := &sb.Phone{ID: sb.NewID(), TenantID: tenant.ID, Number: "+15551270001", Kind: sb.PhoneSimulated, Channels: []string{sb.ChannelSMS},
			Status: sb.PhoneOnline, DailyLimit: 1000, Warmup: &sb.Warmup{Start: 50, Days: 14, From: now}, CreatedAt: now}
		if err := db.AddPhone(bg, p, nil); err != nil {
			t.Fatal(err)
		}
		send := func() error {
			m := &sb.Message{ID: sb.NewID(), TenantID: tenant.ID, Env: sb.Live, Direction: sb.Outbound, To: "+15005550" + sb.NewID()[20:23],
				Body: "x", Channel: sb.ChannelSMS, Status: sb.StatusQueued, CreatedAt: time.Now().UTC()}
			return db.AcceptSend(bg, &sb.Send{Message: m})
		}
		for i := range 50 {
			if err := send(); err != nil {
				t.Fatalf("send %d: %v", i+1, err)
			}
		}
		if err := send(); sb.ErrorCode(err) != sb.CodeNoPhoneAvailable {
			t.Fatalf("the 51st send on day 1: %v, want NO_PHONE_AVAILABLE", err)
		}
		got, err := db.Phone(bg, tenant.ID, sb.Live, p.ID)
		if err != nil || got.Warmup == nil || got.Warmup.Start != 50 || got.Warmup.Days != 14 || got.LimitOn(time.Now()) != 50 {
			t.Fatalf("read back: %v %+v", err, got)
		}
		if err := db.UpdatePhone(bg, tenant.ID, p.ID, sb.PhonePatch{Warmup: &sb.Warmup{}}); err != nil {
			t.Fatal(err)
		}
		if err := send(); err != nil {
			t.Fatalf("after the warm-up ended: %v", err)
		}
	})
}

func TestRecordHealth(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551280001", t0)
		h := sb.Health{BatteryLevel: 12, Charging: false, Network: sb.NetworkCellular, FailedLastHour: 3, ReportedAt: t0}
		if err := f.db.RecordHealth(bg, a.ID, devA, h); err != nil {
			t.Fatal(err)
		}
		if err := f.db.RecordHealth(bg, a.ID, "another device", sb.Health{BatteryLevel: 99, ReportedAt: t0}); err != nil {
			t.Fatal(err)
		}
		p, err := f.db.Phone(bg, f.tenant.ID, sb.Live, a.ID)
		if err != nil || p.Health == nil || *p.Health != h {
			t.Fatalf("health: %v %+v, want %+v", err, p.Health, h)
		}
		// An older health written late (a node's confirmation of the
		// health before, flushed after another node wrote the change)
		// does not overwrite a newer one.
		if err := f.db.RecordHealth(bg, a.ID, devA, sb.Health{BatteryLevel: 80, Network: sb.NetworkWiFi, ReportedAt: t0.Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
		if p, err := f.db.Phone(bg, f.tenant.ID, sb.Live, a.ID); err != nil || p.Health == nil || *p.Health != h {
			t.Fatalf("after an older health: %v %+v, want %+v", err, p.Health, h)
		}
		newer := sb.Health{BatteryLevel: 11, Network: sb.NetworkCellular, FailedLastHour: 3, ReportedAt: t0.Add(time.Second)}
		if err := f.db.RecordHealth(bg, a.ID, devA, newer); err != nil {
			t.Fatal(err)
		}
		if p, err := f.db.Phone(bg, f.tenant.ID, sb.Live, a.ID); err != nil || p.Health == nil || *p.Health != newer {
			t.Fatalf("after a newer health: %v %+v, want %+v", err, p.Health, newer)
		}
	})
}

// TestAnnouncePresence: a paired phone is announced online once, offline
// once its device is not seen since the cutoff (not a microsecond
// before), online again when it is seen; each change once, with its
// delivery naming the phone.
func TestAnnouncePresence(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		hook := &sb.Webhook{ID: sb.NewID(), TenantID: f.tenant.ID, Env: sb.Live, URL: "https://example.com/h",
			Events: []string{sb.EventPhoneOffline, sb.EventPhoneOnline}, Secret: strings.Repeat("s", 20), CreatedAt: time.Now()}
		if err := f.db.CreateWebhook(bg, hook); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551290001", t0)
		announce := func(at time.Time) (int, int) {
			off, on, err := f.db.AnnouncePresence(bg, at, deviceRouting.SeenCutoff(at), 100)
			if err != nil {
				t.Fatal(err)
			}
			return off, on
		}
		if off, on := announce(t0); off != 0 || on != 1 {
			t.Fatalf("after pairing: %d offline, %d online; want 1 online", off, on)
		}
		if off, on := announce(t0.Add(time.Second)); off != 0 || on != 0 {
			t.Fatalf("again: %d %d, want nothing", off, on)
		}
		// Offline at exactly OfflineAfter after it was last seen.
		if off, on := announce(t0.Add(2*time.Minute - time.Microsecond)); off != 0 || on != 0 {
			t.Fatalf("before OfflineAfter: %d %d", off, on)
		}
		if off, on := announce(t0.Add(2 * time.Minute)); off != 1 || on != 0 {
			t.Fatalf("at OfflineAfter: %d %d, want 1 offline", off, on)
		}
		if off, _ := announce(t0.Add(3 * time.Minute)); off != 0 {
			t.Fatalf("offline announced twice")
		}
		f.seen(a, devA, t0.Add(4*time.Minute))
		if off, on := announce(t0.Add(4 * time.Minute)); off != 0 || on != 1 {
			t.Fatalf("seen again: %d %d, want 1 online", off, on)
		}
		ds, err := f.db.Deliveries(bg, f.tenant.ID, sb.Live, hook.ID, sb.Page{Limit: 10})
		if err != nil || len(ds) != 3 || ds[0].Event != sb.EventPhoneOnline || ds[1].Event != sb.EventPhoneOffline || ds[2].Event != sb.EventPhoneOnline ||
			ds[1].PhoneID != a.ID {
			t.Fatalf("deliveries: %v %d", err, len(ds))
		}
	})
}

// TestPriorityHandedFirst: a high-priority message waiting for a device is
// handed out before the normal ones that waited longer, whatever order the
// device asks for.
func TestPriorityHandedFirst(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551300001", t0)
		var normal string
		for range 3 {
			normal = f.send(t0)
		}
		m := &sb.Message{ID: sb.NewID(), TenantID: f.tenant.ID, Env: sb.Live, Direction: sb.Outbound, To: "+15005550123",
			Body: "urgent", Channel: sb.ChannelSMS, Status: sb.StatusQueued, CreatedAt: t0.Add(time.Second), HighPriority: true}
		if err := f.db.AcceptSend(bg, &sb.Send{Message: m}); err != nil {
			t.Fatal(err)
		}
		for _, lifo := range []bool{false, true} { // the second time: handed again, held
			msgs, _, _, err := f.db.TakeDeviceMessages(bg, a.ID, devA, lifo, t0.Add(2*time.Second), 10*time.Minute)
			if err != nil || len(msgs) != 4 || msgs[0].ID != m.ID || !msgs[0].HighPriority || msgs[1].HighPriority {
				t.Fatalf("lifo %v: %v %d messages, first %v", lifo, err, len(msgs), msgs)
			}
		}
		if !f.message(m.ID).HighPriority || f.message(normal).HighPriority {
			t.Error("the message record does not keep the priority")
		}
	})
}
