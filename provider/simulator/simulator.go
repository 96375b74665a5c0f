// Package simulator is the built-in Provider (docs/api.md): it
// delivers nothing to real phones, and decides each outcome from the
// recipient, like Twilio's test numbers.
//
//	+15005550001  delivery fails: "simulated carrier rejection"
//	+15005550003  `auto` channel detection is unavailable
//	+15005550004  not reachable on chat: `auto` resolves to sms
//	anything else delivered; `auto` resolves to chat
//
// Outcomes are reported within Delay (default 100 ms, always under 1 s) of
// the hand-off. The simulated chat engine can be taken down per tenant and
// environment with SetChatDown, which the API exposes as POST
// /v1/test/simulator: a test key's switch never changes what live traffic
// sees. A message sent over chat to a number that cannot receive chat
// (+15005550004) fails.
package simulator

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Magic numbers.
const (
	FailNumber        = "+15005550001"
	NoDetectionNumber = "+15005550003"
	SMSOnlyNumber     = "+15005550004"
	FailureReason     = "simulated carrier rejection"
)

// IsMagic reports whether number is one of the simulator's magic numbers,
// which are never in quiet hours.
func IsMagic(number string) bool {
	return len(number) == 12 && number[:11] == "+1500555000"
}

// Simulator is the built-in provider. It is safe for concurrent use.
type Simulator struct {
	delay    time.Duration
	outcomes chan sb.Outcome

	mu       sync.Mutex
	chatDown map[chatKey]bool // chat engine down
	pending  []pending        // ordered by due time (constant delay)
	wake     chan struct{}
	// accepted remembers the message ids handed over within DedupWindow
	// (at most DedupMax), oldest first in order, as a provider that
	// deduplicates by message id does. Both hold no pointers (see idKey).
	accepted map[idKey]acceptance
	order    []idKey
	dups     int

	done chan struct{}
}

type chatKey struct {
	tenantID string
	env      sb.Environment
}

// idKey is what the dedup memory keeps of a message id: a 128-bit hash
// (two 64-bit maphashes with distinct seeds), so that the map and the
// order of up to DedupMax entries hold no pointers and the garbage
// collector never scans them. With strings and whole outcomes in them they
// were most of a busy node's live heap, scanned at every collection (a
// tenth of the node's CPU in the send bench). Two ids share a key with
// probability about 2^-128 a pair: a false duplicate among DedupMax ids
// is less likely than a bit flipped in memory.
type idKey [2]uint64

var idSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func keyOf(id string) idKey {
	return idKey{maphash.String(idSeeds[0], id), maphash.String(idSeeds[1], id)}
}

// acceptance is when an id was accepted (Unix nanoseconds) and the
// outcome decided for it.
type acceptance struct {
	at      int64
	verdict verdict
}

// verdict is an outcome the simulator decides, without the message id.
type verdict uint8

const (
	delivered verdict = iota
	rejected          // FailNumber
	noChat            // chat to SMSOnlyNumber
)

// outcome is the verdict's outcome for message id.
func (v verdict) outcome(id string) sb.Outcome {
	switch v {
	case rejected:
		return sb.Outcome{MessageID: id, FailureReason: FailureReason}
	case noChat:
		return sb.Outcome{MessageID: id, FailureReason: NoChatReason}
	}
	return sb.Outcome{MessageID: id, Delivered: true}
}

// The simulator deduplicates like a provider with idempotent sends: a
// message id it accepted within DedupWindow (and among the last DedupMax)
// is a duplicate, sent to no one again; it is counted (Duplicates) and the
// first hand-off's outcome is reported once more, so the queue still learns
// the result. The window covers the delivery worker's outcome deadline (30
// s by default), after which a message is handed over again. The ids of
// one process only: a node that takes over a dead node's messages hands
// them to its own simulator, which never saw them (those show in the
// takeover counts, see docs/scale-out.md).
const (
	DedupWindow = 2 * time.Minute
	DedupMax    = 1 << 17
)

type pending struct {
	due time.Time
	out sb.Outcome
}

// New returns a simulator that reports outcomes delay after hand-off and
// starts its clock goroutine; Close stops it.
func New(delay time.Duration) *Simulator {
	if delay <= 0 || delay >= time.Second {
		delay = 100 * time.Millisecond
	}
	s := &Simulator{
		delay:    delay,
		outcomes: make(chan sb.Outcome, 8192),
		chatDown: map[chatKey]bool{},
		wake:     make(chan struct{}, 1),
		accepted: map[idKey]acceptance{},
		done:     make(chan struct{}),
	}
	go s.loop()
	return s
}

