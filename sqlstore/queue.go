package sqlstore

import (
	"context"
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
// attempts already counted. On PostgreSQL, SKIP LOCKED lets several nodes
// claim at once without waiting on each other.
func (db *DB) ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*sb.Message, error) {
	var out []*sb.Message
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	err := db.Write(ctx, func(tx *Tx) error {
		out = out[:0]
		rows, err := tx.query(ctx, `UPDATE messages SET run_at = ?, attempts = attempts + 1
			WHERE id IN (SELECT id FROM messages WHERE run_at <= ? ORDER BY run_at LIMIT ?`+lock+`)
			RETURNING `+messageCols, sb.Micros(now.Add(lease)), sb.Micros(now), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			m, err := scanMessage(rows)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return rows.Err()
	})
	return out, err
}

// NextDue returns when the earliest queued message falls due, or false.
func (db *DB) NextDue(ctx context.Context) (time.Time, bool, error) {
	var next *int64
	if err := db.queryRow(ctx, `SELECT MIN(run_at) FROM messages WHERE run_at IS NOT NULL`).Scan(&next); err != nil || next == nil {
		return time.Time{}, false, err
	}
	return sb.FromMicros(*next), true, nil
}

// ReleaseLeases makes every claimed message due at once. Only a single-node
// database (SQLite) calls it at start-up: no other process can hold a lease.
func (db *DB) ReleaseLeases(ctx context.Context, now time.Time) error {
	_, err := db.exec(ctx, `UPDATE messages SET run_at = ? WHERE run_at > ? AND status IN ('queued', 'sent') AND (scheduled_at IS NULL OR scheduled_at <= ?)`,
		sb.Micros(now), sb.Micros(now), sb.Micros(now))
	return err
}

// RecordHandoffs marks taken messages sent, reschedules those to retry and
// fails the rest, emitting message.failed for them.
func (db *DB) RecordHandoffs(ctx context.Context, hs []sb.Handoff) error {
	return db.Write(ctx, func(tx *Tx) error {
		for _, h := range hs {
			var err error
			switch {
			case h.Err == nil:
				_, err = tx.exec(ctx, `UPDATE messages SET status = 'sent', sent_at = COALESCE(sent_at, ?), run_at = ? WHERE id = ? AND status IN ('queued', 'sent')`,
					sb.Micros(h.At), sb.Micros(h.OutcomeBy), h.MessageID)
			case !h.Retry.IsZero():
				_, err = tx.exec(ctx, `UPDATE messages SET run_at = ? WHERE id = ? AND status IN ('queued', 'sent')`, sb.Micros(h.Retry), h.MessageID)
			default:
				err = tx.finish(ctx, sb.Outcome{MessageID: h.MessageID, FailureReason: h.Err.Error(), At: h.At})
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// RecordOutcomes stores delivery outcomes and emits message.delivered or
// message.failed in the same transaction. An outcome for a message that is
// already final is ignored, so duplicate reports are harmless.
func (db *DB) RecordOutcomes(ctx context.Context, outs []sb.Outcome) error {
	return db.Write(ctx, func(tx *Tx) error {
		for _, o := range outs {
			if err := tx.finish(ctx, o); err != nil {
				return err
			}
		}
		return nil
	})
}

func (t *Tx) finish(ctx context.Context, o sb.Outcome) error {
	var q string
	var args []any
	event := sb.EventDelivered
	if o.Delivered {
		q = `UPDATE messages SET status = 'delivered', delivered_at = ?, sent_at = COALESCE(sent_at, ?), run_at = NULL
			WHERE id = ? AND status IN ('queued', 'sent') RETURNING ` + messageCols
		args = []any{sb.Micros(o.At), sb.Micros(o.At), o.MessageID}
	} else {
		event = sb.EventFailed
		q = `UPDATE messages SET status = 'failed', failed_at = ?, failure_reason = ?, error_code = ?, run_at = NULL
			WHERE id = ? AND status IN ('queued', 'sent') RETURNING ` + messageCols
		args = []any{sb.Micros(o.At), o.FailureReason, string(sb.CodeDeliveryFailed), o.MessageID}
	}
	m, err := scanMessage(t.queryRow(ctx, q, args...))
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return nil // already final
	}
	if err != nil {
		return err
	}
	return t.emit(ctx, m, event)
}

// RepeatedHandoffs counts messages handed to the provider more than once
// (after a crash between hand-off and bookkeeping, or a lost outcome).
func (db *DB) RepeatedHandoffs(ctx context.Context) (int, error) {
	var n int
	err := db.queryRow(ctx, `SELECT COUNT(*) FROM messages WHERE direction = 'outbound' AND attempts > 1`).Scan(&n)
	return n, err
}
