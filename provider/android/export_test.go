package android

import "time"

// SetKeepAlive changes the time between the beats of s's event streams,
// for tests that need beats much shorter than a quarter of OfflineAfter.
func SetKeepAlive(s *Server, d time.Duration) { s.keepAlive = d }
