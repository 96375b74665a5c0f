package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	sb "github.com/switchboard/switchboard"
)

// CreateDashboardLink stores a one-time sign-in link (its token's hash) and
// drops the links that have expired.
func (db *DB) CreateDashboardLink(ctx context.Context, l *sb.DashboardLink) error {
	return db.inTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `DELETE FROM dashboard_links WHERE expires_at <= ?`, sb.Micros(l.CreatedAt)); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `INSERT INTO dashboard_links (token_hash, tenant_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
			l.TokenHash, l.TenantID, sb.Micros(l.CreatedAt), sb.Micros(l.ExpiresAt))
		return err
	})
}

// UseDashboardLink marks the link whose token hashes to tokenHash used and
// returns its tenant. A link that is unknown, expired or already used is
// sb.ErrNotFound: of two concurrent uses, one wins.
func (db *DB) UseDashboardLink(ctx context.Context, tokenHash string, now time.Time) (string, error) {
	var tenantID string
	err := db.inTx(ctx, func(tx *Tx) error {
		return tx.queryRow(ctx, `UPDATE dashboard_links SET used_at = ?
			WHERE token_hash = ? AND used_at IS NULL AND expires_at > ? RETURNING tenant_id`,
			sb.Micros(now), tokenHash, sb.Micros(now)).Scan(&tenantID)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", sb.ErrNotFound
	}
	return tenantID, err
}

const sessionCols = `id_hash, tenant_id, method, key_id, test_only, ended, created_at, expires_at`

// CreateDashboardSession stores a session and drops the sessions that have
// expired.
func (db *DB) CreateDashboardSession(ctx context.Context, s *sb.DashboardSession) error {
	return db.inTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= ?`, sb.Micros(s.CreatedAt)); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `INSERT INTO dashboard_sessions (`+sessionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			s.IDHash, s.TenantID, s.Method, nullStr(s.KeyID), boolInt(s.TestOnly), nullStr(s.Ended), sb.Micros(s.CreatedAt), sb.Micros(s.ExpiresAt))
		return err
	})
}

