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
	NextDue(ctx context.Context) (time.Time, bool, error)
	MessagesDue() <-chan struct{}
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
}

// Worker runs the delivery pipeline of one node.
type Worker struct {
	store    Store
	provider sb.Provider
	opt      Options
}

// New returns a Worker.
func New(store Store, provider sb.Provider, opt Options) *Worker {
	opt.defaults()
	return &Worker{store: store, provider: provider, opt: opt}
}

// Run delivers until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.collect(ctx) })
	w.dispatch(ctx)
	wg.Wait()
}

func (w *Worker) dispatch(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for ctx.Err() == nil {
		msgs, err := w.store.ClaimDue(ctx, time.Now(), w.opt.Lease, w.opt.Batch)
		if err != nil {
			if ctx.Err() == nil {
				slog.Error("claiming due messages", "err", err)
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
		if next, ok, err := w.store.NextDue(ctx); err == nil && ok {
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
	hs := make([]sb.Handoff, len(msgs))
	for i, m := range msgs {
		now := time.Now()
		err := w.provider.Send(ctx, m)
		h := sb.Handoff{MessageID: m.ID, Err: err, At: now, OutcomeBy: now.Add(w.opt.OutcomeTimeout)}
		var e *sb.Error
		if err != nil && (!errors.As(err, &e) || e.Code == sb.CodeInternal) && m.Attempts < w.opt.MaxAttempts {
			h.Retry = now.Add(time.Duration(1<<min(m.Attempts, 8)) * time.Second)
		}
		hs[i] = h
	}
	for ctx.Err() == nil {
		err := w.store.RecordHandoffs(context.WithoutCancel(ctx), hs)
		if err == nil {
			return
		}
		slog.Error("recording hand-offs; retrying", "err", err)
		time.Sleep(100 * time.Millisecond)
	}
}

// collect records outcomes as the provider reports them, in batches.
func (w *Worker) collect(ctx context.Context) {
	outs := make([]sb.Outcome, 0, 512)
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-w.provider.Outcomes():
			outs = append(outs[:0], o)
		}
	fill:
		for len(outs) < cap(outs) {
			select {
			case o := <-w.provider.Outcomes():
				outs = append(outs, o)
			default:
				break fill
			}
		}
		for {
			err := w.store.RecordOutcomes(context.WithoutCancel(ctx), outs)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return // the outcome deadline hands these over again after restart
			}
			slog.Error("recording outcomes; retrying", "err", err)
			time.Sleep(100 * time.Millisecond)
		}
	}
}
