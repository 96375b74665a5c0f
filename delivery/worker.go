// Package delivery moves accepted messages from the durable queue to the
// provider and records what becomes of them. It claims due messages in
// batches, hands each to the Provider with its id, and writes hand-offs and
// outcomes back in batches; every state change and its webhook event commit
// together in the store.
package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Store is what delivery needs from storage.
type Store interface {
	ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*sb.Message, error)
	RecordHandoffs(ctx context.Context, hs []sb.Handoff) error
	RecordOutcomes(ctx context.Context, outs []sb.Outcome) error
	// NextDue returns the earliest time in (after, before] when a queued
	// message falls due, or false.
	NextDue(ctx context.Context, after, before time.Time) (time.Time, bool, error)
	MessagesDue() <-chan struct{}
	// Accepted returns up to max messages this process accepted and
	// stored already claimed for lease, waiting for one until ctx ends;
	// calling it is what makes the store hand sends over this way.
	Accepted(ctx context.Context, lease time.Duration, max int) ([]*sb.Message, error)
}

// Options tune a Worker; zero values take the defaults.
type Options struct {
	// Lease is how long a claimed message is reserved for this node.
	Lease time.Duration
	// OutcomeTimeout is how long to wait for an outcome before handing a
	// sent message over again.
	OutcomeTimeout time.Duration
	// Poll bounds how long the worker sleeps without a wake-up, which is
	// how it sees messages queued by other nodes.
	Poll time.Duration
	// Batch is the most messages claimed at once.
	Batch int
	// MaxAttempts is how many failed hand-offs fail a message.
	MaxAttempts int
	// SentAfter is how long a successful hand-off waits for its outcome
	// before it is recorded on its own (status sent); an outcome that
	// comes sooner records both in one write.
	SentAfter time.Duration
	// OutcomeLinger is how long outcomes are gathered, once at least two
	// have come together, before they are written in one transaction
	// (default 5ms). With several nodes, each node's outcomes came in
	// bursts a third the size of one node's, and each burst cost a
	// transaction of its own.
	OutcomeLinger time.Duration
	// Observer, when set, learns of every hand-off (for its latency).
	Observer *Observer
	// Log is the worker's logger (default slog.Default()).
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.OutcomeTimeout == 0 {
		o.OutcomeTimeout = 30 * time.Second
	}
	if o.Poll == 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Batch == 0 {
		o.Batch = 512
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.OutcomeLinger == 0 {
		o.OutcomeLinger = 5 * time.Millisecond
	}
	if o.SentAfter == 0 {
		o.SentAfter = 250 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	// Until its hand-off is recorded, a message is due again when its
	// claim's lease ends: record it well before.
	o.SentAfter = min(o.SentAfter, o.Lease/4)
}

// Worker runs the delivery pipeline of one node.
//
// A successful hand-off is not written at once. Recording it (status sent)
// protects nothing: after a crash every message that is not final is handed
// over again, sent or not, so it only tells the tenant what is happening. The
// worker therefore keeps it in memory for SentAfter: when the provider
// reports the outcome sooner, as the simulator does, one write records both
// (sent_at and delivered_at or failed_at); otherwise the hand-off is
// recorded on its own. Failed hand-offs are recorded at once.
type Worker struct {
	store    Store
	provider sb.Provider
	opt      Options

	mu     sync.Mutex
	unsent map[string]sb.Handoff // successful hand-offs not recorded yet
}

// New returns a Worker.
func New(store Store, provider sb.Provider, opt Options) *Worker {
	opt.defaults()
	return &Worker{store: store, provider: provider, opt: opt, unsent: map[string]sb.Handoff{}}
}

// Run delivers until ctx ends. Messages reach it two ways: sends this
// process accepted come straight from the store, already claimed (the
// hand-over); everything else (other nodes' sends, scheduled and campaign
// messages, leases that ran out) is claimed from the queue when due.
func (w *Worker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.collect(ctx) })
	wg.Go(func() { w.takeOver(ctx) })
	wg.Go(func() { w.recordSent(ctx) })
	w.dispatch(ctx)
	wg.Wait()
}

// takeOver hands over the sends that the store gives it in memory.
func (w *Worker) takeOver(ctx context.Context) {
	for {
		msgs, err := w.store.Accepted(ctx, w.opt.Lease, w.opt.Batch)
		if err != nil {
			return // ctx ended
		}
		w.handOff(ctx, msgs)
	}
}