// DashboardSession returns the unexpired session whose id hashes to idHash,
// ended or not, or sb.ErrNotFound.
func (db *DB) DashboardSession(ctx context.Context, idHash string, now time.Time) (*sb.DashboardSession, error) {
	s, err := scanSession(db.queryRow(ctx, `SELECT `+sessionCols+` FROM dashboard_sessions WHERE id_hash = ? AND expires_at > ?`, idHash, sb.Micros(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sb.ErrNotFound
	}
	return s, err
}

func scanSession(row interface{ Scan(...any) error }) (*sb.DashboardSession, error) {
	var s sb.DashboardSession
	var key, ended sql.NullString
	var testOnly int
	var created, expires int64
	if err := row.Scan(&s.IDHash, &s.TenantID, &s.Method, &key, &testOnly, &ended, &created, &expires); err != nil {
		return nil, err
	}
	s.KeyID, s.TestOnly, s.Ended = key.String, testOnly != 0, ended.String
	s.CreatedAt, s.ExpiresAt = sb.FromMicros(created), sb.FromMicros(expires)
	return &s, nil
}

// DeleteDashboardSession ends a session (sign-out).
func (db *DB) DeleteDashboardSession(ctx context.Context, idHash string) error {
	_, err := db.exec(ctx, `DELETE FROM dashboard_sessions WHERE id_hash = ?`, idHash)
	return err
}

// DashboardSessions lists the tenant's sessions that are open at now (not
// ended, not expired), newest first.
func (db *DB) DashboardSessions(ctx context.Context, tenantID string, now time.Time) ([]*sb.DashboardSession, error) {
	rows, err := db.query(ctx, `SELECT `+sessionCols+` FROM dashboard_sessions
		WHERE tenant_id = ? AND ended IS NULL AND expires_at > ? ORDER BY created_at DESC, id_hash`, tenantID, sb.Micros(now))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.DashboardSession
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// EndDashboardSessionsExcept ends, for reason, the tenant's sessions but
// the one whose id hashes to keep ("" ends them all): sign out everywhere.
func (db *DB) EndDashboardSessionsExcept(ctx context.Context, tenantID, keep, reason string) error {
	_, err := db.exec(ctx, `UPDATE dashboard_sessions SET ended = ? WHERE tenant_id = ? AND ended IS NULL AND id_hash <> ?`, reason, tenantID, keep)
	return err
}

// EndDashboardSession ends, for reason, the tenant's session whose id
// hashes to idHash; another tenant's, or one already ended, is
// sb.ErrNotFound.
func (db *DB) EndDashboardSession(ctx context.Context, tenantID, idHash, reason string) error {
	res, err := db.exec(ctx, `UPDATE dashboard_sessions SET ended = ? WHERE tenant_id = ? AND id_hash = ? AND ended IS NULL`, reason, tenantID, idHash)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err == nil && n == 0 {
		err = sb.ErrNotFound
	}
	return err
}

// EndDashboardSessions ends every session of a tenant for reason: none
// works again, and a browser that comes back with one learns the reason.
func (db *DB) EndDashboardSessions(ctx context.Context, tenantID, reason string) error {
	_, err := db.exec(ctx, `UPDATE dashboard_sessions SET ended = ? WHERE tenant_id = ? AND ended IS NULL`, reason, tenantID)
	return err
}

// MessageDays counts the environment's messages created from since on, by
// UTC day and status.
func (db *DB) MessageDays(ctx context.Context, tenantID string, env sb.Environment, since time.Time) ([]sb.DayCount, error) {
	const day = int64(24 * time.Hour / time.Microsecond)
	rows, err := db.query(ctx, `SELECT created_at / ?, status, COUNT(*) FROM messages
		WHERE tenant_id = ? AND environment = ? AND id >= ? AND created_at >= ? GROUP BY 1, 2`,
		day, tenantID, string(env), sb.IDFloor(since), sb.Micros(since))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sb.DayCount
	for rows.Next() {
		var d int64
		var c sb.DayCount
		if err := rows.Scan(&d, &c.Status, &c.N); err != nil {
			return nil, err
		}
		c.Day = sb.FromMicros(d * day)
		out = append(out, c)
	}
	return out, rows.Err()
}

// WebhookHealth returns, for each of the given webhooks that has any, its
// deliveries created from since on that failed or are failing and being
// retried, with the newest of them and its attempts.
func (db *DB) WebhookHealth(ctx context.Context, tenantID string, env sb.Environment, webhookIDs []string, since time.Time) ([]sb.WebhookHealth, error) {
	var out []sb.WebhookHealth
	latest := map[string]*sb.Delivery{}
	for _, id := range webhookIDs {
		h := sb.WebhookHealth{WebhookID: id}
		var newest sql.NullString
		err := db.queryRow(ctx, `SELECT
				COALESCE(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0),
				COALESCE(SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END), 0), MAX(id)
			FROM webhook_deliveries
			WHERE webhook_id = ? AND tenant_id = ? AND environment = ? AND id >= ?
			  AND (status = 'failed' OR (status = 'pending' AND attempts > 0))`,
			id, tenantID, string(env), sb.IDFloor(since)).Scan(&h.Failed, &h.Retrying, &newest)
		if err != nil {
			return nil, err
		}
		if h.Failed+h.Retrying == 0 {
			continue
		}
		d, err := scanDelivery(db.queryRow(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries WHERE id = ?`, newest.String))
		if err != nil {
			return nil, err
		}
		h.Latest = d
		latest[d.ID] = d
		out = append(out, h)
	}
	if len(latest) > 0 {
		if err := attachAttempts(ctx, db.query, latest); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MessageDeliveries lists the webhook deliveries of one message of the
// tenant's environment, oldest first, each with its attempts.
func (db *DB) MessageDeliveries(ctx context.Context, tenantID string, env sb.Environment, messageID string) ([]*sb.Delivery, error) {
	return db.queryDeliveries(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries
		WHERE message_id = ? AND tenant_id = ? AND environment = ? ORDER BY id`, messageID, tenantID, string(env))
}

// FlashTTL is how long a dashboard flash can be taken.
const FlashTTL = 10 * time.Minute

// PutDashboardFlash keeps a sealed flash of a session until it is taken or
// FlashTTL passes, and drops the flashes of every session that are older.
func (db *DB) PutDashboardFlash(ctx context.Context, id, sessionHash, sealed string, now time.Time) error {
	return db.inTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `DELETE FROM dashboard_flashes WHERE created_at < ?`, sb.Micros(now.Add(-FlashTTL))); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `INSERT INTO dashboard_flashes (id, session_hash, sealed, created_at) VALUES (?, ?, ?, ?)`,
			id, sessionHash, sealed, sb.Micros(now))
		return err
	})
}

// TakeDashboardFlash returns a session's flash and deletes it: a flash is
// shown once. One of another session, taken already or older than
// FlashTTL is sb.ErrNotFound.
func (db *DB) TakeDashboardFlash(ctx context.Context, id, sessionHash string, now time.Time) (string, error) {
	var sealed string
	err := db.inTx(ctx, func(tx *Tx) error {
		return tx.queryRow(ctx, `DELETE FROM dashboard_flashes WHERE id = ? AND session_hash = ? AND created_at >= ? RETURNING sealed`,
			id, sessionHash, sb.Micros(now.Add(-FlashTTL))).Scan(&sealed)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", sb.ErrNotFound
	}
	return sealed, err
}
