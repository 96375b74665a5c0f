// Package simulator is the built-in Provider (contract section 6): it
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
	handed   map[string]bool // message ids handed over and not yet reported
	dups     int

	done chan struct{}
}

type chatKey struct {
	tenantID string
	env      sb.Environment
}

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
		handed:   map[string]bool{},
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

// Send implements sb.Provider. A message handed over twice is delivered
// once more in the simulation; Handoffs reports how often each id came.
func (s *Simulator) Send(ctx context.Context, m *sb.Message) error {
	out := sb.Outcome{MessageID: m.ID, Delivered: true}
	switch {
	case m.To == FailNumber:
		out = sb.Outcome{MessageID: m.ID, FailureReason: FailureReason}
	case m.To == SMSOnlyNumber && m.Channel == sb.ChannelChat:
		out = sb.Outcome{MessageID: m.ID, FailureReason: NoChatReason}
	}
	now := time.Now()
	s.mu.Lock()
	if s.handed[m.ID] {
		s.dups++
	}
	s.handed[m.ID] = true
	s.pending = append(s.pending, pending{due: now.Add(s.delay), out: out})
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

// Duplicates returns how many hand-offs repeated a message this simulator
// held and had not yet reported. (Repeats across a crash show in the
// message's attempts instead.)
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
		for _, p := range ready {
			delete(s.handed, p.out.MessageID)
		}
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
