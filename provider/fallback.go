package provider

import (
	"context"
	"log/slog"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/chat"
)

// FallbackStore is what RunChatFallbacks needs of the store.
type FallbackStore interface {
	DueChatFallbacks(ctx context.Context, now time.Time, limit int) ([]string, error)
	ClaimChatFallback(ctx context.Context, messageID string, now time.Time, lease time.Duration) (*sb.ChatFallbackClaim, error)
	ChatRevoked(ctx context.Context, messageID string, now time.Time) error
	ChatFallback(ctx context.Context, messageID, reason string, now time.Time) (bool, error)
}

// Revoker is a chat engine that can take back a message it has not
// delivered (RBM); iMessage (BlueBubbles) cannot, and its messages fall
// back without it.
type Revoker interface {
	Revoke(ctx context.Context, number, messageID string) chat.RevokeResult
}

// FallbackReason is the fallback reason of a chat message of channel auto
// that its chat engine did not deliver within its ttl.
const FallbackReason = "not delivered by chat within its ttl"

// RevokedReason is FallbackReason when the engine revoked the message
// before it went by SMS (the user never gets it by chat).
const RevokedReason = FallbackReason + "; the chat message was revoked"

// RevokeLease is how long a node holds the fallback of a message it
// claimed: a revoke that failed is tried again after it (by any node).
const RevokeLease = time.Minute

// Fallbacks sends again by SMS the chat messages of channel auto that their
// chat engine did not deliver within their ttl.
type Fallbacks struct {
	Store FallbackStore
	// Revokers are the engines that revoke, by link name.
	Revokers map[string]Revoker
	Log      *slog.Logger
	// Fell counts a message sent again by SMS (may be nil).
	Fell func()
}

// One handles the due message id at now: it claims its fallback (one node
// does, for RevokeLease); when the message's engine revokes and accepted
// the message, it revokes it first and sends it by SMS only if the revoke
// succeeded. Google's answer that it was delivered already leaves it
// delivered, with no SMS; a failed revoke leaves it to be tried again
// after the lease, with no SMS meanwhile. It reports whether the message
// went to SMS.
func (f *Fallbacks) One(ctx context.Context, id string, now time.Time) (bool, error) {
	c, err := f.Store.ClaimChatFallback(ctx, id, now, RevokeLease)
	if err != nil || c == nil {
		return false, err
	}
	reason := FallbackReason
	if rv := f.Revokers[c.Link]; rv != nil && c.Status == sb.StatusSent {
		if !c.Revoked {
			switch rv.Revoke(ctx, c.To, id) {
			case chat.Revoked:
				if err := f.recordRevoked(ctx, id, now); err != nil {
					return false, err
				}
			case chat.RevokeDelivered:
				return false, nil
			default:
				return false, nil // tried again after the lease
			}
		}
		reason = RevokedReason
	}
	moved, err := f.Store.ChatFallback(ctx, id, reason, now)
	if err == nil && moved {
		f.Log.Info("chat message sent again by SMS", "message_id", id, "reason", reason)
		if f.Fell != nil {
			f.Fell()
		}
	}
	return moved, err
}

// recordRevoked records that the engine revoked id, trying again for about
// five seconds: Google's answer cannot be heard again (a second revoke
// answers 404, which reads as delivered), so a message whose revoke is not
// recorded would be taken for delivered and never sent.
func (f *Fallbacks) recordRevoked(ctx context.Context, id string, now time.Time) error {
	for attempt := 0; ; attempt++ {
		err := f.Store.ChatRevoked(context.WithoutCancel(ctx), id, now)
		if err == nil || attempt >= 10 {
			return err
		}
		time.Sleep(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second))
	}
}

// Run handles the due messages every interval until ctx ends.
func (f *Fallbacks) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			now := time.Now().UTC()
			ids, err := f.Store.DueChatFallbacks(ctx, now, 100)
			if err != nil {
				if ctx.Err() == nil {
					f.Log.Warn("chat fallbacks: reading the due messages failed", "err", err)
				}
				break
			}
			for _, id := range ids {
				if _, err := f.One(ctx, id, now); err != nil && ctx.Err() == nil {
					f.Log.Warn("chat fallback failed", "message_id", id, "err", err)
				}
			}
			if len(ids) < 100 {
				break
			}
		}
	}
}
