package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

const webhookCols = `id, tenant_id, environment, url, events, secret, created_at, deleted_at, previous_secret, previous_secret_expires_at, retry_policy`

func scanWebhook(row interface{ Scan(...any) error }) (*sb.Webhook, error) {
	var w sb.Webhook
	var env, events string
	var created int64
	var deleted, prevExpires sql.NullInt64
	var prev sql.NullString
	if err := row.Scan(&w.ID, &w.TenantID, &env, &w.URL, &events, &w.Secret, &created, &deleted, &prev, &prevExpires, &w.RetryPolicy); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, sb.ErrNotFound
		}
		return nil, err
	}
	w.Env, w.Events, w.CreatedAt, w.Deleted = sb.Environment(env), strings.Split(events, ","), sb.FromMicros(created), deleted.Valid
	w.PreviousSecret, w.PreviousSecretExpiresAt = prev.String, optTime(prevExpires)
	return &w, nil
}

// CreateWebhook stores w unless the tenant's environment already has
// sb.MaxWebhooksPerEnv webhooks (VALIDATION_ERROR).
func (db *DB) CreateWebhook(ctx context.Context, w *sb.Webhook) error {
	return db.inTx(ctx, func(tx *Tx) error {
		if db.dialect == Postgres {
			if _, err := tx.exec(ctx, `SELECT id FROM tenants WHERE id = ? FOR UPDATE`, w.TenantID); err != nil {
				return err
			}
		}
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM webhooks WHERE tenant_id = ? AND environment = ? AND deleted_at IS NULL`,
			w.TenantID, string(w.Env)).Scan(&n); err != nil {
			return err
		}
		if n >= sb.MaxWebhooksPerEnv {
			return sb.Invalid("url", "At most %d webhooks per environment; delete one first.", sb.MaxWebhooksPerEnv)
		}
		if w.RetryPolicy == "" {
			w.RetryPolicy = sb.RetryStandard
		}
		_, err := tx.exec(ctx, `INSERT INTO webhooks (`+webhookCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?)`,
			w.ID, w.TenantID, string(w.Env), w.URL, strings.Join(w.Events, ","), w.Secret, sb.Micros(w.CreatedAt), w.RetryPolicy)
		return err
	})
}

