package sqlstore

// The device queue against a real database, on a controlled clock: every
// call takes the time it runs at, so the tests step to each boundary of the
// routing rules (sb.Routing.Sweep) and check that nothing happens a
// microsecond before it and exactly what the rule allows at it.

import (
	"strings"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// deviceFixture is a tenant with android phones paired with devices, on a
// store whose routing rules are routing.
type deviceFixture struct {
	t      *testing.T
	db     *DB
	tenant *sb.Tenant

	mu     sync.Mutex
	events map[string][]string // message id -> events emitted
}

var deviceRouting = sb.Routing{OfflineAfter: 2 * time.Minute, ClockGrace: 30 * time.Second, OutcomeAfter: time.Hour}

func newDeviceFixture(t *testing.T, url string) *deviceFixture {
	return newDeviceFixtureOptions(t, url, Options{})
}

// newDeviceFixtureOptions is newDeviceFixture with the pool's options.
func newDeviceFixtureOptions(t *testing.T, url string, opt Options) *deviceFixture {
	db := openTestDBOptions(t, url, opt)
	db.SetRouting(deviceRouting)
	f := &deviceFixture{t: t, db: db, tenant: newTestTenant(t, db, "scale"), events: map[string][]string{}}
	db.SetObserver(func(m *sb.Message, event string) {
		f.mu.Lock()
		f.events[m.ID] = append(f.events[m.ID], event)
		f.mu.Unlock()
	})
	return f
}

// phone adds an android phone and pairs a device with it at paired.
func (f *deviceFixture) phone(number string, paired time.Time) (*sb.Phone, string) {
	f.t.Helper()
	p := &sb.Phone{ID: sb.NewID(), TenantID: f.tenant.ID, Number: number, Kind: sb.PhoneAndroid, Channels: []string{sb.ChannelSMS},
		Status: sb.PhoneOnline, CreatedAt: paired}
	pairing := &sb.Pairing{Code: sb.NewID()[18:26], ExpiresAt: paired.Add(sb.PairingTTL)}
	if err := f.db.AddPhone(bg, p, pairing); err != nil {
		f.t.Fatal(err)
	}
	dev := &sb.Device{ID: sb.NewID(), Name: "test", PairedAt: paired}
	if _, err := f.db.PairDevice(bg, pairing.Code, dev, sb.DeviceCredentials{Token: sb.NewID(), InboundSecret: sb.NewID()}, paired); err != nil {
		f.t.Fatal(err)
	}
	return p, dev.ID
}

// seen records that the phone's device was seen at at.
func (f *deviceFixture) seen(p *sb.Phone, dev string, at time.Time) {
	f.t.Helper()
	if ok, err := f.db.TouchDevice(bg, p.ID, dev, at); err != nil || !ok {
		f.t.Fatalf("TouchDevice: %v %v", ok, err)
	}
}

// send accepts a live message created at at.
func (f *deviceFixture) send(at time.Time) string {
	f.t.Helper()
	m := &sb.Message{ID: sb.NewID(), TenantID: f.tenant.ID, Env: sb.Live, Direction: sb.Outbound, To: "+15005550" + sb.NewID()[20:23],
		Body: "x", Channel: sb.ChannelSMS, Status: sb.StatusQueued, CreatedAt: at}
	if err := f.db.AcceptSend(bg, &sb.Send{Message: m}); err != nil {
		f.t.Fatal(err)
	}
	return m.ID
}

// sendFrom accepts a live message created at at whose sender named the
// phone numbered from.
func (f *deviceFixture) sendFrom(from string, at time.Time) string {
	f.t.Helper()
	m := &sb.Message{ID: sb.NewID(), TenantID: f.tenant.ID, Env: sb.Live, Direction: sb.Outbound, To: "+15005550" + sb.NewID()[20:23],
		Body: "x", Channel: sb.ChannelSMS, Status: sb.StatusQueued, CreatedAt: at}
	if err := f.db.AcceptSend(bg, &sb.Send{Message: m, From: from}); err != nil {
		f.t.Fatal(err)
	}
	return m.ID
}

// take is the device's GET /message at at; it returns the ids handed and
// each one's validUntil.
func (f *deviceFixture) take(p *sb.Phone, dev string, at time.Time) (ids []string, valid map[string]time.Time, fresh int) {
	f.t.Helper()
	msgs, fresh, _, err := f.db.TakeDeviceMessages(bg, p.ID, dev, false, at, 10*time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	valid = map[string]time.Time{}
	for _, m := range msgs {
		ids = append(ids, m.ID)
		valid[m.ID] = *m.ValidUntil
	}
	return ids, valid, fresh
}

func (f *deviceFixture) sweep(at time.Time) sb.DeviceSweep {
	f.t.Helper()
	sw, err := f.db.SweepDeviceMessages(bg, at, 500)
	if err != nil {
		f.t.Fatal(err)
	}
	return sw
}

func (f *deviceFixture) report(p *sb.Phone, dev string, at time.Time, reps ...sb.DeviceReport) {
	f.t.Helper()
	if err := f.db.ReportDeviceStates(bg, p.ID, dev, reps, at); err != nil {
		f.t.Fatal(err)
	}
}

func (f *deviceFixture) message(id string) *sb.Message {
	f.t.Helper()
	m, err := f.db.Message(bg, f.tenant.ID, sb.Live, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func (f *deviceFixture) emitted(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.events[id], ",")
}

// TestDeviceHeldNeverMoves: a message handed to a device stays with it,
// however long the device is silent and whichever other phone is online;
// the device is handed it again, with its first validUntil, until it
// reports; it fails as outcome unknown at exactly validUntil + ClockGrace +
// OutcomeAfter, with message.failed, and not a microsecond before.
func TestDeviceHeldNeverMoves(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551240001", t0)
		b, devB := f.phone("+15551240002", t0.Add(-time.Hour)) // offline: only a takes the message
		id := f.send(t0)
		if ids, valid, fresh := f.take(a, devA, t0); len(ids) != 1 || ids[0] != id || fresh != 1 || !valid[id].Equal(t0.Add(10*time.Minute)) {
			t.Fatalf("first take: %v %v %d", ids, valid, fresh)
		}
		validUntil := t0.Add(10 * time.Minute)
		deadline := validUntil.Add(30*time.Second + time.Hour)
		if got := f.db.routing.OutcomeUnknownAt(validUntil); !got.Equal(deadline) {
			t.Fatalf("OutcomeUnknownAt %v, want %v", got, deadline)
		}
		// Past validUntil, past the grace, with b online and a silent: the
		// message stays with a's device.
		for _, at := range []time.Time{validUntil, validUntil.Add(30 * time.Second), validUntil.Add(31 * time.Second),
			validUntil.Add(10 * time.Minute), deadline.Add(-time.Microsecond)} {
			f.seen(b, devB, at)
			if sw := f.sweep(at); sw != (sb.DeviceSweep{}) {
				t.Fatalf("sweep at validUntil%+v: %+v, want nothing", at.Sub(validUntil), sw)
			}
			if ids, _, _ := f.take(b, devB, at); len(ids) != 0 {
				t.Fatalf("the other phone was handed %v at validUntil%+v", ids, at.Sub(validUntil))
			}
			if m := f.message(id); m.Status != sb.StatusQueued || m.PhoneID != a.ID {
				t.Fatalf("at validUntil%+v: %s on %s", at.Sub(validUntil), m.Status, m.PhoneID)
			}
		}
		// Heard from again, a's device is handed it once more, with its
		// first validUntil, and nothing is counted as handed anew.
		ids, valid, fresh := f.take(a, devA, validUntil.Add(20*time.Minute))
		if len(ids) != 1 || ids[0] != id || fresh != 0 || !valid[id].Equal(validUntil) {
			t.Fatalf("take after validUntil: %v %v fresh %d; want %s with validUntil %v", ids, valid, fresh, id, validUntil)
		}
		if ok, err := f.db.DeviceWorkWaiting(bg, a.ID, devA, validUntil.Add(time.Millisecond)); err != nil || !ok {
			t.Errorf("DeviceWorkWaiting past validUntil: %v %v, want true (so that the device is told to report)", ok, err)
		}
		if ok, err := f.db.DeviceWorkWaiting(bg, a.ID, devA, validUntil.Add(-time.Millisecond)); err != nil || ok {
			t.Errorf("DeviceWorkWaiting before validUntil: %v %v, want false", ok, err)
		}
		if f.emitted(id) != "" {
			t.Fatalf("events before the deadline: %s", f.emitted(id))
		}
		// At the deadline: failed, outcome unknown, naming the phone.
		f.seen(b, devB, deadline)
		if sw := f.sweep(deadline); sw != (sb.DeviceSweep{Considered: 1, Unknown: 1}) {
			t.Fatalf("sweep at the deadline: %+v, want one failed", sw)
		}
		m := f.message(id)
		if m.Status != sb.StatusFailed || m.ErrorCode != string(sb.CodeDeliveryFailed) || m.PhoneID != a.ID || m.SentAt != nil ||
			m.FailedAt == nil || !m.FailedAt.Equal(deadline) ||
			m.FailureReason != sb.OutcomeUnknownReason(a.Number, a.ID, validUntil) {
			t.Fatalf("at the deadline: %+v", m)
		}
		if got := f.emitted(id); got != sb.EventFailed {
			t.Errorf("events: %q, want %s", got, sb.EventFailed)
		}
		if ids, _, _ := f.take(a, devA, deadline); len(ids) != 0 {
			t.Errorf("a failed message handed again: %v", ids)
		}
		// A late report changes nothing.
		f.report(a, devA, deadline.Add(time.Minute), sb.DeviceReport{MessageID: id, State: sb.DeviceSent, At: validUntil})
		if m := f.message(id); m.Status != sb.StatusFailed {
			t.Errorf("after a late Sent: %s", m.Status)
		}
	})
}

// TestDeviceWaitingMoves: a message no device took moves to another phone
// as soon as its own is offline (not seen for OfflineAfter), not a
// microsecond before.
func TestDeviceWaitingMoves(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551250001", t0)
		b, devB := f.phone("+15551250002", t0.Add(-time.Hour))
		id := f.send(t0)
		if m := f.message(id); m.PhoneID != a.ID {
			t.Fatalf("sent from %s, want a", m.PhoneID)
		}
		offline := t0.Add(2 * time.Minute) // a was last seen at t0
		f.seen(b, devB, offline.Add(-time.Microsecond))
		if sw := f.sweep(offline.Add(-time.Microsecond)); sw.Moved != 0 {
			t.Fatalf("moved while a is online: %+v", sw)
		}
		f.seen(b, devB, offline)
		if sw := f.sweep(offline); sw != (sb.DeviceSweep{Considered: 1, Moved: 1}) {
			t.Fatalf("sweep once a is offline: %+v, want one moved", sw)
		}
		m := f.message(id)
		if m.PhoneID != b.ID || m.From != b.Number || m.Status != sb.StatusQueued {
			t.Fatalf("after the move: %+v", m)
		}
		if ids, _, _ := f.take(a, devA, offline); len(ids) != 0 {
			t.Errorf("a still handed %v", ids)
		}
		if ids, _, fresh := f.take(b, devB, offline); len(ids) != 1 || ids[0] != id || fresh != 1 {
			t.Errorf("b's take: %v %d", ids, fresh)
		}
	})
}

