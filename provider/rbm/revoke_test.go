package rbm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/rbm"
	"github.com/switchboard/switchboard/provider/rbm/rbmtest"
)

// revokes returns switchboard_chat_revokes_total{engine=rbm, link=rcs, result}.
func revokes(t *testing.T, reg prometheus.Gatherer, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchboard_chat_revokes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["engine"] == carrier.TypeRBM && l["link"] == "rcs" && l["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// sentAuto accepts an auto message to `to` on the RBM phone and has the
// link send it: Google accepts it (status sent) and does not deliver it.
func sentAuto(t *testing.T, f *fixture, to string) *sb.Message {
	t.Helper()
	m := acceptAuto(t, f, to, true)
	if m.ChatFallbackAt == nil {
		t.Fatal("no fallback deadline")
	}
	if err := f.link.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return waitMessage(t, f, m.ID, func(m *sb.Message) bool { return m.Status == sb.StatusSent })
}

// The fallback of an RBM message not delivered within its ttl revokes it
// first: revoked (200) → it goes by SMS, once, its reason saying so;
// delivered already (404) → no SMS, the message delivered; a failed revoke
// (503) → no SMS now, the revoke tried again after the lease. A message
// Google never accepted, or whose engine cannot revoke, falls back as it
// did (no revoke).
func TestFallbackRevokes(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		f := setupOn(t, url)
		ctx := context.Background()
		fb := &provider.Fallbacks{Store: f.db, Revokers: map[string]provider.Revoker{"rcs": f.link}, Log: f.link.Log}
		later := time.Now().UTC().Add(sb.ChatFallbackAfter + time.Minute)

		t.Run("revoked", func(t *testing.T) {
			const to = "+15551110201"
			m := sentAuto(t, f, to)
			if moved, err := fb.One(ctx, m.ID, later); !moved || err != nil {
				t.Fatalf("fallback: %v %v", moved, err)
			}
			if !f.fake.Revoked(rbm.MessageUUID(m.ID)) {
				t.Error("the RCS message was not revoked")
			}
			got := waitMessage(t, f, m.ID, func(*sb.Message) bool { return true })
			if got.Channel != sb.ChannelSMS || got.Engine != sb.EngineSMPP || got.Status != sb.StatusQueued ||
				got.Fallback == nil || got.Fallback.Reason != provider.RevokedReason {
				t.Fatalf("after the fallback: %s %s %s %+v", got.Channel, got.Engine, got.Status, got.Fallback)
			}
			// Once: due again never, and a second pass neither revokes nor moves.
			for _, at := range []time.Time{later, later.Add(2 * provider.RevokeLease)} {
				if due, _ := f.db.DueChatFallbacks(ctx, at, 10); len(due) != 0 {
					t.Errorf("still due at %v: %v", at, due)
				}
				if moved, err := fb.One(ctx, m.ID, at); moved || err != nil {
					t.Errorf("a second fallback: %v %v", moved, err)
				}
			}
			if n := revokes(t, f.reg, "revoked"); n != 1 {
				t.Errorf("revoked: %v, want 1", n)
			}
		})

		t.Run("delivered", func(t *testing.T) {
			const to = "+15551110202"
			m := sentAuto(t, f, to)
			f.fake.Deliver(rbm.MessageUUID(m.ID)) // its DELIVERED event never came
			if moved, err := fb.One(ctx, m.ID, later); moved || err != nil {
				t.Fatalf("fallback: %v %v", moved, err)
			}
			got := waitMessage(t, f, m.ID, func(*sb.Message) bool { return true })
			if got.Status != sb.StatusDelivered || got.Channel != sb.ChannelChat || got.Engine != sb.EngineRBM || got.Fallback != nil {
				t.Fatalf("after the revoke: %s %s %s %+v", got.Status, got.Channel, got.Engine, got.Fallback)
			}
			// Its deadline goes at the next pass, as any delivered message's.
			before := f.fake.Requests("revoke")
			if moved, _ := fb.One(ctx, m.ID, later.Add(2*provider.RevokeLease)); moved {
				t.Error("a delivered message went by SMS")
			}
			if due, _ := f.db.DueChatFallbacks(ctx, later.Add(2*provider.RevokeLease), 10); len(due) != 0 {
				t.Errorf("still due: %v", due)
			}
			if f.fake.Requests("revoke") != before {
				t.Error("a delivered message was revoked again")
			}
			if n := revokes(t, f.reg, "delivered"); n != 1 {
				t.Errorf("delivered: %v, want 1", n)
			}
		})

		t.Run("failed", func(t *testing.T) {
			const to = "+15551110203"
			m := sentAuto(t, f, to)
			f.fake.Script(to, rbmtest.Down)
			if moved, err := fb.One(ctx, m.ID, later); moved || err != nil {
				t.Fatalf("fallback while Google is down: %v %v", moved, err)
			}
			got := waitMessage(t, f, m.ID, func(*sb.Message) bool { return true })
			if got.Status != sb.StatusSent || got.Channel != sb.ChannelChat || got.Fallback != nil {
				t.Fatalf("after the failed revoke: %s %s %+v", got.Status, got.Channel, got.Fallback)
			}
			if n := revokes(t, f.reg, "failed"); n != 1 {
				t.Errorf("failed: %v, want 1", n)
			}
			// Not due again until the lease ends; then tried again.
			if due, _ := f.db.DueChatFallbacks(ctx, later.Add(provider.RevokeLease-time.Microsecond), 10); len(due) != 0 {
				t.Errorf("due again within the lease: %v", due)
			}
			again := later.Add(provider.RevokeLease)
			if due, _ := f.db.DueChatFallbacks(ctx, again, 10); len(due) != 1 || due[0] != m.ID {
				t.Fatalf("not due again after the lease: %v", due)
			}
			f.fake.Script(to, rbmtest.Capable)
			if moved, err := fb.One(ctx, m.ID, again); !moved || err != nil {
				t.Fatalf("the retried fallback: %v %v", moved, err)
			}
			if !f.fake.Revoked(rbm.MessageUUID(m.ID)) {
				t.Error("not revoked on the retry")
			}
		})

		t.Run("once across nodes", func(t *testing.T) {
			const to = "+15551110204"
			m := sentAuto(t, f, to)
			before := f.fake.Requests("revoke")
			var wg sync.WaitGroup
			moves := make(chan bool, 6)
			for range 6 {
				wg.Go(func() {
					n := &provider.Fallbacks{Store: f.db, Revokers: map[string]provider.Revoker{"rcs": f.link}, Log: f.link.Log}
					moved, err := n.One(ctx, m.ID, later)
					if err != nil {
						t.Error(err)
					}
					moves <- moved
				})
			}
			wg.Wait()
			close(moves)
			n := 0
			for ok := range moves {
				if ok {
					n++
				}
			}
			if n != 1 || f.fake.Requests("revoke")-before != 1 {
				t.Errorf("%d moves and %d revokes, want 1 and 1", n, f.fake.Requests("revoke")-before)
			}
		})

		t.Run("not accepted or no revoke", func(t *testing.T) {
			before := f.fake.Requests("revoke")
			queued := acceptAuto(t, f, "+15551110205", true) // never handed to Google
			if moved, err := fb.One(ctx, queued.ID, later); !moved || err != nil {
				t.Fatalf("fallback of a queued message: %v %v", moved, err)
			}
			plain := &provider.Fallbacks{Store: f.db, Log: f.link.Log} // an engine without revoke (iMessage)
			m := sentAuto(t, f, "+15551110206")
			if moved, err := plain.One(ctx, m.ID, later); !moved || err != nil {
				t.Fatalf("fallback without a revoker: %v %v", moved, err)
			}
			if got := waitMessage(t, f, m.ID, func(*sb.Message) bool { return true }); got.Fallback == nil || got.Fallback.Reason != provider.FallbackReason {
				t.Errorf("reason: %+v", got.Fallback)
			}
			if f.fake.Requests("revoke") != before {
				t.Errorf("revoked %d messages", f.fake.Requests("revoke")-before)
			}
		})
	})
}
