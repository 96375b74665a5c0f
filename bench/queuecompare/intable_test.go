package queuecompare

import (
	"context"
	"log"
	"strings"
	"sync"
	"time"
)

// inTable is the queue kept in the messages table (sqlstore/queue.go with
// the loop of delivery/worker.go), written out here with the same SQL: a
// message is due when run_at <= now; one dispatch loop claims due messages
// in batches with UPDATE ... RETURNING (FOR UPDATE SKIP LOCKED on
// PostgreSQL), direct sends first and campaign messages after, pushing
// run_at forward by a lease; it hands each to the provider, and a collector
// marks the delivered ones with one UPDATE per batch. Claims and finishes go
// through the group-commit writer like every other write (sqlstore's
// ClaimDue and RecordOutcomes call db.Write).
//
// Left out of both queues alike: the 'sent' bookkeeping between hand-off and
// outcome (RecordHandoffs, one more UPDATE per batch here and one more per
// job with River) and the webhook events written with each outcome.
type inTable struct {
	batch int
	lease time.Duration
	poll  time.Duration

	env      *env
	claim    [2]string // per lane: direct sends, then campaign messages
	finish   func(n int) string
	wake     chan struct{}
	outcomes chan msg
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func newInTable(d dialect, batch int) *inTable {
	lock := ""
	if d == postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	q := &inTable{batch: batch, lease: 30 * time.Second, poll: 250 * time.Millisecond}
	for i, lane := range []string{"campaign_id IS NULL", "campaign_id IS NOT NULL"} {
		q.claim[i] = rebind(d, `UPDATE messages SET run_at = ?, attempts = attempts + 1
			WHERE id IN (SELECT id FROM messages WHERE run_at <= ? AND `+lane+` ORDER BY run_at LIMIT ?`+lock+`)
			RETURNING id, tenant_id, from_number, to_number, body, created_at, attempts`)
	}
	const finishSQL = `UPDATE messages SET status = 'delivered', delivered_at = ?, sent_at = COALESCE(sent_at, ?), run_at = NULL
		WHERE id IN (%s) AND status IN ('queued', 'sent')`
	if d == postgres {
		pg := strings.Replace(rebind(d, finishSQL), "IN (%s)", "= ANY($3)", 1)
		q.finish = func(int) string { return pg }
	} else {
		q.finish = func(n int) string {
			return strings.Replace(finishSQL, "%s", strings.TrimSuffix(strings.Repeat("?,", n), ","), 1)
		}
	}
	return q
}

func (q *inTable) name() string { return "in-table" }

func (q *inTable) setup(ctx context.Context, d db) error {
	for _, s := range queueIndexes {
		if err := d.exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// runAt makes the message due at once: that is the whole enqueue.
func (q *inTable) runAt(now time.Time) any { return now.UnixMicro() }

func (q *inTable) enqueue(context.Context, txn, *msg) error { return nil }

// afterCommit wakes the dispatch loop, as sqlstore's wakeMessages does.
func (q *inTable) afterCommit() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *inTable) start(ctx context.Context, e *env) error {
	q.env = e
	q.wake = make(chan struct{}, 1)
	q.outcomes = make(chan msg, 4*q.batch)
	ctx, q.cancel = context.WithCancel(ctx)
	if e.insertOnly {
		return nil
	}
	q.wg.Go(func() { q.collect(ctx) })
	q.wg.Go(func() { q.dispatch(ctx) })
	return nil
}

func (q *inTable) stop(context.Context) error {
	q.cancel()
	q.wg.Wait()
	return nil
}

func (q *inTable) check(context.Context, db) string { return "" }

func (q *inTable) dispatch(ctx context.Context) {
	var claimed []msg
	timer := time.NewTimer(0)
	defer timer.Stop()
	for ctx.Err() == nil {
		now := time.Now()
		err := q.env.w.write(func(ctx context.Context, tx txn) error {
			claimed = claimed[:0]
			for _, s := range q.claim {
				if len(claimed) >= q.batch {
					break
				}
				var err error
				claimed, err = tx.queryMsgs(ctx, claimed, s, now.Add(q.lease).UnixMicro(), now.UnixMicro(), q.batch-len(claimed))
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			q.env.fail("claim", err)
			claimed = claimed[:0]
		}
		for i := range claimed {
			if err := provider(&claimed[i]); err != nil {
				q.env.fail("provider", err)
				continue
			}
			select {
			case q.outcomes <- claimed[i]:
			case <-ctx.Done():
				return
			}
		}
		if len(claimed) > 0 {
			continue // more are probably due (the real loop waits 0 here)
		}
		timer.Reset(q.poll)
		select {
		case <-ctx.Done():
		case <-q.wake:
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

// collect records outcomes in batches, as delivery/worker.go does.
func (q *inTable) collect(ctx context.Context) {
	outs := make([]msg, 0, q.batch)
	args := make([]any, 0, q.batch+2)
	ids := make([]string, 0, q.batch)
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-q.outcomes:
			outs = append(outs[:0], m)
		}
	fill:
		for len(outs) < cap(outs) {
			select {
			case m := <-q.outcomes:
				outs = append(outs, m)
			default:
				break fill
			}
		}
		at := time.Now().UnixMicro()
		args = append(args[:0], at, at)
		ids = ids[:0]
		for _, m := range outs {
			ids = append(ids, m.id)
		}
		if q.env.dialect == postgres {
			args = append(args, ids)
		} else {
			for _, id := range ids {
				args = append(args, id)
			}
		}
		query := q.finish(len(outs))
		for {
			err := q.env.w.write(func(ctx context.Context, tx txn) error { return tx.exec(ctx, query, args...) })
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			log.Printf("in-table: recording outcomes: %v; retrying", err)
			time.Sleep(100 * time.Millisecond)
		}
		now := time.Now()
		for i := range outs {
			q.env.delivered(&outs[i], now)
		}
	}
}