// TestDevicePinnedPhoneDeleted: a message whose sender named its phone
// (from) never moves to another number: it waits for its phone while that
// is offline, with another phone online; when the phone is deleted, it
// fails at once, naming the phone, with message.failed, while one the
// phone's device took waits for its outcome. A message left waiting for a
// phone already deleted (by an earlier version, which let it wait) fails
// at the sweeper's next pass.
func TestDevicePinnedPhoneDeleted(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551260001", t0)
		b, devB := f.phone("+15551260002", t0)
		held := f.sendFrom(a.Number, t0)
		if ids, _, _ := f.take(a, devA, t0); len(ids) != 1 || ids[0] != held {
			t.Fatalf("a's take: %v, want %s", ids, held)
		}
		waiting := f.sendFrom(a.Number, t0.Add(time.Second))
		// a offline, b online: the message waits for a.
		for _, at := range []time.Time{t0.Add(3 * time.Minute), t0.Add(time.Hour)} {
			f.seen(b, devB, at)
			if sw := f.sweep(at); sw.Moved != 0 || sw.SenderDeleted != 0 {
				t.Fatalf("sweep at %v with a offline: %+v, want nothing moved or failed", at.Sub(t0), sw)
			}
			if ids, _, _ := f.take(b, devB, at); len(ids) != 0 {
				t.Fatalf("b was handed %v", ids)
			}
			if m := f.message(waiting); m.Status != sb.StatusQueued || m.PhoneID != a.ID || f.emitted(waiting) != "" {
				t.Fatalf("at %v: %s on %s, events %q", at.Sub(t0), m.Status, m.PhoneID, f.emitted(waiting))
			}
		}
		deleted := t0.Add(2 * time.Hour)
		if err := f.db.DeletePhone(bg, f.tenant.ID, a.ID, deleted); err != nil {
			t.Fatal(err)
		}
		m := f.message(waiting)
		if m.Status != sb.StatusFailed || m.ErrorCode != string(sb.CodeDeliveryFailed) || m.FailedAt == nil || !m.FailedAt.Equal(deleted) ||
			m.FailureReason != sb.SenderDeletedReason(a.Number, a.ID) || m.From != a.Number {
			t.Fatalf("after its phone was deleted: %+v", m)
		}
		if got := f.emitted(waiting); got != sb.EventFailed {
			t.Errorf("events: %q, want %s", got, sb.EventFailed)
		}
		if m := f.message(held); m.Status != sb.StatusQueued || f.emitted(held) != "" {
			t.Errorf("the message a's device took, after a was deleted: %s, events %q; want queued until its outcome", m.Status, f.emitted(held))
		}
		f.seen(b, devB, deleted)
		if sw := f.sweep(deleted); sw.SenderDeleted != 0 || sw.Moved != 0 {
			t.Errorf("sweep after the delete: %+v", sw)
		}
		if ids, _, _ := f.take(b, devB, deleted); len(ids) != 0 {
			t.Errorf("b was handed %v after a was deleted", ids)
		}

		// A message whose sender named no phone does not fail with its
		// phone: it waits for another (b is offline now).
		t3 := deleted.Add(3 * time.Minute)
		c, _ := f.phone("+15551260003", t3)
		free, pinned := f.send(t3), f.sendFrom(c.Number, t3)
		if m := f.message(free); m.PhoneID != c.ID {
			t.Fatalf("sent from %s, want c", m.PhoneID)
		}
		if err := f.db.DeletePhone(bg, f.tenant.ID, c.ID, t3); err != nil {
			t.Fatal(err)
		}
		if m := f.message(pinned); m.Status != sb.StatusFailed {
			t.Errorf("a message that named c, after c was deleted: %s", m.Status)
		}
		if m := f.message(free); m.Status != sb.StatusQueued || f.emitted(free) != "" {
			t.Errorf("a message that named no phone, after its phone was deleted: %s, events %q; want queued", m.Status, f.emitted(free))
		}

		// Left waiting by an earlier version, which let such a message
		// wait when its phone was deleted.
		d, _ := f.phone("+15551260004", t3)
		left := f.send(t3)
		if err := f.db.DeletePhone(bg, f.tenant.ID, d.ID, t3); err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.exec(bg, `UPDATE messages SET from_pinned = 1 WHERE id = ?`, left); err != nil {
			t.Fatal(err)
		}
		if sw := f.sweep(t3.Add(time.Second)); sw != (sb.DeviceSweep{Considered: 2, SenderDeleted: 1}) {
			t.Fatalf("sweep of a message whose named phone is gone, and of one waiting for any phone: %+v, want one failed", sw)
		}
		if m := f.message(left); m.Status != sb.StatusFailed || m.FailureReason != sb.SenderDeletedReason(d.Number, d.ID) {
			t.Fatalf("a message whose named phone is gone, after the sweep: %s %q", m.Status, m.FailureReason)
		}
		if m := f.message(free); m.Status != sb.StatusQueued {
			t.Errorf("a message that named no phone, with no phone online: %s", m.Status)
		}
		if got := f.emitted(left); got != sb.EventFailed {
			t.Errorf("events: %q, want %s", got, sb.EventFailed)
		}
	})
}

