package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"time"

	sb "github.com/switchboard/switchboard"
)

// The delivery queue lives in the messages table: a message is due when
// run_at <= now. A message a node's delivery worker holds is out of the
// queue (run_at NULL) and has a claim in message_claims instead: its node
// and until, the end of the lease and, once the message is handed to the
// provider, the deadline for its outcome. A claim whose until passes goes
// back into the queue (sweepClaims), so a message held by a node that dies
// is claimed again, and an outcome lost in a crash leads to a second
// hand-off (which the provider can deduplicate by message id) rather than a
// message stuck in "sent". Finishing a message deletes its claim. Keeping
// the claims out of messages means the update that finishes a message
// changes no indexed column, which PostgreSQL then makes without writing an
// index entry (a heap-only update).

// ClaimDue claims up to limit due messages for lease and returns them, their
// attempts already counted. Claims that ran out are put back in the queue
// first. Direct sends are claimed first and campaign messages fill what is
// left of the batch, so a campaign's backlog never delays a direct send. On
// PostgreSQL, SKIP LOCKED lets several nodes claim at once without waiting
// on each other.
func (db *DB) ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*sb.Message, error) {
	// Whether anything is to be done is asked first, outside the
	// group-commit transaction, which holds the callers of its batch: under
	// load nothing is, since the sends reach the worker in memory, and
	// every node asks four times a second.
	if due, err := db.queueDue(ctx, now); err != nil || !due {
		return nil, err
	}
	var out []*sb.Message
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	lapsed := 0
	err := db.Write(ctx, func(tx *Tx) error {
		out, lapsed = out[:0], 0
		if err := tx.sweepClaims(ctx, now, limit); err != nil {
			return err
		}
		for _, lane := range []string{"campaign_id IS NULL", "campaign_id IS NOT NULL"} {
			if len(out) >= limit {
				break
			}
			// A claim still named on a due message is an earlier claim
			// that ran out without a result (see Redeliveries): PostgreSQL
			// returns it from the join (due.claimer); SQLite, whose
			// RETURNING sees only the updated row, counts them first (one
			// writer: the same rows).
			query := `UPDATE messages SET run_at = NULL, attempts = attempts + 1, claimed_by = ?
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
				query = `UPDATE messages SET run_at = NULL, attempts = attempts + 1, claimed_by = ?
					WHERE id IN (SELECT id FROM messages WHERE run_at <= ? AND ` + lane + ` ORDER BY run_at LIMIT ?)
					RETURNING ` + messageCols + `, NULL`
			}
			rows, err := tx.query(ctx, query, db.planEach(db.node, sb.Micros(now), limit-len(out))...)
			if err != nil {
				return err
			}
			from := len(out)
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
			for _, m := range out[from:] {
				tx.claims = append(tx.claims, []any{m.ID, db.node, sb.Micros(now.Add(lease))})
			}
		}
		return tx.flushClaims(ctx)
	})
	if err == nil {
		db.redelivered.leaseMessages.Add(int64(lapsed))
	}
	return out, err
}

// queueDue reports whether a message is due by now in the queue, or a claim
// has run out: whether ClaimDue has anything to do. On PostgreSQL the
// function queue_due (migration 0024) asks it in one call planned once per
// connection.
func (db *DB) queueDue(ctx context.Context, now time.Time) (bool, error) {
	var due bool
	query := `SELECT queue_due(?)`
	args := []any{sb.Micros(now)}
	if db.dialect != Postgres {
		query = `SELECT EXISTS (SELECT 1 FROM messages WHERE run_at <= ? AND campaign_id IS NULL)
			OR EXISTS (SELECT 1 FROM messages WHERE run_at <= ? AND campaign_id IS NOT NULL)
			OR EXISTS (SELECT 1 FROM message_claims WHERE until <= ?)`
		args = []any{args[0], args[0], args[0]}
	}
	err := db.queryRow(ctx, query, args...).Scan(&due)
	return due, err
}

// sweepClaims puts up to limit claims that ended by now back in the queue,
// due at once. Their messages keep claimed_by, so that ClaimDue counts them
// as lease redeliveries. On PostgreSQL each claim is deleted by one node
// only (SKIP LOCKED, then DELETE's own row lock), so a claim that another
// node has just renewed is never put back.
func (t *Tx) sweepClaims(ctx context.Context, now time.Time, limit int) error {
	lock := ""
	if t.db.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	rows, err := t.query(ctx, `DELETE FROM message_claims WHERE message_id IN
		(SELECT message_id FROM message_claims WHERE until <= ? ORDER BY until LIMIT ?`+lock+`) RETURNING message_id`,
		t.db.planEach(sb.Micros(now), limit)...)
	if err != nil {
		return err
	}
	ids, err := scanIDs(rows)
	if err != nil || len(ids) == 0 {
		return err
	}
	in, args := t.db.inIDs("id", ids)
	_, err = t.exec(ctx, `UPDATE messages SET run_at = ? WHERE `+in+` AND status IN ('queued', 'sent')`,
		t.db.planEach(append([]any{sb.Micros(now)}, args...)...)...)
	return err
}

// scanIDs reads a column of ids, as statement arguments, and closes rows.
func scanIDs(rows *sql.Rows) ([]any, error) {
	ss, err := scanStrings(rows)
	if err != nil {
		return nil, err
	}
	ids := make([]any, len(ss))
	for i, s := range ss {
		ids[i] = s
	}
	return ids, nil
}

// scanStrings reads a column of text, such as ids, and closes rows.
func scanStrings(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// The PostgreSQL types of a claim's row, and the statement that writes rows
// of them (insertMessageLater's with the commit, ClaimDue's at once). A
// claim left on a message that is due again is replaced.
var (
	claimTypes   = []string{"text", "text", "bigint"}
	claimInsert  = `INSERT INTO message_claims (message_id, node, until) `
	claimReplace = ` ON CONFLICT (message_id) DO UPDATE SET node = excluded.node, until = excluded.until`
	insertClaims = claimInsert + `SELECT * FROM ` + unnest(claimTypes) + claimReplace
)

// flushClaims writes the claims the transaction holds back (tx.claims) now.
func (t *Tx) flushClaims(ctx context.Context) error {
	rows := t.claims
	t.claims = nil
	if len(rows) == 0 {
		return nil
	}
	if t.db.dialect == Postgres {
		_, err := t.exec(ctx, insertClaims, columns(rows, len(claimTypes))...)
		return err
	}
	return t.insertValues(ctx, claimInsert+`VALUES `, claimReplace, len(claimTypes), rows)
}

// unclaiming returns query and its arguments such that running them also
// deletes the claim of message id: on PostgreSQL in the same statement (a
// WITH in front of query, so the same round trip), on SQLite by deleting it
// first.
func (t *Tx) unclaiming(ctx context.Context, id string, query string, args []any) (string, []any, error) {
	if t.db.dialect == Postgres {
		return `WITH unclaimed AS (DELETE FROM message_claims WHERE message_id = ?) ` + query, append([]any{id}, args...), nil
	}
	_, err := t.unclaim(ctx, id)
	return query, args, err
}

// unclaim deletes the claim of a message and reports whether it had one.
func (t *Tx) unclaim(ctx context.Context, id string) (bool, error) {
	res, err := t.exec(ctx, `DELETE FROM message_claims WHERE message_id = ?`, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
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
	if db.dialect == Postgres {
		// The same three questions in one call planned once per
		// connection (migration 0024).
		var next *int64
		if err := db.queryRow(ctx, `SELECT queue_next(?, ?)`, sb.Micros(after), sb.Micros(before)).Scan(&next); err != nil || next == nil {
			return time.Time{}, false, err
		}
		return sb.FromMicros(*next), true, nil
	}
	var next *int64
	for _, lane := range []string{"campaign_id IS NULL", "campaign_id IS NOT NULL"} {
		var n *int64
		if err := db.queryRow(ctx, `SELECT MIN(run_at) FROM messages WHERE run_at > ? AND run_at <= ? AND `+lane,
			sb.Micros(after), sb.Micros(before)).Scan(&n); err != nil {
			return time.Time{}, false, err
		}
		if n != nil && (next == nil || *n < *next) {
			next = n
		}
	}
	// A claim that runs out puts its message back in the queue.
	var n *int64
	if err := db.queryRow(ctx, `SELECT MIN(until) FROM message_claims WHERE until > ? AND until <= ?`,
		sb.Micros(after), sb.Micros(before)).Scan(&n); err != nil {
		return time.Time{}, false, err
	}
	if n != nil && (next == nil || *n < *next) {
		next = n
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
	return db.inTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `UPDATE messages SET run_at = ? WHERE run_at > ? AND status IN ('queued', 'sent') AND (scheduled_at IS NULL OR scheduled_at <= ?)`,
			sb.Micros(now), sb.Micros(now), sb.Micros(now)); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `UPDATE messages SET run_at = ? WHERE id IN (SELECT message_id FROM message_claims) AND status IN ('queued', 'sent')`,
			sb.Micros(now)); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `DELETE FROM message_claims`)
		return err
	})
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
			// The claim now lasts until the deadline for the outcome. A
			// message whose claim ran out meanwhile is back in the queue
			// (run_at set): it gets the same deadline there. A message
			// whose carrier already accepted it has neither (its receipt
			// finishes it): it stays out.
			if _, err := tx.exec(ctx, `UPDATE messages SET status = 'sent', sent_at = COALESCE(sent_at, ?),
				run_at = CASE WHEN run_at IS NULL THEN NULL ELSE CAST(? AS BIGINT) END
				WHERE `+in+` AND status IN ('queued', 'sent')`, args...); err != nil {
				return err
			}
			in, ids = db.inIDs("message_id", taken)
			if _, err := tx.exec(ctx, `UPDATE message_claims SET until = ? WHERE `+in,
				db.planEach(append([]any{sb.Micros(first.OutcomeBy)}, ids...)...)...); err != nil {
				return err
			}
		}
		for _, h := range hs {
			var err error
			switch {
			case h.Err == nil:
			case h.Deferred:
				// Put off only if it is still to be delivered: claimed, or
				// back in the queue.
				var held bool
				if held, err = tx.unclaim(ctx, h.MessageID); err == nil {
					_, err = tx.exec(ctx, `UPDATE messages SET run_at = ?, claimed_by = NULL, attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
						WHERE id = ? AND status IN ('queued', 'sent') AND (run_at IS NOT NULL OR ? = 1)`, sb.Micros(h.Retry), h.MessageID, boolInt(held))
				}
			case !h.Retry.IsZero():
				if _, err = tx.unclaim(ctx, h.MessageID); err == nil {
					_, err = tx.exec(ctx, `UPDATE messages SET run_at = ?, claimed_by = NULL WHERE id = ? AND status IN ('queued', 'sent')`, sb.Micros(h.Retry), h.MessageID)
				}
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
		query, args, err := t.unclaiming(ctx, o.MessageID,
			`UPDATE messages SET status = 'failed', failed_at = ?, failure_reason = ?, error_code = ?, run_at = NULL,
			device_due = NULL, sent_at = COALESCE(sent_at, ?)
			WHERE id = ? AND status IN ('queued', 'sent') RETURNING `+messageCols,
			[]any{sb.Micros(o.At), o.FailureReason, string(sb.CodeDeliveryFailed), microsOrNil(optNonZero(o.SentAt)), o.MessageID})
		if err != nil {
			return err
		}
		m, err := scanMessage(t.queryRow(ctx, query, args...))
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
	// run_at and device_due are NULL already for a claimed message: the
	// update changes no indexed column (see the top of this file). On
	// PostgreSQL the function finish_delivered (migration 0020) runs the
	// same statements with plans made once per connection.
	var rows *sql.Rows
	var err error
	if t.db.dialect == Postgres {
		rows, err = t.query(ctx, `SELECT * FROM finish_delivered(?::text[], ?, ?)`, delivered, sb.Micros(at), sb.Micros(sentAt))
	} else if _, err = t.exec(ctx, `DELETE FROM message_claims WHERE message_id IN (`+placeholders(len(delivered))+`)`, delivered...); err == nil {
		rows, err = t.query(ctx, `UPDATE messages SET status = 'delivered', delivered_at = ?, sent_at = COALESCE(sent_at, ?), run_at = NULL, device_due = NULL
			WHERE id IN (`+placeholders(len(delivered))+`) AND status IN ('queued', 'sent')
			RETURNING id, tenant_id, environment, from_number, to_number, channel, created_at, scheduled_at, engine`,
			append([]any{sb.Micros(at), sb.Micros(sentAt)}, delivered...)...)
	}
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
		var engine sql.NullString
		if err := rows.Scan(&m.ID, &m.TenantID, &env, &m.From, &m.To, &m.Channel, &created, &sched, &engine); err != nil {
			rows.Close()
			return err
		}
		m.Env, m.CreatedAt, m.ScheduledAt, m.Engine = sb.Environment(env), sb.FromMicros(created), optTime(sched), cmp.Or(engine.String, sb.EngineSimulator)
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
