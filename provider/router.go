// Package provider routes each message to what delivers it. A message goes
// out from one of its tenant's phones, and the phone's kind decides how:
//
//   - simulated phones, and every message of the test environment whatever
//     its phone, go to the built-in simulator (provider/simulator);
//   - android phones are real phones whose devices take their messages over
//     the device protocol (provider/android): the store queues those for the
//     device, and they never reach the Router;
//   - carrier kinds (smpp, twilio: provider/carrier) register a Provider
//     with Handle.
//
// The Router is also where the rules of the simulated chat channel and of
// quiet hours live, so that the HTTP layer, the store and the campaign
// runner know no provider by name.
package provider

import (
	"context"
	"fmt"
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/provider/simulator"
)

// PhoneKinds tells the kind of a phone by id. A phone's kind never changes,
// so the Router remembers the answers.
type PhoneKinds interface {
	PhoneKind(ctx context.Context, phoneID string) (string, error)
}

// Router implements sb.Provider for the delivery worker, and the channel
// and quiet-hours questions of a send.
type Router struct {
	sim   *simulator.Simulator
	kinds PhoneKinds

	mu       sync.Mutex
	byKind   map[string]sb.Provider
	kindOf   map[string]string // phone id -> kind
	outcomes chan sb.Outcome
	done     chan struct{}
}

// NewRouter returns a Router that sends simulated and test messages to sim
// and asks kinds for the kind of other phones.
func NewRouter(sim *simulator.Simulator, kinds PhoneKinds) *Router {
	r := &Router{sim: sim, kinds: kinds, byKind: map[string]sb.Provider{}, kindOf: map[string]string{},
		outcomes: make(chan sb.Outcome, 8192), done: make(chan struct{})}
	r.Handle(sb.PhoneSimulated, sim)
	return r
}

// Handle registers the provider of a phone kind; its outcomes join the
// Router's.
func (r *Router) Handle(kind string, p sb.Provider) {
	r.mu.Lock()
	r.byKind[kind] = p
	r.mu.Unlock()
	go func() {
		for {
			select {
			case o := <-p.Outcomes():
				select {
				case r.outcomes <- o:
				case <-r.done:
					return
				}
			case <-r.done:
				return
			}
		}
	}()
}

// Close stops forwarding outcomes.
func (r *Router) Close() { close(r.done) }

// Send hands m to the provider of its phone's kind.
func (r *Router) Send(ctx context.Context, m *sb.Message) error {
	if m.Env != sb.Live {
		return r.sim.Send(ctx, m)
	}
	kind, err := r.kind(ctx, m)
	if err != nil {
		return err
	}
	r.mu.Lock()
	p := r.byKind[kind]
	r.mu.Unlock()
	if p == nil {
		// An android phone's messages are taken by its device, never
		// handed over; anything else is a kind without a provider here.
		return fmt.Errorf("provider: no provider delivers messages of %s phones", kind)
	}
	return p.Send(ctx, m)
}

// RecordsHandoff implements sb.HandoffRecorder: a live message of a kind
// whose provider records its own hand-offs (a carrier link's) is not
// recorded by the delivery worker.
func (r *Router) RecordsHandoff(m *sb.Message) bool {
	if m.Env != sb.Live {
		return false
	}
	kind, err := r.kind(context.Background(), m)
	if err != nil {
		return false
	}
	r.mu.Lock()
	p := r.byKind[kind]
	r.mu.Unlock()
	rec, ok := p.(sb.HandoffRecorder)
	return ok && rec.RecordsHandoff(m)
}

func (r *Router) kind(ctx context.Context, m *sb.Message) (string, error) {
	if m.PhoneKind != "" {
		return m.PhoneKind, nil
	}
	if m.PhoneID == "" {
		return sb.PhoneSimulated, nil
	}
	r.mu.Lock()
	kind, ok := r.kindOf[m.PhoneID]
	r.mu.Unlock()
	if ok {
		return kind, nil
	}
	kind, err := r.kinds.PhoneKind(ctx, m.PhoneID)
	if sb.ErrorCode(err) == sb.CodeNotFound {
		// The phone was deleted after the message was queued: it is sent
		// as the phone was, which for every push kind today is simulated.
		return sb.PhoneSimulated, nil
	}
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.kindOf[m.PhoneID] = kind
	r.mu.Unlock()
	return kind, nil
}

// Outcomes delivers the outcomes of every provider.
func (r *Router) Outcomes() <-chan sb.Outcome { return r.outcomes }

// Detect returns the channel number can receive: chat or sms, or
// DETECTION_UNAVAILABLE. The chat channel is the simulator's.
func (r *Router) Detect(ctx context.Context, tenantID string, env sb.Environment, number string) (string, error) {
	return r.sim.Detect(ctx, tenantID, env, number)
}

// ChatAvailable returns nil, or CHANNEL_UNAVAILABLE while the chat engine
// is down for the tenant's environment.
func (r *Router) ChatAvailable(ctx context.Context, tenantID string, env sb.Environment) error {
	return r.sim.ChatAvailable(ctx, tenantID, env)
}

// SetChatDown switches the simulated chat engine of a tenant's environment.
func (r *Router) SetChatDown(tenantID string, env sb.Environment, down bool) {
	r.sim.SetChatDown(tenantID, env, down)
}

// QuietUntil reports whether number is in quiet hours at now (21:00 to
// 08:00 where it is) and when they end. The simulator's magic numbers are
// never in quiet hours.
func (r *Router) QuietUntil(number string, now time.Time) (time.Time, bool) {
	if simulator.IsMagic(number) {
		return time.Time{}, false
	}
	return phonenum.QuietUntil(number, now)
}
