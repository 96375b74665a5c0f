package sqlstore

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// campaignChunk stores the next recipients (numbers) of the running
// campaign id as one chunk at now, the last when last, and returns their
// messages' ids.
func (f *deviceFixture) campaignChunk(id string, now time.Time, last bool, numbers ...string) []string {
	f.t.Helper()
	c, err := f.db.Campaign(bg, f.tenant.ID, sb.Live, id)
	if err != nil {
		f.t.Fatal(err)
	}
	ch := &sb.CampaignChunk{Campaign: c, Last: last, Now: now, NewContactLimit: 1000}
	var ids []string
	for _, n := range numbers {
		m := &sb.Message{ID: sb.NewID(), TenantID: f.tenant.ID, Env: sb.Live, Direction: sb.Outbound, To: n,
			Body: "sale", Channel: sb.ChannelSMS, Status: sb.StatusQueued, CampaignID: id, CreatedAt: now}
		ch.Recipients = append(ch.Recipients, sb.CampaignRecipient{Message: m})
		ids = append(ids, m.ID)
	}
	if res, err := f.db.StoreChunk(bg, ch); err != nil || res.Done != len(numbers) {
		f.t.Fatalf("StoreChunk: %+v %v", res, err)
	}
	return ids
}

// launchCampaign creates and launches a campaign to numbers.
func (f *deviceFixture) launchCampaign(now time.Time, numbers ...string) *sb.Campaign {
	f.t.Helper()
	c := &sb.Campaign{ID: sb.NewID(), TenantID: f.tenant.ID, Env: sb.Live, Name: "sale", Body: "sale", Channel: sb.ChannelSMS,
		Audience: sb.AudienceTo, Recipients: numbers, Status: sb.CampaignDraft, Total: len(numbers), CreatedAt: now}
	if err := f.db.CreateCampaign(bg, c, 100); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.LaunchCampaign(bg, f.tenant.ID, sb.Live, c.ID, now); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// cancelCampaign cancels the campaign and runs the runner's withdrawal
// until it is done; it returns how many messages were withdrawn.
func (f *deviceFixture) cancelCampaign(c *sb.Campaign, now time.Time) int {
	f.t.Helper()
	if _, err := f.db.CancelCampaign(bg, f.tenant.ID, sb.Live, c.ID, now); err != nil {
		f.t.Fatal(err)
	}
	total := 0
	for {
		n, err := f.db.WithdrawCampaign(bg, c, now, 2)
		if err != nil {
			f.t.Fatal(err)
		}
		total += n
		if n < 2 {
			return total
		}
	}
}

func (f *deviceFixture) sentToday(p *sb.Phone) int64 {
	f.t.Helper()
	ph, err := f.db.Phone(bg, f.tenant.ID, sb.Live, p.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return ph.SentToday
}

// TestCancelOnDevice: when a campaign is canceled, its messages a device
// holds and has not reported Processed are asked of the device
// (DeviceCancels, handed again as Cancelling); the device's Cancelled makes
// them canceled (failed, CAMPAIGN_CANCELED, message.failed, their count
// given back), and so does a TTL-expired proof that one was not sent,
// which would otherwise move it to another phone. A message the device
// reported Processed is not canceled: a Cancelled report on it changes
// nothing, and it is delivered. Messages never handed out are withdrawn
// as before; a direct send that the phone's app cancels unasked fails.
func TestCancelOnDevice(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551310001", t0)
		b, devB := f.phone("+15551310002", t0.Add(-time.Hour)) // offline until the TTL report
		c := f.launchCampaign(t0, "+15005550301", "+15005550302", "+15005550303", "+15005550304")
		held := f.campaignChunk(c.ID, t0, false, "+15005550301", "+15005550302", "+15005550303")
		direct := f.send(t0)
		t1 := t0.Add(time.Second)
		if ids, _, fresh := f.take(a, devA, t1); fresh != 4 || len(ids) != 4 {
			t.Fatalf("take: %v %d", ids, fresh)
		}
		waiting := f.campaignChunk(c.ID, t1, true, "+15005550304")[0] // never handed out
		pending, processed, silent := held[0], held[1], held[2]
		f.report(a, devA, t1, sb.DeviceReport{MessageID: pending, State: sb.DevicePending},
			sb.DeviceReport{MessageID: processed, State: sb.DeviceProcessed})
		if cs, err := f.db.DeviceCancels(bg, devA); err != nil || len(cs) != 0 {
			t.Fatalf("cancels before the cancel: %v %v", cs, err)
		}
		t2 := t1.Add(time.Second)
		if n := f.cancelCampaign(c, t2); n != 1 {
			t.Fatalf("withdrew %d, want the one never handed out", n)
		}
		if m := f.message(waiting); m.Status != sb.StatusFailed || m.ErrorCode != sb.ErrorCodeCampaignCanceled || m.FailureReason != sb.CanceledReason {
			t.Errorf("never handed out: %s %s %q", m.Status, m.ErrorCode, m.FailureReason)
		}
		want := []string{pending, silent}
		slices.Sort(want)
		if cs, err := f.db.DeviceCancels(bg, devA); err != nil || !slices.Equal(cs, want) {
			t.Fatalf("DeviceCancels = %v %v, want the held ones not Processed %v", cs, err, want)
		}
		if cs, _ := f.db.DeviceCancels(bg, devB); len(cs) != 0 {
			t.Errorf("another device is asked to cancel %v", cs)
		}
		if busy, err := f.db.DeviceWorkWaiting(bg, a.ID, devA, t2); err != nil || !busy {
			t.Errorf("DeviceWorkWaiting = %v %v: the device must pull to see the cancels", busy, err)
		}
		msgs, _, _, err := f.db.TakeDeviceMessages(bg, a.ID, devA, false, t2, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cancelling := map[string]bool{}
		for _, m := range msgs {
			cancelling[m.ID] = m.Cancelling
		}
		if len(msgs) != 3 || !cancelling[pending] || !cancelling[silent] || cancelling[direct] {
			t.Errorf("handed again: %v, want %s and %s Cancelling, %s not", cancelling, pending, silent, direct)
		}
		before := f.sentToday(a)

		// Confirmed: canceled, with its event, its count given back.
		t3 := t2.Add(time.Second)
		f.report(a, devA, t3, sb.DeviceReport{MessageID: pending, State: sb.DeviceCancelled, At: t3},
			sb.DeviceReport{MessageID: processed, State: sb.DeviceCancelled, At: t3})
		if m := f.message(pending); m.Status != sb.StatusFailed || m.ErrorCode != sb.ErrorCodeCampaignCanceled ||
			m.FailureReason != sb.CanceledOnPhoneReason || m.FailedAt == nil || !m.FailedAt.Equal(t3) || m.SentAt != nil {
			t.Errorf("confirmed: %s %s %q failed %v sent %v", m.Status, m.ErrorCode, m.FailureReason, m.FailedAt, m.SentAt)
		}
		if ev := f.emitted(pending); ev != sb.EventFailed {
			t.Errorf("events of the canceled message: %q", ev)
		}
		if got := f.sentToday(a); got != before-1 {
			t.Errorf("sent_today %d after the cancel, want %d: a canceled message gives its count back", got, before-1)
		}
		// Processed before the cancel: it went out, and stays sent.
		if m := f.message(processed); m.Status != sb.StatusSent || m.ErrorCode != "" {
			t.Errorf("processed, then Cancelled: %s %s", m.Status, m.ErrorCode)
		}
		f.report(a, devA, t3, sb.DeviceReport{MessageID: processed, State: sb.DeviceDelivered})
		if m := f.message(processed); m.Status != sb.StatusDelivered {
			t.Errorf("processed: %s, want delivered", m.Status)
		}

		// A proof that it was not sent does not move it: it is canceled.
		f.seen(b, devB, t3)
		f.report(a, devA, t3, sb.DeviceReport{MessageID: silent, State: sb.DeviceFailed, Error: sb.DeviceTTLExpired})
		if m := f.message(silent); m.Status != sb.StatusFailed || m.ErrorCode != sb.ErrorCodeCampaignCanceled || m.PhoneID != a.ID {
			t.Errorf("TTL expired after the cancel: %s %s on %s (a is %s)", m.Status, m.ErrorCode, m.PhoneID, a.ID)
		}
		if cs, _ := f.db.DeviceCancels(bg, devA); len(cs) != 0 {
			t.Errorf("cancels left: %v", cs)
		}
		if got, err := f.db.Campaign(bg, f.tenant.ID, sb.Live, c.ID); err != nil || got.Messages.Canceled != 3 || got.Messages.Delivered != 1 {
			t.Errorf("campaign counts %+v %v, want 3 canceled, 1 delivered", got.Messages, err)
		}

		// Unasked (the phone's owner canceled it in the app): failed, not
		// a campaign cancel, and not moved.
		f.report(a, devA, t3, sb.DeviceReport{MessageID: direct, State: sb.DeviceCancelled})
		if m := f.message(direct); m.Status != sb.StatusFailed || m.ErrorCode != string(sb.CodeDeliveryFailed) || m.FailureReason != sb.CanceledByPhoneReason {
			t.Errorf("canceled unasked: %s %s %q", m.Status, m.ErrorCode, m.FailureReason)
		}
	})
}

// TestCancelWithdrawsUnheldDeviceMessages: a canceled campaign's message
// that waits in the device queue after a device proved it unsent (not
// handed out again) is withdrawn, not left to be sent from another phone.
func TestCancelWithdrawsUnheldDeviceMessages(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		f := newDeviceFixture(t, url)
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551320001", t0)
		b, devB := f.phone("+15551320002", t0.Add(-time.Hour)) // offline until a has taken the message
		c := f.launchCampaign(t0, "+15005550311")
		id := f.campaignChunk(c.ID, t0, true, "+15005550311")[0]
		f.take(a, devA, t0)
		f.seen(b, devB, t0)
		f.report(a, devA, t0, sb.DeviceReport{MessageID: id, State: sb.DeviceFailed, Error: sb.DeviceTTLExpired})
		if m := f.message(id); m.Status != sb.StatusQueued || m.Attempts != 1 || m.PhoneID != b.ID {
			t.Fatalf("after TTL expired: %s, %d attempts, on %s", m.Status, m.Attempts, m.PhoneID)
		}
		if n := f.cancelCampaign(c, t0.Add(time.Second)); n != 1 {
			t.Fatalf("withdrew %d, want 1", n)
		}
		if m := f.message(id); m.Status != sb.StatusFailed || m.ErrorCode != sb.ErrorCodeCampaignCanceled {
			t.Errorf("%s %s", m.Status, m.ErrorCode)
		}
	})
}

// TestCancelHeldLogsOnItsNode: the line saying a canceled campaign's held
// messages are withdrawn from their phones goes to the store's own logger
// (Options.Log), not the process's default, which another server in the
// same process (the parallel end-to-end tests) may have set.
func TestCancelHeldLogsOnItsNode(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		var mu sync.Mutex
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return buf.Write(p)
		}), nil))
		f := newDeviceFixtureOptions(t, url, Options{Log: log})
		t0 := time.Now().UTC().Truncate(time.Millisecond)
		a, devA := f.phone("+15551320001", t0)
		c := f.launchCampaign(t0, "+15005550321")
		f.campaignChunk(c.ID, t0, true, "+15005550321")
		if ids, _, _ := f.take(a, devA, t0.Add(time.Second)); len(ids) != 1 {
			t.Fatalf("take: %v", ids)
		}
		f.cancelCampaign(c, t0.Add(2*time.Second))
		mu.Lock()
		got := buf.String()
		mu.Unlock()
		if !strings.Contains(got, "campaign canceled") || !strings.Contains(got, c.ID) {
			t.Errorf("the store's log: %q, want the withdrawal from the phones", got)
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
