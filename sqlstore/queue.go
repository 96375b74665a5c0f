package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	sb "github.com/switchboard/switchboard"
)

// The delivery queue lives in the messages table: a message is due when
// run_at <= now. Claiming pushes run_at forward by a lease, so a message
// claimed by a node that dies is claimed again when the lease ends; a sent
// message keeps a run_at as the deadline for its outcome, so an outcome lost
// in a crash leads to a second hand-off (which the provider can deduplicate
// by message id) rather than a message stuck in "sent".

// ClaimDue claims up to limit due messages for lease and returns them, their
// attempts already counted. Direct sends are claimed first and campaign
// messages fill what is left of the batch, so a campaign's backlog never
// delays a direct send. On PostgreSQL, SKIP LOCKED lets several nodes claim
// at once without waiting on each other.
func (db *DB) ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*sb.Message, error) {
	var out []*sb.Message
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	lapsed := 0
	err := db.Write(ctx, func(tx *Tx) error {
		out, lapsed = out[:0], 0
		for _, lane := range []string{"campaign_id IS NULL", "campaign_id IS NOT NULL"} {
			if len(out) >= limit {
				break
			}
			// A claim still set on a due message is an earlier claim that
			// ran out without a result (see Redeliveries): PostgreSQL
			// returns it from the join (due.claimer); SQLite, whose RETURNING
			// sees only the updated row, counts them first (one writer: the
			// same rows).
			query := `UPDATE messages SET run_at = ?, attempts = attempts + 1, claimed_by = ?
				FROM (SELECT id AS due_id, claimed_by AS claimer FROM messages WHERE run_at <= ? AND ` + lane + ` ORDER BY run_at LIMIT ?` + lock + `) due
				WHERE messages.id = due.due_id
				RETURNING ` + messageCols + `, due.claimer`
			if db.dialect == SQLite {
				var n int
				if err := tx.queryRow(ctx, `SELECT COUNT(claimed_by) FROM (SELECT claimed_by FROM messages WHERE run_at <= ? AND `+lane+` ORDER BY run_at LIMIT ?)`,
					sb.Micros(now), limit-len(out)).Scan(&n); err != nil {
					return err
				}
				lapsed += n
				query = `UPDATE messages SET run_at = ?, attempts = attempts + 1, claimed_by = ?
					WHERE id IN (SELECT id FROM messages WHERE run_at <= ? AND ` + lane + ` ORDER BY run_at LIMIT ?)
					RETURNING ` + messageCols + `, NULL`
			}
			rows, err := tx.query(ctx, query, db.planEach(sb.Micros(now.Add(lease)), db.node, sb.Micros(now), limit-len(out))...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var claimer sql.NullString
				m, err := scanMessageWith(rows, &claimer)
				if err != nil {
					rows.Close()
					return err
				}
				if claimer.Valid {
					lapsed++
				}
				out = append(out, m)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		db.redelivered.leaseMessages.Add(int64(lapsed))
	}
	return out, err
}

// NextDue returns when the earliest queued message falls due after after
// and no later than before, or false. The bounds keep the scan of the queue's
// index short: the messages handed over to the delivery worker in memory
// wait in the queue under a lease, and once delivered their entries stay in
// the index until a vacuum removes them, thousands a second under load; a
// scan from the start of the index walks all of them (on PostgreSQL, once
// per node and poll, it cost more CPU than any statement but the sends).
// What fell due by after, ClaimDue has just claimed or another node holds.
func (db *DB) NextDue(ctx context.Context, after, before time.Time) (time.Time, bool, error) {
	var next *int64
	for _, lane := range []string{"campaign_id IS NULL", "campaign_id IS NOT NULL"} {
		var n *int64
		if err := db.queryRow(ctx, `SELECT MIN(run_at) FROM messages WHERE run_at > ? AND run_at <= ? AND `+lane,
			db.planEach(sb.Micros(after), sb.Micros(before))...).Scan(&n); err != nil {
			return time.Time{}, false, err
		}
		if n != nil && (next == nil || *n < *next) {
			next = n
		}
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return sb.FromMicros(*next), true, nil
}

// ReleaseLeases makes every claimed message due at once. Only a single-node
// database (SQLite) calls it at start-up: no other process can hold a lease.
// The claims stay recorded, so that ClaimDue counts the messages as lease
// redeliveries when it claims them again.
func (db *DB) ReleaseLeases(ctx context.Context, now time.Time) error {
	_, err := db.exec(ctx, `UPDATE messages SET run_at = ? WHERE run_at > ? AND status IN ('queued', 'sent') AND (scheduled_at IS NULL OR scheduled_at <= ?)`,
		sb.Micros(now), sb.Micros(now), sb.Micros(now))
	return err
}

// RecordHandoffs marks taken messages sent, reschedules those to retry or
// put off (deferred: the attempt is not counted) and fails the rest,
// emitting message.failed for them. Hand-offs that succeeded
// together are marked in one statement.
func (db *DB) RecordHandoffs(ctx context.Context, hs []sb.Handoff) error {
	var taken []any
	for _, h := range hs {
		if h.Err == nil {
			taken = append(taken, h.MessageID)
		}
	}
	return db.Write(ctx, func(tx *Tx) error {
		if len(taken) > 0 {
			// One sent_at and deadline for the batch: they differ by the
			// time it took to hand the batch over.
			first := hs[0]
			in, ids := db.inIDs("id", taken)
			args := db.planEach(append([]any{sb.Micros(first.At), sb.Micros(first.OutcomeBy)}, ids...)...)
			// A message whose carrier already accepted it is no longer in the
			// queue (run_at NULL: its receipt finishes it): it stays out.
			if _, err := tx.exec(ctx, `UPDATE messages SET status = 'sent', sent_at = COALESCE(sent_at, ?),
				run_at = CASE WHEN run_at IS NULL THEN NULL ELSE CAST(? AS BIGINT) END
				WHERE `+in+` AND status IN ('queued', 'sent')`, args...); err != nil {
				return err
			}
		}
		for _, h := range hs {
			var err error
			switch {
			case h.Err == nil:
			case h.Deferred:
				_, err = tx.exec(ctx, `UPDATE messages SET run_at = ?, claimed_by = NULL, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
					WHERE id = ? AND status IN ('queued', 'sent') AND run_at IS NOT NULL`, sb.Micros(h.Retry), h.MessageID)
			case !h.Retry.IsZero():
				_, err = tx.exec(ctx, `UPDATE messages SET run_at = ?, claimed_by = NULL WHERE id = ? AND status IN ('queued', 'sent')`, sb.Micros(h.Retry), h.MessageID)
			default:
				err = tx.finish(ctx, []sb.Outcome{{MessageID: h.MessageID, FailureReason: handoffReason(h.Err), At: h.At}})
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// handoffReason is the failure_reason of a failed hand-off: the message of
// an *sb.Error (written for users), else the error's text.
func handoffReason(err error) string {
	var e *sb.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// RecordOutcomes stores delivery outcomes and emits message.delivered or
// message.failed in the same transaction. An outcome for a message that is
// already final is ignored, so duplicate reports are harmless.
func (db *DB) RecordOutcomes(ctx context.Context, outs []sb.Outcome) error {
	return db.Write(ctx, func(tx *Tx) error { return tx.finish(ctx, outs) })
}

// finish makes messages final, out of both queues: all deliveries in one
// statement (they share a timestamp, the latest of the batch), failures one
// by one, each with its event.
func (t *Tx) finish(ctx context.Context, outs []sb.Outcome) error {
	var delivered []any
	var at, sentAt time.Time
	hooks := hookCache{}
	for _, o := range outs {
		if o.Delivered {
			delivered = append(delivered, o.MessageID)
			if o.At.After(at) {
				at = o.At
			}
			if o.SentAt.After(sentAt) {
				sentAt = o.SentAt
			}
			continue
		}
		m, err := scanMessage(t.queryRow(ctx, `UPDATE messages SET status = 'failed', failed_at = ?, failure_reason = ?, error_code = ?, run_at = NULL,
			device_due = NULL, sent_at = COALESCE(sent_at, ?)
			WHERE id = ? AND status IN ('queued', 'sent') RETURNING `+messageCols,
			sb.Micros(o.At), o.FailureReason, string(sb.CodeDeliveryFailed), microsOrNil(optNonZero(o.SentAt)), o.MessageID))
		if sb.ErrorCode(err) == sb.CodeNotFound {
			continue // already final
		}
		if err != nil {
			return err
		}
		if err := t.emit(ctx, hooks, m, sb.EventFailed); err != nil {
			return err
		}
	}
	if len(delivered) == 0 {
		return nil
	}
	// Only what message.delivered reports and routes by comes back: the
	// whole row (body included) would cost more than the update itself.
	// Hand-offs not recorded yet share one sent_at, the batch's latest (so
	// that it is never before a message's creation nor after its delivery).
	if sentAt.IsZero() {
		sentAt = at
	}
	in, ids := t.db.inIDs("id", delivered)
	args := t.db.planEach(append([]any{sb.Micros(at), sb.Micros(sentAt)}, ids...)...)
	rows, err := t.query(ctx, `UPDATE messages SET status = 'delivered', delivered_at = ?, sent_at = COALESCE(sent_at, ?), run_at = NULL, device_due = NULL
		WHERE `+in+` AND status IN ('queued', 'sent')
		RETURNING id, tenant_id, environment, from_number, to_number, channel, created_at, scheduled_at`, args...)
	if err != nil {
		return err
	}
	var done []*sb.Message
	deliveredAt := at
	for rows.Next() {
		m := &sb.Message{Status: sb.StatusDelivered, DeliveredAt: &deliveredAt}
		var env string
		var created int64
		var sched sql.NullInt64
		if err := rows.Scan(&m.ID, &m.TenantID, &env, &m.From, &m.To, &m.Channel, &created, &sched); err != nil {
			rows.Close()
			return err
		}
		m.Env, m.CreatedAt, m.ScheduledAt = sb.Environment(env), sb.FromMicros(created), optTime(sched)
		done = append(done, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, m := range done {
		if err := t.emit(ctx, hooks, m, sb.EventDelivered); err != nil {
			return err
		}
	}
	return nil
}

// RepeatedHandoffs counts messages handed to the provider more than once
// (after a crash between hand-off and bookkeeping, or a lost outcome).
func (db *DB) RepeatedHandoffs(ctx context.Context) (int, error) {
	var n int
	err := db.queryRow(ctx, `SELECT COUNT(*) FROM messages WHERE direction = 'outbound' AND attempts > 1`).Scan(&n)
	return n, err
}

func optNonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
