package sqlstore

import (
	"context"
	"database/sql"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Counts for benchmarks and operators: how much work is outstanding.

// QueueDepth returns the delivery backlog: outbound messages queued or sent
// and not yet final, whether due now or later. It reads the queue's indexes,
// so it stays cheap while the messages table grows.
func (db *DB) QueueDepth(ctx context.Context) (int64, error) {
	var total int64
	for _, lane := range []string{"campaign_id IS NULL", "campaign_id IS NOT NULL"} {
		n, err := db.queueCount(ctx, `SELECT COUNT(*) FROM messages WHERE run_at IS NOT NULL AND `+lane+` AND status IN ('queued', 'sent')`)
		if err != nil {
			return 0, err
		}
		total += n
	}
	n, err := db.queueCount(ctx, `SELECT COUNT(*) FROM message_claims`) // held by a node's delivery worker
	return total + n, err
}

// queueCount runs query, a count over the queue's partial indexes. On
// PostgreSQL it runs with sequential scans priced out: without statistics
// (a new table, or autovacuum off) the planner guesses that a good share of
// the rows have a run_at, and would read the whole messages table.
func (db *DB) queueCount(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	if db.dialect != Postgres {
		err := db.queryRow(ctx, query, args...).Scan(&n)
		return n, err
	}
	err := db.inTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		return tx.queryRow(ctx, query, args...).Scan(&n)
	})
	return n, err
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

// BatchStats returns how many transactions the group-commit writers of db
// have committed (or tried to) and how many writes (Write calls: an accepted
// send, a batch of hand-offs or outcomes, a claim) they ran in them: their
// ratio is the average batch, the number of writes one commit (one fsync)
// serves. /metrics shows both (switchboard_db_commits_total,
// switchboard_db_commit_writes_total).
func (db *DB) BatchStats() (commits, writes int64) {
	return db.batch.commits.Load(), db.batch.writes.Load()
}

// Gauges is the outstanding work of every tenant, as /metrics shows it at
// each scrape. Every count reads an index or a small table.
type Gauges struct {
	// Queue is the messages not final yet, by lane: "direct" and
	// "campaign" wait in the delivery queue (due now, scheduled, or handed
	// over and waiting for their outcome), "device" for a device to take
	// them.
	Queue map[string]int64
	// PendingDeliveries is the webhook deliveries not final yet.
	PendingDeliveries int64
	// CampaignsRunning is the running campaigns, and RecipientsPending the
	// recipients they have not reached yet (their total less their
	// progress).
	CampaignsRunning, RecipientsPending int64
	// Phones counts the phones by kind and status (online or offline, as
	// routing sees them at now).
	Phones map[[2]string]int64
}

// A lane counts its messages in the queue and those claimed by a
// node's delivery worker. The claims' lane is read message by message
// (a subquery per claim, by primary key): written as a join, the
// planner without statistics read the whole messages table's primary
// key for it, at every scrape (150 ms of PostgreSQL's time a scrape
// with 150,000 messages).
var gaugeQueries = map[string]string{
	"direct": `SELECT (SELECT COUNT(*) FROM messages WHERE run_at IS NOT NULL AND campaign_id IS NULL) +
		(SELECT COUNT(*) FROM message_claims c WHERE (SELECT m.campaign_id FROM messages m WHERE m.id = c.message_id) IS NULL)`,
	"campaign": `SELECT (SELECT COUNT(*) FROM messages WHERE run_at IS NOT NULL AND campaign_id IS NOT NULL) +
		(SELECT COUNT(*) FROM message_claims c WHERE (SELECT m.campaign_id FROM messages m WHERE m.id = c.message_id) IS NOT NULL)`,
	"device": `SELECT COUNT(*) FROM messages WHERE device_due IS NOT NULL`,
}

// Gauges counts the outstanding work of every tenant (see Gauges).
func (db *DB) Gauges(ctx context.Context, routing sb.Routing, now time.Time) (Gauges, error) {
	g := Gauges{Queue: map[string]int64{}, Phones: map[[2]string]int64{}}
	for lane, query := range gaugeQueries {
		n, err := db.queueCount(ctx, query)
		if err != nil {
			return g, err
		}
		g.Queue[lane] = n
	}
	var err error
	if g.PendingDeliveries, err = db.PendingDeliveries(ctx); err != nil {
		return g, err
	}
	var pending sql.NullInt64
	if err := db.queryRow(ctx, `SELECT COUNT(*), SUM(total - progress) FROM campaigns WHERE status = 'running'`).Scan(&g.CampaignsRunning, &pending); err != nil {
		return g, err
	}
	g.RecipientsPending = max(pending.Int64, 0)
	rows, err := db.query(ctx, `SELECT kind, status, device_id, last_seen_at, link FROM phones`)
	if err != nil {
		return g, err
	}
	defer rows.Close()
	for rows.Next() {
		var p sb.Phone
		var device, link sql.NullString
		var seen sql.NullInt64
		if err := rows.Scan(&p.Kind, &p.Status, &device, &seen, &link); err != nil {
			return g, err
		}
		if device.Valid {
			p.Device = &sb.Device{ID: device.String}
		}
		p.LastSeenAt, p.Link = optTime(seen), link.String
		g.Phones[[2]string{p.Kind, routing.Status(&p, now)}]++
	}
	return g, rows.Err()
}

// SimulatedPhones counts the simulated phones and the tenants that have
// them: live messages sent from those phones are delivered by the built-in
// simulator, and reach no real phone.
func (db *DB) SimulatedPhones(ctx context.Context) (phones, tenants int64, err error) {
	err = db.queryRow(ctx, `SELECT COUNT(*), COUNT(DISTINCT tenant_id) FROM phones WHERE kind = ?`, sb.PhoneSimulated).Scan(&phones, &tenants)
	return phones, tenants, err
}
