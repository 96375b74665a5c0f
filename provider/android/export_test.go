package android

import (
	"context"
	"time"
)

// SetKeepAlive changes the time between the beats of s's event streams,
// for tests that need beats much shorter than a quarter of OfflineAfter.
func SetKeepAlive(s *Server, d time.Duration) { s.keepAlive = d }

// FlushHealth writes the confirmed healths waiting, as Run does every half
// ping interval.
func FlushHealth(s *Server) { s.writeConfirmed(context.Background()) }