// Webhooks lists the environment's webhooks, oldest first.
func (db *DB) Webhooks(ctx context.Context, tenantID string, env sb.Environment) ([]*sb.Webhook, error) {
	rows, err := db.query(ctx, `SELECT `+webhookCols+` FROM webhooks WHERE tenant_id = ? AND environment = ? AND deleted_at IS NULL ORDER BY id`,
		tenantID, string(env))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// Webhook returns one live webhook of the environment.
func (db *DB) Webhook(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Webhook, error) {
	return scanWebhook(db.queryRow(ctx, `SELECT `+webhookCols+` FROM webhooks WHERE tenant_id = ? AND environment = ? AND id = ? AND deleted_at IS NULL`,
		tenantID, string(env), id))
}

// UpdateWebhook changes a live webhook of the environment and returns it.
// A new retry policy applies from the next failure of a pending delivery.
// A new secret (one that differs from the current) makes the current one
// the previous secret, which goes on signing until now + sb.SecretOverlap;
// the secret before it stops signing at once. Deliveries not yet made go
// to the new url, with the new events' filter applying to events to come.
func (db *DB) UpdateWebhook(ctx context.Context, tenantID string, env sb.Environment, id string, patch sb.WebhookPatch, now time.Time) (*sb.Webhook, error) {
	var w *sb.Webhook
	err := db.inTx(ctx, func(tx *Tx) error {
		lock := ""
		if db.dialect == Postgres {
			lock = " FOR UPDATE"
		}
		var err error
		w, err = scanWebhook(tx.queryRow(ctx, `SELECT `+webhookCols+` FROM webhooks WHERE tenant_id = ? AND environment = ? AND id = ? AND deleted_at IS NULL`+lock,
			tenantID, string(env), id))
		if err != nil {
			return err
		}
		if patch.URL != nil {
			w.URL = *patch.URL
		}
		if patch.Events != nil {
			w.Events = patch.Events
		}
		if patch.RetryPolicy != nil {
			w.RetryPolicy = *patch.RetryPolicy
		}
		if patch.Secret != nil && *patch.Secret != w.Secret {
			expires := now.Add(sb.SecretOverlap).Truncate(time.Microsecond)
			w.PreviousSecret, w.PreviousSecretExpiresAt, w.Secret = w.Secret, &expires, *patch.Secret
		}
		_, err = tx.exec(ctx, `UPDATE webhooks SET url = ?, events = ?, secret = ?, previous_secret = ?, previous_secret_expires_at = ?, retry_policy = ? WHERE id = ?`,
			w.URL, strings.Join(w.Events, ","), w.Secret, nullStr(w.PreviousSecret), microsOrNil(w.PreviousSecretExpiresAt), w.RetryPolicy, w.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// DeleteWebhook deletes a webhook; its pending deliveries are failed.
func (db *DB) DeleteWebhook(ctx context.Context, tenantID string, env sb.Environment, id string, now time.Time) error {
	return db.inTx(ctx, func(tx *Tx) error {
		res, err := tx.exec(ctx, `UPDATE webhooks SET deleted_at = ? WHERE tenant_id = ? AND environment = ? AND id = ? AND deleted_at IS NULL`,
			sb.Micros(now), tenantID, string(env), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return sb.ErrNotFound
		}
		_, err = tx.exec(ctx, `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, leased = 0 WHERE webhook_id = ? AND status = 'pending'`, id)
		return err
	})
}

// WebhooksByID returns the webhooks with the given ids, deleted or not.
func (db *DB) WebhooksByID(ctx context.Context, ids []string) (map[string]*sb.Webhook, error) {
	out := make(map[string]*sb.Webhook, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := db.query(ctx, `SELECT `+webhookCols+` FROM webhooks WHERE id IN (`+placeholders(len(ids))+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, err
		}
		out[w.ID] = w
	}
	return out, rows.Err()
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

const deliveryCols = `id, webhook_id, tenant_id, environment, event, message_id, payload, status, attempts, tries, next_attempt_at, created_at, test, phone_id`

func scanDelivery(row interface{ Scan(...any) error }) (*sb.Delivery, error) {
	var d sb.Delivery
	var env, payload string
	var next sql.NullInt64
	var created, test int64
	var phone sql.NullString
	if err := row.Scan(&d.ID, &d.WebhookID, &d.TenantID, &env, &d.Event, &d.MessageID, &payload, &d.Status, &d.Attempts, &d.Tries, &next, &created, &test, &phone); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, sb.ErrNotFound
		}
		return nil, err
	}
	d.Env, d.Payload, d.NextAttemptAt, d.CreatedAt, d.Test = sb.Environment(env), []byte(payload), optTime(next), sb.FromMicros(created), test != 0
	d.PhoneID = phone.String
	return &d, nil
}

// ClaimDeliveries claims and leases up to limit due deliveries, oldest due
// first, but no more for one webhook than room allows: room returns how
// many more requests may be in flight to a webhook, and webhooks in full
// (whose endpoints already have all the requests in flight they may have)
// are skipped.
func (db *DB) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int, full []string, room func(webhookID string) int) ([]*sb.Delivery, error) {
	var out []*sb.Delivery
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	exclude, args := notIn(full)
	args = append([]any{sb.Micros(now)}, args...)
	args = append(args, limit)
	lapsed := 0
	err := db.Write(ctx, func(tx *Tx) error {
		out, lapsed = out[:0], 0
		rows, err := tx.query(ctx, `SELECT id, webhook_id, leased FROM webhook_deliveries WHERE next_attempt_at <= ?`+exclude+`
			ORDER BY next_attempt_at LIMIT ?`+lock, args...)
		if err != nil {
			return err
		}
		ids := []any{sb.Micros(now.Add(lease)), db.node}
		taken := map[string]int{}
		for rows.Next() {
			var id, hook string
			var leased int
			if err := rows.Scan(&id, &hook, &leased); err != nil {
				rows.Close()
				return err
			}
			if taken[hook] < room(hook) {
				taken[hook]++
				ids = append(ids, id)
				// Still leased: the lease of an earlier claim ran out
				// without a result (see Redeliveries).
				lapsed += leased
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(ids) == 2 {
			return err
		}
		rows, err = tx.query(ctx, `UPDATE webhook_deliveries SET next_attempt_at = ?, leased = 1, claimed_by = ?
			WHERE id IN (`+placeholders(len(ids)-2)+`) RETURNING `+deliveryCols, ids...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err == nil {
		db.redelivered.leaseDeliveries.Add(int64(lapsed))
	}
	return out, err
}

// notIn returns " AND webhook_id NOT IN (...)" and its arguments, or
// nothing for no ids.
func notIn(ids []string) (string, []any) {
	if len(ids) == 0 {
		return "", nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return ` AND webhook_id NOT IN (` + placeholders(len(ids)) + `)`, args
}

// NextDelivery returns when the earliest pending delivery falls due,
// leaving out the webhooks in full, which cannot take one now anyway.
func (db *DB) NextDelivery(ctx context.Context, full []string) (time.Time, bool, error) {
	exclude, args := notIn(full)
	var next *int64
	if err := db.queryRow(ctx, `SELECT MIN(next_attempt_at) FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL`+exclude, args...).Scan(&next); err != nil || next == nil {
		return time.Time{}, false, err
	}
	return sb.FromMicros(*next), true, nil
}

// ReleaseDeliveryLeases makes every leased delivery due now, counting them
// as lease redeliveries (see Redeliveries). Only a single-node database
// (SQLite) calls it, at start-up.
func (db *DB) ReleaseDeliveryLeases(ctx context.Context, now time.Time) error {
	res, err := db.exec(ctx, `UPDATE webhook_deliveries SET next_attempt_at = ?, leased = 0 WHERE leased = 1 AND status = 'pending'`, sb.Micros(now))
	if err != nil {
		return err
	}
	n, _ := res.RowsAffected()
	db.redelivered.leaseDeliveries.Add(n)
	return nil
}

// RecordAttempts stores attempts and moves each delivery on: succeeded,
// retried after the next delay of its webhook's retry policy (counted from
// the end of the failed attempt), or failed after the policy's last try.
func (db *DB) RecordAttempts(ctx context.Context, rs []sb.AttemptResult) error {
	ok, rest := splitAttempts(rs)
	return db.Write(ctx, func(tx *Tx) error {
		if err := tx.recordSucceeded(ctx, ok); err != nil {
			return err
		}
		for _, r := range rest {
			var attempts, tries int
			var status, policy string
			err := tx.queryRow(ctx, `SELECT d.attempts, d.tries, d.status, w.retry_policy FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
				WHERE d.id = ?`, r.DeliveryID).Scan(&attempts, &tries, &status, &policy)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			a := r.Attempt
			var code any
			if a.StatusCode != 0 {
				code = a.StatusCode
			}
			if _, err := tx.exec(ctx, `INSERT INTO webhook_attempts (delivery_id, n, at, status_code, error, duration_ms, response_body) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				r.DeliveryID, attempts+1, sb.Micros(a.At), code, nullStr(a.Error), a.Duration.Milliseconds(), nullStr(a.Response)); err != nil {
				return err
			}
			if status != sb.DeliveryPending {
				// Deleted webhook or already final: keep the log, change nothing.
				if _, err := tx.exec(ctx, `UPDATE webhook_deliveries SET attempts = ?, leased = 0 WHERE id = ?`, attempts+1, r.DeliveryID); err != nil {
					return err
				}
				continue
			}
			tries++
			var next any
			if r.OK {
				status = sb.DeliverySucceeded
			} else if delay, ok := sb.RetryDelay(policy, tries); ok {
				next = sb.Micros(a.At.Add(a.Duration).Add(delay))
			} else {
				status = sb.DeliveryFailed
			}
			if _, err := tx.exec(ctx, `UPDATE webhook_deliveries SET attempts = ?, tries = ?, status = ?, next_attempt_at = ?, leased = 0 WHERE id = ?`,
				attempts+1, tries, status, next, r.DeliveryID); err != nil {
				return err
			}
		}
		return nil
	})
}

// splitAttempts separates the common case, a successful attempt at a
// delivery that appears once in rs, from the rest (failures, and every
// result of a delivery that appears more than once, in their order).
func splitAttempts(rs []sb.AttemptResult) (ok, rest []sb.AttemptResult) {
	seen := make(map[string]int, len(rs))
	for _, r := range rs {
		seen[r.DeliveryID]++
	}
	for _, r := range rs {
		if r.OK && seen[r.DeliveryID] == 1 {
			ok = append(ok, r)
		} else {
			rest = append(rest, r)
		}
	}
	return ok, rest
}

// attemptRows is how many attempts one multi-row INSERT stores; a fixed
// size keeps the number of distinct statements (and prepared statements in
// the cache) small.
const attemptRows = 32

// recordSucceeded records successful attempts at distinct deliveries with
// one UPDATE for all their deliveries and a few multi-row INSERTs for the
// attempts, where RecordAttempts' general path takes three statements per
// attempt. The effect is the same: a pending delivery becomes succeeded
// (one more try, nothing more due); a delivery that is no longer pending
// (its webhook deleted, or already final) only gets the attempt logged.
func (t *Tx) recordSucceeded(ctx context.Context, rs []sb.AttemptResult) error {
	if len(rs) == 0 {
		return nil
	}
	// Pad the id list to a power of two with repeats (harmless in IN), so
	// that few distinct statements exist.
	size := 1
	for size < len(rs) {
		size *= 2
	}
	ids := make([]any, size)
	for i := range ids {
		ids[i] = rs[min(i, len(rs)-1)].DeliveryID
	}
	rows, err := t.query(ctx, `UPDATE webhook_deliveries SET attempts = attempts + 1, leased = 0,
		tries = CASE WHEN status = 'pending' THEN tries + 1 ELSE tries END,
		next_attempt_at = CASE WHEN status = 'pending' THEN NULL ELSE next_attempt_at END,
		status = CASE WHEN status = 'pending' THEN 'succeeded' ELSE status END
		WHERE id IN (`+placeholders(size)+`) RETURNING id, attempts`, ids...)
	if err != nil {
		return err
	}
	n := make(map[string]int, len(rs))
	for rows.Next() {
		var id string
		var attempts int
		if err := rows.Scan(&id, &attempts); err != nil {
			rows.Close()
			return err
		}
		n[id] = attempts
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var args []any // attemptCols per attempt
	for _, r := range rs {
		attempts, found := n[r.DeliveryID]
		if !found {
			continue // no such delivery: nothing to log it under
		}
		a := r.Attempt
		var code any
		if a.StatusCode != 0 {
			code = a.StatusCode
		}
		args = append(args, r.DeliveryID, attempts, sb.Micros(a.At), code, nullStr(a.Error), a.Duration.Milliseconds(), nullStr(a.Response))
	}
	// Full chunks of attemptRows in one statement each, the rest one by one.
	const insert = `INSERT INTO webhook_attempts (delivery_id, n, at, status_code, error, duration_ms, response_body) VALUES `
	const values, attemptCols = `(?, ?, ?, ?, ?, ?, ?)`, 7
	chunk := insert + strings.TrimSuffix(strings.Repeat(values+",", attemptRows), ",")
	for len(args) >= attemptCols*attemptRows {
		if _, err := t.exec(ctx, chunk, args[:attemptCols*attemptRows]...); err != nil {
			return err
		}
		args = args[attemptCols*attemptRows:]
	}
	for ; len(args) > 0; args = args[attemptCols:] {
		if _, err := t.exec(ctx, insert+values, args[:attemptCols]...); err != nil {
			return err
		}
	}
	return nil
}

// Deliveries lists a webhook's deliveries, newest first, each with its
// attempts, one more than the page when more remain.
func (db *DB) Deliveries(ctx context.Context, tenantID string, env sb.Environment, webhookID string, p sb.Page) ([]*sb.Delivery, error) {
	q := `SELECT ` + deliveryCols + ` FROM webhook_deliveries WHERE tenant_id = ? AND environment = ? AND webhook_id = ?`
	args := []any{tenantID, string(env), webhookID}
	if p.After != "" {
		q += ` AND id < ?`
		args = append(args, p.After)
	}
	return db.queryDeliveries(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, p.Limit+1)...)
}

// queryDeliveries returns the deliveries query selects (deliveryCols),
// each with its attempts, read in one snapshot: a delivery's state and its
// attempts always come from the same commit (read apart, a listing could
// show the attempt a dispatcher had just recorded beside the lease that
// attempt ended, as if the retry were due when the lease runs out).
func (db *DB) queryDeliveries(ctx context.Context, query string, args ...any) ([]*sb.Delivery, error) {
	var out []*sb.Delivery
	err := db.readSnapshot(ctx, func(q queryFunc) error {
		out = nil
		rows, err := q(ctx, query, args...)
		if err != nil {
			return err
		}
		byID := map[string]*sb.Delivery{}
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, d)
			byID[d.ID] = d
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(out) == 0 {
			return err
		}
		return attachAttempts(ctx, q, byID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func attachAttempts(ctx context.Context, q queryFunc, byID map[string]*sb.Delivery) error {
	ids := make([]any, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	rows, err := q(ctx, `SELECT delivery_id, at, status_code, error, duration_ms, response_body FROM webhook_attempts
		WHERE delivery_id IN (`+placeholders(len(ids))+`) ORDER BY delivery_id, n`, ids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var at, ms int64
		var code sql.NullInt64
		var msg, resp sql.NullString
		if err := rows.Scan(&id, &at, &code, &msg, &ms, &resp); err != nil {
			return err
		}
		d := byID[id]
		d.Log = append(d.Log, sb.Attempt{At: sb.FromMicros(at), StatusCode: int(code.Int64), Error: msg.String, Duration: time.Duration(ms) * time.Millisecond,
			Response: resp.String})
	}
	return rows.Err()
}

// Delivery returns one delivery of a webhook of the environment, with its
// attempts.
func (db *DB) Delivery(ctx context.Context, tenantID string, env sb.Environment, webhookID, id string) (*sb.Delivery, error) {
	ds, err := db.queryDeliveries(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries
		WHERE tenant_id = ? AND environment = ? AND webhook_id = ? AND id = ?`, tenantID, string(env), webhookID, id)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, sb.ErrNotFound
	}
	return ds[0], nil
}

// RetryDelivery starts a new cycle of tries for a failed delivery, due now,
// and returns the delivery as it then stands, before any new attempt. Only a
// failed delivery is sent again: a pending one (whose attempts are still
// under way, or in flight) or a succeeded one is DELIVERY_NOT_FAILED, and
// changes nothing.
func (db *DB) RetryDelivery(ctx context.Context, tenantID string, env sb.Environment, webhookID, id string, now time.Time) (*sb.Delivery, error) {
	var d *sb.Delivery
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		d, err = scanDelivery(tx.queryRow(ctx, `UPDATE webhook_deliveries SET status = 'pending', tries = 0, next_attempt_at = ?, leased = 0
			WHERE tenant_id = ? AND environment = ? AND webhook_id = ? AND id = ? AND status = 'failed'
			RETURNING `+deliveryCols, sb.Micros(now), tenantID, string(env), webhookID, id))
		if sb.ErrorCode(err) != sb.CodeNotFound {
			return err
		}
		cur, err := scanDelivery(tx.queryRow(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries
			WHERE tenant_id = ? AND environment = ? AND webhook_id = ? AND id = ?`, tenantID, string(env), webhookID, id))
		if err != nil {
			return err
		}
		return sb.Errorf(sb.CodeDeliveryNotFailed, "Only a failed delivery can be sent again; this one is %s.", cur.Status)
	})
	if err != nil {
		return nil, err
	}
	// Read the log before the workers are woken, so that it shows the
	// delivery as the retry left it.
	err = attachAttempts(ctx, db.query, map[string]*sb.Delivery{d.ID: d})
	db.wakeWebhooks()
	return d, err
}

// RecoverDeliveries sends again every failed delivery of a live webhook of
// the environment whose event happened in [since, until), each with a fresh
// cycle of tries due now, as RetryDelivery does for one, and returns how
// many. Pending and succeeded deliveries are left as they are.
func (db *DB) RecoverDeliveries(ctx context.Context, tenantID string, env sb.Environment, webhookID string, since, until, now time.Time) (int, error) {
	var n int64
	err := db.inTx(ctx, func(tx *Tx) error {
		if _, err := scanWebhook(tx.queryRow(ctx, `SELECT `+webhookCols+` FROM webhooks WHERE tenant_id = ? AND environment = ? AND id = ? AND deleted_at IS NULL`,
			tenantID, string(env), webhookID)); err != nil {
			return err
		}
		res, err := tx.exec(ctx, `UPDATE webhook_deliveries SET status = 'pending', tries = 0, next_attempt_at = ?, leased = 0
			WHERE webhook_id = ? AND tenant_id = ? AND environment = ? AND status = 'failed' AND created_at >= ? AND created_at < ?`,
			sb.Micros(now), webhookID, tenantID, string(env), sb.Micros(since), sb.Micros(until))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		db.wakeWebhooks()
	}
	return int(n), nil
}

// CreateTestDelivery queues a delivery of a test event to a live webhook
// of the environment, due now: the same request as a real event's, with a
// payload that names no message.
func (db *DB) CreateTestDelivery(ctx context.Context, tenantID string, env sb.Environment, webhookID, event string, payload []byte, now time.Time) (*sb.Delivery, error) {
	var d *sb.Delivery
	err := db.inTx(ctx, func(tx *Tx) error {
		if _, err := scanWebhook(tx.queryRow(ctx, `SELECT `+webhookCols+` FROM webhooks WHERE tenant_id = ? AND environment = ? AND id = ? AND deleted_at IS NULL`,
			tenantID, string(env), webhookID)); err != nil {
			return err
		}
		var msg struct {
			MessageID string `json:"message_id"`
			PhoneID   string `json:"phone_id"`
		}
		if err := json.Unmarshal(payload, &msg); err != nil {
			return err
		}
		var err error
		d, err = scanDelivery(tx.queryRow(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, tenant_id, environment, event, message_id, phone_id, payload, status, attempts, next_attempt_at, created_at, test)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, 1) RETURNING `+deliveryCols,
			sb.NewID(), webhookID, tenantID, string(env), event, msg.MessageID, nullStr(msg.PhoneID), string(payload), sb.Micros(now), sb.Micros(now)))
		return err
	})
	if err != nil {
		return nil, err
	}
	db.wakeWebhooks()
	return d, nil
}
