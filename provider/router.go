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

	tenantPhones TenantPhones
	engines      map[string]ChatEngine
	chats        map[string]tenantChat
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

// ChatEngine is a chat engine as detection sees it (an RBM agent's link).
type ChatEngine interface {
	Detect(ctx context.Context, number string) (string, error)
	DetectMany(ctx context.Context, numbers []string) (map[string]string, error)
	Up() bool
}

// TenantPhones lists a tenant's phones.
type TenantPhones interface {
	Phones(ctx context.Context, tenantID string, env sb.Environment) ([]*sb.Phone, error)
}

// UseChatEngines makes live detection ask the tenants' chat engines:
// engines by link name, phones to learn which a tenant is bound to.
func (r *Router) UseChatEngines(phones TenantPhones, engines map[string]ChatEngine) {
	r.mu.Lock()
	r.tenantPhones, r.engines, r.chats = phones, engines, map[string]tenantChat{}
	r.mu.Unlock()
}

// tenantChat is what detection needs to know of a tenant's phones, kept
// for chatOfFor.
type tenantChat struct {
	real    bool     // a phone of a kind other than simulated
	engines []string // the links of its chat-engine phones
	until   time.Time
}

// chatOfFor is how long a tenant's tenantChat is kept: a phone bound or
// deleted changes detection within it.
const chatOfFor = 2 * time.Second

// chatOf returns what the tenant's phones say about live detection: nil
// when no chat engine is configured (the simulator's rules apply).
func (r *Router) chatOf(ctx context.Context, tenantID string) (*tenantChat, error) {
	r.mu.Lock()
	phones := r.tenantPhones
	tc, ok := r.chats[tenantID]
	r.mu.Unlock()
	if phones == nil {
		return nil, nil
	}
	now := time.Now()
	if ok && now.Before(tc.until) {
		return &tc, nil
	}
	ps, err := phones.Phones(ctx, tenantID, sb.Live)
	if err != nil {
		return nil, err
	}
	tc = tenantChat{until: now.Add(chatOfFor)}
	for _, p := range ps {
		if p.Kind != sb.PhoneSimulated {
			tc.real = true
		}
		if p.Link != "" && p.HasChannel(sb.ChannelChat) {
			tc.engines = append(tc.engines, p.Link)
		}
	}
	r.mu.Lock()
	r.chats[tenantID] = tc
	r.mu.Unlock()
	return &tc, nil
}

// engineFor returns the chat engine a live message of tenantID is detected
// with: sim true while the tenant has only simulated phones (the
// simulator's rules); else its first chat engine configured here, or nil
// when it has none (no chat: sms).
func (r *Router) engineFor(ctx context.Context, tenantID string, env sb.Environment) (eng ChatEngine, sim bool, err error) {
	if env != sb.Live {
		return nil, true, nil
	}
	tc, err := r.chatOf(ctx, tenantID)
	if err != nil || tc == nil || !tc.real {
		return nil, true, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range tc.engines {
		if e := r.engines[name]; e != nil {
			return e, false, nil
		}
	}
	return nil, false, nil
}

// Detect returns the channel number can receive: chat or sms, or
// DETECTION_UNAVAILABLE. Test traffic, and live traffic of a tenant with
// only simulated phones, follow the simulator's rules; a live tenant bound
// to a chat engine asks that engine (per recipient: chat where the engine
// reaches the number, else sms); one with real phones and no chat engine
// gets sms.
func (r *Router) Detect(ctx context.Context, tenantID string, env sb.Environment, number string) (string, error) {
	eng, sim, err := r.engineFor(ctx, tenantID, env)
	switch {
	case err != nil:
		return "", err
	case sim:
		return r.sim.Detect(ctx, tenantID, env, number)
	case eng == nil:
		return sb.ChannelSMS, nil
	}
	return eng.Detect(ctx, number)
}

// DetectMany implements campaign.BatchDetector: it asks the tenant's chat
// engine about numbers at once, so that Detect finds the answers cached.
func (r *Router) DetectMany(ctx context.Context, tenantID string, env sb.Environment, numbers []string) {
	if eng, _, err := r.engineFor(ctx, tenantID, env); err == nil && eng != nil && len(numbers) > 0 {
		eng.DetectMany(ctx, numbers)
	}
}

// ChatAvailable returns nil, or CHANNEL_UNAVAILABLE while the chat engine
// is down for the tenant's environment: the simulator's switch, or for a
// live tenant bound to a chat engine, the engine not answering.
func (r *Router) ChatAvailable(ctx context.Context, tenantID string, env sb.Environment) error {
	eng, sim, err := r.engineFor(ctx, tenantID, env)
	switch {
	case err != nil:
		return err
	case sim:
		return r.sim.ChatAvailable(ctx, tenantID, env)
	case eng != nil && !eng.Up():
		return sb.Errorf(sb.CodeChannelUnavailable, "The chat engine is not answering; send with channel \"sms\" or \"auto\", or retry.")
	}
	return nil
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