func (w *Worker) dispatch(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for ctx.Err() == nil {
		now := time.Now()
		msgs, err := w.store.ClaimDue(ctx, now, w.opt.Lease, w.opt.Batch)
		if err != nil {
			if ctx.Err() == nil {
				w.opt.Log.Error("claiming due messages", "err", err)
			}
			msgs = nil
		}
		if len(msgs) > 0 {
			w.handOff(ctx, msgs)
			if len(msgs) == w.opt.Batch {
				continue // more are probably due
			}
		}
		wait := w.opt.Poll
		if next, ok, err := w.store.NextDue(ctx, now, time.Now().Add(wait)); err == nil && ok {
			if d := time.Until(next); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		if len(msgs) > 0 {
			wait = 0 // look again at once: the batch may have been cut short
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-w.store.MessagesDue():
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (w *Worker) handOff(ctx context.Context, msgs []*sb.Message) {
	var failed []sb.Handoff
	recorder, _ := w.provider.(sb.HandoffRecorder)
	for _, m := range msgs {
		now := time.Now()
		h := sb.Handoff{MessageID: m.ID, At: now, OutcomeBy: now.Add(w.opt.OutcomeTimeout)}
		// A carrier records the hand-off itself, once the carrier has
		// the message; until then it stays queued under its claim.
		self := recorder != nil && recorder.RecordsHandoff(m)
		if !self {
			// Noted before the call: a provider may report the outcome at once.
			w.mu.Lock()
			w.unsent[m.ID] = h
			w.mu.Unlock()
		}
		err := w.provider.Send(ctx, m)
		if err == nil {
			if w.opt.Observer != nil {
				w.opt.Observer.handedOff(m, now)
			}
			continue
		}
		if !self {
			w.mu.Lock()
			delete(w.unsent, m.ID)
			w.mu.Unlock()
		}
		h.Err = err
		var e *sb.Error
		var d *sb.Deferred
		switch {
		case errors.As(err, &d):
			h.Retry, h.Deferred = d.Until, true
		case (!errors.As(err, &e) || e.Code == sb.CodeInternal) && m.Attempts < w.opt.MaxAttempts:
			h.Retry = now.Add(time.Duration(1<<min(m.Attempts, 8)) * time.Second)
			// Not a failure of the message yet (that one the observer
			// logs): the provider refused it for now.
			w.opt.Log.Info("message hand-off failed; retrying", "tenant_id", m.TenantID, "environment", string(m.Env),
				"message_id", m.ID, "attempt", m.Attempts, "retry_at", h.Retry.UTC(), "err", err.Error())
		}
		failed = append(failed, h)
	}
	if len(failed) > 0 {
		w.record(ctx, failed)
	}
}

// record writes hand-offs, retrying until it succeeds or ctx ends.
func (w *Worker) record(ctx context.Context, hs []sb.Handoff) {
	for ctx.Err() == nil {
		err := w.store.RecordHandoffs(context.WithoutCancel(ctx), hs)
		if err == nil {
			return
		}
		w.opt.Log.Error("recording hand-offs; retrying", "err", err)
		time.Sleep(100 * time.Millisecond)
	}
}

// recordSent records the successful hand-offs whose outcome has not come
// within SentAfter, and, when ctx ends, all that are left.
func (w *Worker) recordSent(ctx context.Context) {
	t := time.NewTicker(w.opt.SentAfter / 2)
	defer t.Stop()
	for {
		var cutoff time.Time
		select {
		case <-ctx.Done():
			cutoff = time.Now().Add(time.Hour) // every one
		case now := <-t.C:
			cutoff = now.Add(-w.opt.SentAfter)
		}
		var due []sb.Handoff
		w.mu.Lock()
		for id, h := range w.unsent {
			if h.At.Before(cutoff) {
				due = append(due, h)
				delete(w.unsent, id)
			}
		}
		w.mu.Unlock()
		if len(due) > 0 {
			if ctx.Err() != nil {
				// Best effort on the way out: unrecorded, they are only
				// handed over again after the restart, as sent ones are.
				w.store.RecordHandoffs(context.WithoutCancel(ctx), due)
			} else {
				w.record(ctx, due)
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// collect records outcomes as the provider reports them, in batches.
func (w *Worker) collect(ctx context.Context) {
	outs := make([]sb.Outcome, 0, 512)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-w.provider.Outcomes():
			outs = append(outs[:0], o)
		}
		// A burst's outcomes are gathered for up to OutcomeLinger, so that
		// they are written in fewer, larger transactions; a lone outcome
		// is written at once.
		deadline := time.Now().Add(w.opt.OutcomeLinger)
	fill:
		for len(outs) < cap(outs) {
			select {
			case o := <-w.provider.Outcomes():
				outs = append(outs, o)
				continue
			default:
			}
			wait := time.Until(deadline)
			if len(outs) < 2 || wait <= 0 {
				break
			}
			linger.Reset(wait)
			select {
			case o := <-w.provider.Outcomes():
				outs = append(outs, o)
			case <-linger.C:
				break fill
			case <-ctx.Done():
				break fill
			}
			linger.Stop() // since Go 1.23 no stale tick stays in linger.C
		}
		w.mu.Lock()
		for i, o := range outs {
			if h, ok := w.unsent[o.MessageID]; ok {
				outs[i].SentAt = h.At
				delete(w.unsent, o.MessageID)
			}
		}
		w.mu.Unlock()
		for {
			err := w.store.RecordOutcomes(context.WithoutCancel(ctx), outs)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return // the outcome deadline hands these over again after restart
			}
			w.opt.Log.Error("recording outcomes; retrying", "err", err)
			time.Sleep(100 * time.Millisecond)
		}
	}
}