// TestDeviceReports: Processed makes a message sent, and then it never
// moves or fails for want of a report; only Failed "TTL expired" before
// Processed moves it.
func TestDeviceReports(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551260001", t0)
		b, devB := f.phone("+15551260002", t0.Add(-time.Hour))
		processed, dropped, expired, late := f.send(t0), f.send(t0), f.send(t0), f.send(t0)
		if ids, _, _ := f.take(a, devA, t0); len(ids) != 4 {
			t.Fatalf("take: %v", ids)
		}
		at := t0.Add(time.Second)
		f.report(a, devA, at.Add(time.Second),
			sb.DeviceReport{MessageID: processed, State: sb.DeviceProcessed, At: at},
			// Failed "TTL expired" while b is offline: nowhere to go.
			sb.DeviceReport{MessageID: dropped, State: sb.DeviceFailed, Error: sb.DeviceTTLExpired, At: at},
			// Processed, then (a contradiction) TTL expired: it may have gone.
			sb.DeviceReport{MessageID: late, State: sb.DeviceProcessed, At: at})
		f.report(a, devA, at.Add(2*time.Second), sb.DeviceReport{MessageID: late, State: sb.DeviceFailed, Error: sb.DeviceTTLExpired, At: at})
		if m := f.message(processed); m.Status != sb.StatusSent || m.SentAt == nil || !m.SentAt.Equal(at) {
			t.Errorf("Processed: %s sent at %v, want sent at %v", m.Status, m.SentAt, at)
		}
		if m := f.message(dropped); m.Status != sb.StatusFailed || !strings.HasPrefix(m.FailureReason, "TTL expired") || m.SentAt != nil {
			t.Errorf("TTL expired with no other phone: %+v", m)
		}
		if m := f.message(late); m.Status != sb.StatusFailed || m.FailureReason != sb.DeviceTTLExpired || m.PhoneID != a.ID {
			t.Errorf("TTL expired after Processed: %+v, want failed on its phone", m)
		}
		// With b online, TTL expired moves the message to b.
		f.seen(b, devB, at.Add(3*time.Second))
		f.report(a, devA, at.Add(3*time.Second), sb.DeviceReport{MessageID: expired, State: sb.DeviceFailed, Error: sb.DeviceTTLExpired, At: at})
		if m := f.message(expired); m.Status != sb.StatusQueued || m.PhoneID != b.ID {
			t.Errorf("TTL expired with b online: %s on %s, want queued on b", m.Status, m.PhoneID)
		}
		if ids, _, _ := f.take(b, devB, at.Add(3*time.Second)); len(ids) != 1 || ids[0] != expired {
			t.Errorf("b's take: %v", ids)
		}
		// The Processed message is out of the device queue: no sweep, at
		// any time, touches it, and its late reports still land.
		for _, when := range []time.Time{t0.Add(10 * time.Minute), t0.Add(2 * time.Hour)} {
			f.seen(b, devB, when)
			f.sweep(when)
			if m := f.message(processed); m.Status != sb.StatusSent || m.PhoneID != a.ID {
				t.Fatalf("Processed message at t0%+v: %s on %s", when.Sub(t0), m.Status, m.PhoneID)
			}
		}
		f.report(a, devA, t0.Add(3*time.Hour), sb.DeviceReport{MessageID: processed, State: sb.DeviceSent, At: at.Add(time.Second), SentAt: at})
		f.report(a, devA, t0.Add(3*time.Hour), sb.DeviceReport{MessageID: processed, State: sb.DeviceDelivered, At: at.Add(2 * time.Second), SentAt: at})
		if m := f.message(processed); m.Status != sb.StatusDelivered || !m.SentAt.Equal(at) || !m.DeliveredAt.Equal(at.Add(2*time.Second)) {
			t.Errorf("late Sent and Delivered: %s sent %v delivered %v", m.Status, m.SentAt, m.DeliveredAt)
		}
	})
}

