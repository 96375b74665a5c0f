package sqlstore

import (
	"context"
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
