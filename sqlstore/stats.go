package sqlstore

import "context"

// Counts for benchmarks and operators: how much work is outstanding.

// QueueDepth returns the delivery backlog: outbound messages queued or sent
// and not yet final, whether due now or later. It reads the queue's indexes,
// so it stays cheap while the messages table grows.
func (db *DB) QueueDepth(ctx context.Context) (int64, error) {
	var total int64
	for _, lane := range []string{"campaign_id IS NULL", "campaign_id IS NOT NULL"} {
		var n int64
		if err := db.queryRow(ctx, `SELECT COUNT(*) FROM messages WHERE run_at IS NOT NULL AND `+lane+
			` AND status IN ('queued', 'sent')`).Scan(&n); err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// MessageCounts returns how many messages there are of each status, over all
// tenants. It reads the whole table: it is meant for benchmarks and
// operators, not for request paths.
func (db *DB) MessageCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := db.query(ctx, `SELECT status, COUNT(*) FROM messages GROUP BY status`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return nil, err
		}
		out[status] = n
	}
	return out, rows.Err()
}

// DeliveryCounts returns how many webhook deliveries there are of each
// status, and how many attempts are recorded, over all tenants. It reads
// whole tables: it is meant for benchmarks and operators.
func (db *DB) DeliveryCounts(ctx context.Context) (byStatus map[string]int64, attempts int64, err error) {
	rows, err := db.query(ctx, `SELECT status, COUNT(*) FROM webhook_deliveries GROUP BY status`)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	byStatus = map[string]int64{}
	for rows.Next() {
		var status string
		var n int64
		if err := rows.Scan(&status, &n); err != nil {
			return nil, 0, err
		}
		byStatus[status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	err = db.queryRow(ctx, `SELECT COUNT(*) FROM webhook_attempts`).Scan(&attempts)
	return byStatus, attempts, err
}

// PendingDeliveries returns how many webhook deliveries are pending (due,
// leased or waiting for a retry). It reads the deliveries' due index.
func (db *DB) PendingDeliveries(ctx context.Context) (int64, error) {
	var n int64
	err := db.queryRow(ctx, `SELECT COUNT(*) FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL AND status = 'pending'`).Scan(&n)
	return n, err
}

// BatchStats returns how many transactions the group-commit writers of this
// process have committed (or tried to) and how many Write calls they ran:
// their ratio is the average batch, the number of callers one commit (one
// fsync) serves.
func BatchStats() (batches, writes int64) {
	return batchStats.n.Load(), batchStats.reqs.Load()
}