// TestDeviceUpdate: what a device says of itself: its name (empty keeps
// it) and whether its app has a push token.
func TestDeviceUpdate(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		p, dev := f.phone("+15551270001", time.Now().UTC())
		device := func() *sb.Device {
			t.Helper()
			ph, err := f.db.Phone(bg, f.tenant.ID, sb.Live, p.ID)
			if err != nil || ph.Device == nil {
				t.Fatalf("Phone: %+v %v", ph, err)
			}
			return ph.Device
		}
		if d := device(); d.Name != "test" || d.PushToken {
			t.Fatalf("paired: %+v", d)
		}
		for _, step := range []struct {
			name string
			push bool
			want string
		}{{"", true, "test"}, {"Pixel 8", true, "Pixel 8"}, {"", false, "Pixel 8"}} {
			if err := f.db.UpdateDevice(bg, p.ID, dev, step.name, step.push); err != nil {
				t.Fatal(err)
			}
			if d := device(); d.Name != step.want || d.PushToken != step.push {
				t.Errorf("UpdateDevice(%q, %v): %+v", step.name, step.push, d)
			}
		}
		// Another device of the phone (replaced) changes nothing.
		if err := f.db.UpdateDevice(bg, p.ID, "old-device", "Old", true); err != nil {
			t.Fatal(err)
		}
		if d := device(); d.Name != "Pixel 8" || d.PushToken {
			t.Errorf("after an update from a replaced device: %+v", d)
		}
	})
}