// Close stops the simulator. Outcomes not yet reported are dropped; the
// queue hands their messages over again after a restart.
func (s *Simulator) Close() { close(s.done) }

// NoChatReason is the failure_reason of a chat message to a number that
// cannot receive chat.
const NoChatReason = "simulated recipient cannot receive chat"

// Detect returns the channel (sb.ChannelChat or sb.ChannelSMS) number can
// receive in the tenant's environment, or DETECTION_UNAVAILABLE.
func (s *Simulator) Detect(ctx context.Context, tenantID string, env sb.Environment, number string) (string, error) {
	switch number {
	case NoDetectionNumber:
		return "", sb.Errorf(sb.CodeDetectionUnavailable, "Channel detection is temporarily unavailable. Retry, or send with channel \"sms\".")
	case SMSOnlyNumber:
		return sb.ChannelSMS, nil
	}
	if s.ChatAvailable(ctx, tenantID, env) != nil {
		return sb.ChannelSMS, nil
	}
	return sb.ChannelChat, nil
}

// ChatAvailable returns nil, or CHANNEL_UNAVAILABLE while the tenant's
// chat engine is down in env.
func (s *Simulator) ChatAvailable(ctx context.Context, tenantID string, env sb.Environment) error {
	s.mu.Lock()
	down := s.chatDown[chatKey{tenantID, env}]
	s.mu.Unlock()
	if down {
		return sb.Errorf(sb.CodeChannelUnavailable, "The chat channel engine is temporarily unavailable. Retry later or send with channel \"sms\".")
	}
	return nil
}

// SetChatDown takes the tenant's simulated chat engine in env down or
// brings it up.
func (s *Simulator) SetChatDown(tenantID string, env sb.Environment, down bool) {
	s.mu.Lock()
	if down {
		s.chatDown[chatKey{tenantID, env}] = true
	} else {
		delete(s.chatDown, chatKey{tenantID, env})
	}
	s.mu.Unlock()
}

// Send implements sb.Provider. A message id handed over again within
// DedupWindow is a duplicate: counted, not sent again, its first outcome
// reported again.
func (s *Simulator) Send(ctx context.Context, m *sb.Message) error {
	v := delivered
	switch {
	case m.To == FailNumber:
		v = rejected
	case m.To == SMSOnlyNumber && m.Channel == sb.ChannelChat:
		v = noChat
	}
	now := time.Now()
	k := keyOf(m.ID)
	s.mu.Lock()
	s.forget(now)
	if a, ok := s.accepted[k]; ok {
		s.dups++
		v = a.verdict
	} else {
		s.accepted[k] = acceptance{at: now.UnixNano(), verdict: v}
		s.order = append(s.order, k)
	}
	s.pending = append(s.pending, pending{due: now.Add(s.delay), out: v.outcome(m.ID)})
	first := len(s.pending) == 1
	s.mu.Unlock()
	if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// forget drops the ids accepted before the window, or beyond DedupMax.
func (s *Simulator) forget(now time.Time) {
	i := 0
	cutoff := now.Add(-DedupWindow).UnixNano()
	for i < len(s.order) && (len(s.order)-i > DedupMax || s.accepted[s.order[i]].at < cutoff) {
		delete(s.accepted, s.order[i])
		i++
	}
	if i > 0 {
		s.order = s.order[i:]
		if cap(s.order) > 2*DedupMax && len(s.order) < cap(s.order)/4 {
			s.order = append([]idKey(nil), s.order...)
		}
	}
}

// Duplicates returns how many hand-offs repeated a message id this
// simulator had accepted within DedupWindow. (Repeats across a crash, or
// on another node, show in the message's attempts and in the takeover
// counts instead.)
func (s *Simulator) Duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dups
}

// Outcomes implements sb.Provider.
func (s *Simulator) Outcomes() <-chan sb.Outcome { return s.outcomes }

func (s *Simulator) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		i := 0
		for i < len(s.pending) && !s.pending[i].due.After(now) {
			i++
		}
		ready := append([]pending(nil), s.pending[:i]...)
		s.pending = s.pending[i:]
		var next time.Duration = time.Hour
		if len(s.pending) > 0 {
			next = time.Until(s.pending[0].due)
		}
		s.mu.Unlock()
		for _, p := range ready {
			p.out.At = time.Now().UTC()
			select {
			case s.outcomes <- p.out:
			case <-s.done:
				return
			}
		}
		if len(ready) > 0 {
			continue
		}
		timer.Reset(next)
		select {
		case <-timer.C:
		case <-s.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-s.done:
			return
		}
	}
}
