package auth

import (
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Failed authentication costs: a well-formed key that does not exist is a
// database read, and a token a signature check. Two defences keep a flood of
// them cheap:
//
//   - misses: a key that was not found is remembered for missTTL to
//     2*missTTL, so repeating it reads nothing (a key's text is random, so a
//     key created meanwhile cannot be one that was looked up before);
//   - a throttle per client address (IPv6 addresses by their /64): a burst
//     of authFailureBurst failures, then one more every authFailureInterval.
//     Once an address has used its budget, a key this node has not seen
//     authenticate answers 429 RATE_LIMIT_EXCEEDED without a lookup, and so
//     does a token that fails its checks. Keys that have authenticated go on
//     working, so that clients behind one address with a misbehaving
//     neighbour are not locked out.
const (
	missTTL             = 5 * time.Second
	missCap             = 1 << 16 // misses per generation
	authFailureBurst    = 20
	authFailureInterval = 3 * time.Second
	// maxThrottled bounds the addresses tracked; beyond it new addresses
	// are not throttled (an attacker with that many addresses is beyond
	// what a per-address throttle can stop).
	maxThrottled = 1 << 17
)

// Throttled is the error of a request from a client address that has failed
// authentication too often. It unwraps to a RATE_LIMIT_EXCEEDED *sb.Error;
// RetryAfter is the Retry-After header, in seconds, at least 1.
type Throttled struct {
	RetryAfter int
	err        *sb.Error
}

func (t *Throttled) Error() string { return t.err.Error() }
func (t *Throttled) Unwrap() error { return t.err }

// missCache remembers key hashes that were not found, in two generations
// of at most missCap each: an entry lives from missTTL to 2*missTTL, less
// when a flood fills a generation sooner.
type missCache struct {
	mu        sync.Mutex
	cur, prev map[string]struct{}
	rotated   time.Time
}

// rotate starts a new generation when the current one is missTTL old or
// full, and drops both when even the current one is 2*missTTL old.
func (m *missCache) rotate(now time.Time) {
	switch age := now.Sub(m.rotated); {
	case m.cur == nil || age >= 2*missTTL:
		m.prev, m.cur, m.rotated = nil, make(map[string]struct{}), now
	case age >= missTTL || len(m.cur) >= missCap:
		m.prev, m.cur, m.rotated = m.cur, make(map[string]struct{}), now
	}
}

func (m *missCache) has(hash string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rotate(now)
	_, in := m.cur[hash]
	if !in {
		_, in = m.prev[hash]
	}
	return in
}

func (m *missCache) add(hash string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rotate(now)
	m.cur[hash] = struct{}{}
}

func (m *missCache) clear() {
	m.mu.Lock()
	m.cur, m.prev = nil, nil
	m.mu.Unlock()
}

func (m *missCache) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cur) + len(m.prev)
}

// FailureThrottle is GCRA over failed authentications, per client key (see
// clientip.Key): each failure moves the client's theoretical arrival time
// (tat) on by authFailureInterval, and a client whose tat is more than the
// burst ahead of now has no attempt left: a burst of 20 failures, then one
// every 3 seconds. The API's keys use one; the device protocol's tokens and
// inbound secrets another. The zero value is ready to use.
type FailureThrottle struct {
	mu        sync.Mutex
	tats      map[string]time.Time
	lastSweep time.Time
}

const throttleWindow = (authFailureBurst - 1) * authFailureInterval

// Wait returns how long client must wait before its next attempt, 0 when it
// may try now.
func (f *FailureThrottle) Wait(client string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ahead := f.tats[client].Sub(now); ahead > throttleWindow {
		return ahead - throttleWindow
	}
	return 0
}

// Fail records a failure of client.
func (f *FailureThrottle) Fail(client string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tats == nil {
		f.tats = make(map[string]time.Time)
	}
	if now.Sub(f.lastSweep) >= time.Minute || len(f.tats) >= maxThrottled {
		for c, tat := range f.tats {
			if !tat.After(now) {
				delete(f.tats, c)
			}
		}
		f.lastSweep = now
	}
	tat, known := f.tats[client]
	if !known && len(f.tats) >= maxThrottled {
		return
	}
	if tat.Before(now) {
		tat = now
	}
	tat = tat.Add(authFailureInterval)
	if limit := now.Add(throttleWindow + authFailureInterval); tat.After(limit) {
		tat = limit
	}
	f.tats[client] = tat
}

// throttled returns the error for a client that must wait, or nil.
func (a *Authenticator) throttled(client string) error {
	if client == "" {
		return nil
	}
	d := a.failures.Wait(client, a.now())
	if d <= 0 {
		return nil
	}
	secs := max(int((d+time.Second-1)/time.Second), 1)
	return &Throttled{RetryAfter: secs, err: sb.Errorf(sb.CodeRateLimitExceeded,
		"Too many failed authentication attempts from your address. Retry after %s.", sb.Seconds(secs))}
}

// failed records a failed authentication of client and returns err.
func (a *Authenticator) failed(client string, err error) error {
	if client != "" {
		a.failures.Fail(client, a.now())
	}
	return err
}
