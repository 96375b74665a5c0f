package sqlstore

import (
	"context"
	"sync/atomic"
	"time"

	sb "github.com/switchboard/switchboard"
)

// The hand-over. A direct send that is due at once is stored already claimed
// by this process (a claim in message_claims until the end of the delivery
// worker's lease, its attempts 1) and, once its commit is on disk, given to
// the worker in memory: it costs no claim statement, and reaches the
// provider without waiting for a poll. Its claim is durable, so if the
// process dies before the outcome is recorded the claim runs out (or is
// released when the node is seen dead, or, on SQLite, by ReleaseLeases at
// start-up) and it is claimed again like any other message.
//
// The hand-over has a fixed number of places, reserved before the message is
// stored, so giving it to the worker never blocks an answer; when every place
// is taken, a send is queued as due and the worker claims it from the table.
const handoverCap = 4096

type handover struct {
	lease time.Duration
	ch    chan *sb.Message
	held  atomic.Int64 // places reserved or filled
}

// reserve takes a place for a message about to be stored, or reports that
// there is none.
func (h *handover) reserve() bool {
	if h.held.Add(1) > handoverCap {
		h.held.Add(-1)
		return false
	}
	return true
}

// release gives back a place whose message was not stored.
func (h *handover) release() { h.held.Add(-1) }

// Accepted returns up to max messages this process accepted and stored
// already claimed for lease, waiting until there is one or ctx ends. The
// first call starts the hand-over: until then, and after the ctx of a call
// ends, accepted sends are queued for ClaimDue instead. Only one delivery
// worker per process may call it.
func (db *DB) Accepted(ctx context.Context, lease time.Duration, max int) ([]*sb.Message, error) {
	h := db.handover.Load()
	if h == nil {
		h = &handover{lease: lease, ch: make(chan *sb.Message, handoverCap)}
		db.handover.Store(h)
	}
	var first *sb.Message
	select {
	case first = <-h.ch:
	case <-ctx.Done():
		db.handover.CompareAndSwap(h, nil)
		return nil, ctx.Err()
	}
	out := append(make([]*sb.Message, 0, min(max, 1+len(h.ch))), first)
	for len(out) < max {
		select {
		case m := <-h.ch:
			out = append(out, m)
			continue
		default:
		}
		break
	}
	h.held.Add(-int64(len(out)))
	return out, nil
}
