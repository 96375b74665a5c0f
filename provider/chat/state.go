package chat

import (
	"context"
	"log/slog"
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
)

// Cache keeps an engine's detection answers per number: chat for ChatFor,
// sms for SMSFor, so that repeat recipients (a campaign's) cost no request.
type Cache struct {
	chatFor, smsFor time.Duration
	now             func() time.Time

	mu sync.Mutex
	m  map[string]cached
}

type cached struct {
	channel string
	until   time.Time
}

// NewCache returns the cache of opt (defaults set).
func NewCache(opt Options) *Cache {
	return &Cache{chatFor: opt.ChatFor, smsFor: opt.SMSFor, now: opt.Now, m: map[string]cached{}}
}

// Get returns the channel kept for number, if it has not expired.
func (c *Cache) Get(number string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[number]
	if !ok || !c.now().Before(e.until) {
		return "", false
	}
	return e.channel, true
}

// Keep keeps channel as number's answer.
func (c *Cache) Keep(number, channel string) {
	ttl := c.smsFor
	if channel == sb.ChannelChat {
		ttl = c.chatFor
	}
	c.mu.Lock()
	c.m[number] = cached{channel: channel, until: c.now().Add(ttl)}
	c.mu.Unlock()
}

// Forget drops what the cache holds for number (a send found it no longer
// reachable by chat).
func (c *Cache) Forget(number string) {
	c.mu.Lock()
	delete(c.m, number)
	c.mu.Unlock()
}

// Health is whether an engine answers: three failed requests in a row take
// it down, a request answered brings it back. Changes are logged and set on
// switchboard_chat_engine_up.
type Health struct {
	engine, link, what string
	metrics            *carrier.ChatMetrics
	log                *slog.Logger
	attrs              []any

	mu       sync.Mutex
	up       bool
	failures int
}

// NewHealth returns the health of an engine that starts up; what names it
// in the log ("RBM agent"), with attrs on those lines.
func NewHealth(l *Link, what string, attrs ...any) *Health {
	return &Health{engine: l.Engine, link: l.Name, what: what, metrics: l.Opt.Metrics, log: l.Log, attrs: attrs, up: true}
}

// Up reports whether the engine answers.
func (h *Health) Up() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up
}

// Report sets the metric to the current state.
func (h *Health) Report() { h.metrics.Up(h.engine, h.link, h.Up()) }

// Set says whether the engine answers, why not when it does not.
func (h *Health) Set(up bool, why string) {
	h.mu.Lock()
	changed := h.up != up
	h.up = up
	if up {
		h.failures = 0
	}
	h.mu.Unlock()
	if !changed {
		return
	}
	h.metrics.Up(h.engine, h.link, up)
	if up {
		h.log.Info(h.what+" reachable", h.attrs...)
	} else {
		h.log.Warn(h.what+" unreachable", append([]any{"reason", why}, h.attrs...)...)
	}
}

// Failed counts a request that got no usable answer; the third in a row
// takes the engine down.
func (h *Health) Failed(why string) {
	h.mu.Lock()
	h.failures++
	down := h.failures >= 3
	h.mu.Unlock()
	if down {
		h.Set(false, "three requests in a row failed: "+why)
	}
}

// OK counts a request answered: the failures in a row start again, and a
// down engine is up.
func (h *Health) OK() {
	h.mu.Lock()
	h.failures = 0
	was := h.up
	h.mu.Unlock()
	if !was {
		h.Set(true, "")
	}
}

// Flights are an engine's sends in flight, each in a goroutine of its own:
// a message held already is not taken twice, at most window run at once,
// and Wait waits for them all.
type Flights struct {
	mu   sync.Mutex
	held map[string]bool
	ctx  context.Context
	sem  chan struct{}
	wg   sync.WaitGroup
}

// NewFlights returns Flights of window sends at once.
func NewFlights(window int) *Flights {
	return &Flights{held: map[string]bool{}, ctx: context.Background(), sem: make(chan struct{}, max(window, 1))}
}

// Bind makes ctx (the link's Run's) the context the sends started after
// it run in: they end with it.
func (f *Flights) Bind(ctx context.Context) {
	f.mu.Lock()
	f.ctx = ctx
	f.mu.Unlock()
}

// Holds reports whether the message id is in flight.
func (f *Flights) Holds(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[id]
}

// Go runs send with a copy of m in the background, once a place of the
// window is free, unless m is in flight already; m is held until send
// returns (or the context ends before it starts).
func (f *Flights) Go(m *sb.Message, send func(ctx context.Context, m *sb.Message)) {
	f.mu.Lock()
	if f.held[m.ID] {
		f.mu.Unlock()
		return
	}
	f.held[m.ID] = true
	ctx := f.ctx
	f.wg.Add(1)
	f.mu.Unlock()
	c := *m
	go func() {
		defer f.wg.Done()
		defer func() {
			f.mu.Lock()
			delete(f.held, c.ID)
			f.mu.Unlock()
		}()
		select {
		case f.sem <- struct{}{}:
		case <-ctx.Done():
			return // unrecorded: handed over again when its claim runs out
		}
		defer func() { <-f.sem }()
		send(ctx, &c)
	}()
}

// Wait waits for the sends in flight.
func (f *Flights) Wait() { f.wg.Wait() }
