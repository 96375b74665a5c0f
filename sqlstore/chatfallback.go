package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	sb "github.com/switchboard/switchboard"
)

// DueChatFallbacks returns up to limit messages whose chat engine has not
// delivered them by their chat_fallback_at (at or before now): the ones
// ChatFallback sends again by SMS.
func (db *DB) DueChatFallbacks(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := db.query(ctx, `SELECT id FROM messages WHERE chat_fallback_at IS NOT NULL AND chat_fallback_at <= ? ORDER BY chat_fallback_at LIMIT ?`,
		sb.Micros(now), limit)
	if err != nil {
		return nil, err
	}
	return scanStrings(rows)
}

// ChatFallback sends a chat message of channel auto again by SMS, once:
// from the phone the routing rules pick among the tenant's phones that
// send sms, with fallback {from: chat, reason} in its record, queued
// again. It reports false, changing nothing but the deadline, when the
// message was not an auto message a chat engine carries, is final (a
// delivered one stays delivered) or fell back already, or when no phone
// can send it by SMS now (it stays with its chat engine).
func (db *DB) ChatFallback(ctx context.Context, messageID, reason string, now time.Time) (bool, error) {
	moved := false
	err := db.Write(ctx, func(tx *Tx) error {
		moved = false
		// Taking the deadline is what claims the fallback: of two nodes
		// that found the message due, only one clears it (PostgreSQL
		// checks the condition again once the other's update commits).
		res, err := tx.exec(ctx, `UPDATE messages SET chat_fallback_at = NULL
			WHERE id = ? AND environment = 'live' AND chat_fallback_at IS NOT NULL AND status IN ('queued', 'sent')`, messageID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				// Not due (any more), or final: clear a final one's deadline.
				_, err = tx.exec(ctx, `UPDATE messages SET chat_fallback_at = NULL WHERE id = ? AND chat_fallback_at IS NOT NULL`, messageID)
			}
			return err
		}
		var tenantID string
		if err := tx.queryRow(ctx, `SELECT tenant_id FROM messages WHERE id = ?`, messageID).Scan(&tenantID); err != nil {
			return err
		}
		day := sb.Day(now)
		key := phoneKey{tenantID, sb.Live, day}
		p, err := tx.pickPhone(ctx, key, sb.ChannelSMS, "", "", "", now)
		if err != nil {
			return err
		}
		if p == nil {
			var revoked sql.NullInt64
			if err := tx.queryRow(ctx, `SELECT chat_revoked_at FROM messages WHERE id = ?`, messageID).Scan(&revoked); err != nil {
				return err
			}
			if revoked.Valid {
				// The engine no longer has it: it waits for an SMS phone.
				_, err := tx.exec(ctx, `UPDATE messages SET chat_fallback_at = ? WHERE id = ?`, sb.Micros(now.Add(RevokedRetry)), messageID)
				return err
			}
			return nil // it stays with its chat engine
		}
		if err := tx.countOnPhone(ctx, sb.Live, p, day); err != nil {
			return err
		}
		var runAt, deviceDue any = sb.Micros(now), nil
		if p.Kind == sb.PhoneAndroid {
			runAt, deviceDue = nil, sb.Micros(now)
			if err := tx.notifyPhone(ctx, p.ID); err != nil {
				return err
			}
		} else {
			tx.afterCommit(db.wakeMessages)
		}
		if _, err := tx.exec(ctx, `UPDATE messages SET channel = 'sms', phone_id = ?, from_number = ?, engine = ?, fallback_from = 'chat', fallback_reason = ?,
			status = 'queued', sent_at = NULL, attempts = 0, claimed_by = NULL, run_at = ?, device_due = ?, chat_fallback_at = NULL WHERE id = ?`,
			p.ID, p.Number, sb.EngineOf(sb.Live, p.Kind), reason, runAt, deviceDue, messageID); err != nil {
			return err
		}
		// The chat engine's claim and parts go: the SMS link keeps its own.
		if _, err := tx.exec(ctx, `DELETE FROM message_claims WHERE message_id = ?`, messageID); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `DELETE FROM carrier_parts WHERE message_id = ?`, messageID); err != nil {
			return err
		}
		moved = true
		return nil
	})
	return moved, err
}

// RevokedRetry is how long a revoked chat message that no phone could send
// by SMS waits before ChatFallback is tried again.
const RevokedRetry = time.Minute

// ClaimChatFallback claims the fallback of a due chat message (its
// chat_fallback_at at or before now) for lease: it moves the deadline to
// now+lease, so that of the nodes that found the message due only one
// claims it (PostgreSQL checks the condition again once the other's update
// commits), and the message is due again after lease if the claimer does
// not finish (a revoke that failed is tried again then). It returns nil
// when the message is not claimed: not due (any more), not live, or final,
// whose deadline it clears.
func (db *DB) ClaimChatFallback(ctx context.Context, messageID string, now time.Time, lease time.Duration) (*sb.ChatFallbackClaim, error) {
	var c *sb.ChatFallbackClaim
	err := db.Write(ctx, func(tx *Tx) error {
		c = nil
		res, err := tx.exec(ctx, `UPDATE messages SET chat_fallback_at = ?
			WHERE id = ? AND environment = 'live' AND chat_fallback_at IS NOT NULL AND chat_fallback_at <= ? AND status IN ('queued', 'sent')`,
			sb.Micros(now.Add(lease)), messageID, sb.Micros(now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				_, err = tx.exec(ctx, `UPDATE messages SET chat_fallback_at = NULL
					WHERE id = ? AND chat_fallback_at IS NOT NULL AND (environment <> 'live' OR status NOT IN ('queued', 'sent'))`, messageID)
			}
			return err
		}
		var link sql.NullString
		var revoked sql.NullInt64
		got := &sb.ChatFallbackClaim{MessageID: messageID}
		if err := tx.queryRow(ctx, `SELECT m.tenant_id, m.to_number, m.status, p.kind, p.link, m.chat_revoked_at
			FROM messages m LEFT JOIN phones p ON p.id = m.phone_id WHERE m.id = ?`, messageID).
			Scan(&got.TenantID, &got.To, &got.Status, &got.Kind, &link, &revoked); err != nil {
			return err
		}
		got.Link, got.Revoked = link.String, revoked.Valid
		c = got
		return nil
	})
	return c, err
}

// ChatRevoked records that the chat engine revoked a message (its
// chat_revoked_at): it is not revoked again, only sent again by SMS.
func (db *DB) ChatRevoked(ctx context.Context, messageID string, now time.Time) error {
	return db.Write(ctx, func(tx *Tx) error {
		res, err := tx.exec(ctx, `UPDATE messages SET chat_revoked_at = ? WHERE id = ? AND chat_revoked_at IS NULL`, sb.Micros(now), messageID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return errNotRevokable
		}
		return err
	})
}

var errNotRevokable = errors.New("sqlstore: the message is unknown or was revoked already")
