package provider

import (
	"context"
	"log/slog"
	"time"
)

// FallbackStore is what RunChatFallbacks needs of the store.
type FallbackStore interface {
	DueChatFallbacks(ctx context.Context, now time.Time, limit int) ([]string, error)
	ChatFallback(ctx context.Context, messageID, reason string, now time.Time) (bool, error)
}

// FallbackReason is the fallback reason of a chat message of channel auto
// that its chat engine did not deliver within its ttl.
const FallbackReason = "not delivered by chat within its ttl"

// RunChatFallbacks sends again by SMS, every interval until ctx ends, the
// chat messages of channel auto that their chat engine has not delivered
// by their ttl (sb.ChatFallbackAfter), and counts them with fell (when not
// nil).
func RunChatFallbacks(ctx context.Context, store FallbackStore, interval time.Duration, log *slog.Logger, fell func()) {
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
			ids, err := store.DueChatFallbacks(ctx, now, 100)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("chat fallbacks: reading the due messages failed", "err", err)
				}
				break
			}
			for _, id := range ids {
				moved, err := store.ChatFallback(ctx, id, FallbackReason, now)
				switch {
				case err != nil:
					log.Warn("chat fallback failed", "message_id", id, "err", err)
				case moved:
					log.Info("chat message sent again by SMS", "message_id", id, "reason", FallbackReason)
					if fell != nil {
						fell()
					}
				}
			}
			if len(ids) < 100 {
				break
			}
		}
	}
}
