package provider

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/chat"
)

type fbStore struct {
	claim   *sb.ChatFallbackClaim
	revoked int
	// revokeFails is how many ChatRevoked calls fail before one succeeds.
	revokeFails int
	fellBack    []string // reasons
}

func (s *fbStore) DueChatFallbacks(context.Context, time.Time, int) ([]string, error) {
	return nil, nil
}
func (s *fbStore) ClaimChatFallback(context.Context, string, time.Time, time.Duration) (*sb.ChatFallbackClaim, error) {
	return s.claim, nil
}
func (s *fbStore) ChatRevoked(context.Context, string, time.Time) error {
	if s.revokeFails > 0 {
		s.revokeFails--
		return errors.New("database unavailable")
	}
	s.revoked++
	return nil
}
func (s *fbStore) ChatFallback(_ context.Context, _, reason string, _ time.Time) (bool, error) {
	s.fellBack = append(s.fellBack, reason)
	return true, nil
}

type fbRevoker struct {
	result chat.RevokeResult
	calls  int
}

func (r *fbRevoker) Revoke(context.Context, string, string) chat.RevokeResult {
	r.calls++
	return r.result
}

// The fallback's rules, engine by engine: a revoke first for an engine
// that revokes and a message it accepted; SMS only after "revoked" (which
// is recorded, so it is not revoked again); never after "delivered" or a
// failure; no revoke for a message revoked already, a queued one, or an
// engine that cannot (iMessage).
func TestFallbacksOne(t *testing.T) {
	cases := []struct {
		name     string
		claim    sb.ChatFallbackClaim
		result   chat.RevokeResult
		revoker  bool
		calls    int
		recorded int
		reason   string // "" = no SMS
	}{
		{"revoked", sb.ChatFallbackClaim{Link: "rcs", Status: sb.StatusSent}, chat.Revoked, true, 1, 1, RevokedReason},
		{"delivered", sb.ChatFallbackClaim{Link: "rcs", Status: sb.StatusSent}, chat.RevokeDelivered, true, 1, 0, ""},
		{"failed", sb.ChatFallbackClaim{Link: "rcs", Status: sb.StatusSent}, chat.RevokeFailed, true, 1, 0, ""},
		{"revoked already", sb.ChatFallbackClaim{Link: "rcs", Status: sb.StatusSent, Revoked: true}, chat.RevokeFailed, true, 0, 0, RevokedReason},
		{"queued", sb.ChatFallbackClaim{Link: "rcs", Status: sb.StatusQueued}, chat.RevokeFailed, true, 0, 0, FallbackReason},
		{"no revoke", sb.ChatFallbackClaim{Link: "bb", Status: sb.StatusSent}, chat.RevokeFailed, false, 0, 0, FallbackReason},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &fbStore{claim: &c.claim}
			rv := &fbRevoker{result: c.result}
			f := &Fallbacks{Store: st, Revokers: map[string]Revoker{"rcs": rv}, Log: slog.Default()}
			if !c.revoker {
				f.Revokers = nil
			}
			moved, err := f.One(context.Background(), "m1", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if rv.calls != c.calls || st.revoked != c.recorded {
				t.Errorf("revokes %d (recorded %d), want %d (%d)", rv.calls, st.revoked, c.calls, c.recorded)
			}
			want := []string{}
			if c.reason != "" {
				want = append(want, c.reason)
			}
			if moved != (c.reason != "") || len(st.fellBack) != len(want) || (len(want) == 1 && st.fellBack[0] != want[0]) {
				t.Errorf("moved %v, fallbacks %q, want %q", moved, st.fellBack, want)
			}
		})
	}
	// Not claimed (another node has it, or it is final): nothing.
	st := &fbStore{}
	rv := &fbRevoker{result: chat.Revoked}
	f := &Fallbacks{Store: st, Revokers: map[string]Revoker{"rcs": rv}, Log: slog.Default()}
	if moved, _ := f.One(context.Background(), "m1", time.Now()); moved || rv.calls != 0 || len(st.fellBack) != 0 {
		t.Errorf("an unclaimed message: moved %v, revokes %d", moved, rv.calls)
	}
}

// TestFallbacksRevokedRecordRetried: Google's "revoked" cannot be heard
// again (a second revoke answers 404, read as delivered), so a failure to
// record it is tried again rather than leaving the message to a revoke
// that would take it for delivered: the message goes by SMS.
func TestFallbacksRevokedRecordRetried(t *testing.T) {
	st := &fbStore{claim: &sb.ChatFallbackClaim{Link: "rcs", Status: sb.StatusSent}, revokeFails: 2}
	rv := &fbRevoker{result: chat.Revoked}
	f := &Fallbacks{Store: st, Revokers: map[string]Revoker{"rcs": rv}, Log: slog.New(slog.DiscardHandler)}
	moved, err := f.One(context.Background(), "m1", time.Now())
	if err != nil || !moved || rv.calls != 1 || st.revoked != 1 || len(st.fellBack) != 1 || st.fellBack[0] != RevokedReason {
		t.Errorf("moved %v (%v), revokes %d, recorded %d, fallbacks %q; want one revoke recorded and the SMS",
			moved, err, rv.calls, st.revoked, st.fellBack)
	}
}
