package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// On PostgreSQL the statements over a batch of message ids (hand-offs and
// outcomes: `id = ANY(...)`) and ClaimDue's claims (a range of run_at) are
// planned at every execution, never by a prepared
// statement's generic plan. pgx prepares each statement once per
// connection, and after five executions PostgreSQL may keep a generic plan
// made from the table of that moment: prepared while messages held a few
// rows, it was a sequential scan, and the outcome's UPDATE went on reading
// the whole table at every batch as it grew (80 us a message instead of 28
// after 60,000 sends). pg_prepared_statements lists the statements the
// connection prepared and how often each ran a generic plan; the test asks
// every connection of the pool (two). (The questions of the queue's polls,
// NextDue's and the one before ClaimDue, run in functions whose plans are
// made once per connection with sequential scans priced out: see
// TestQueuePollsPlan.)
func TestBatchStatementsPlannedEachTime(t *testing.T) {
	url := testPostgresURL(t)
	ctx := context.Background()
	db := openTestDBOptions(t, url, Options{MaxConns: 2, Writers: 1})
	tn := writeTestTenant(t, db)
	writeTestPhone(t, db, tn.ID, 0)
	for i := range 8 {
		s := testSend(tn.ID)
		s.Message.To = "+1500555" + string(rune('0'+i)) + "000"
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ClaimDue(ctx, time.Now(), time.Minute, 10); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.NextDue(ctx, time.Now(), time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := db.RecordHandoffs(ctx, []sb.Handoff{{MessageID: s.Message.ID, At: now, OutcomeBy: now.Add(time.Minute)}}); err != nil {
			t.Fatal(err)
		}
		if err := db.RecordOutcomes(ctx, []sb.Outcome{{MessageID: s.Message.ID, Delivered: true, At: now}}); err != nil {
			t.Fatal(err)
		}
		if m, err := db.Message(ctx, tn.ID, sb.Live, s.Message.ID); err != nil || m.Status != sb.StatusDelivered {
			t.Fatalf("message %d: %+v, %v; want delivered", i, m, err)
		}
	}
	seen := 0
	for c := range 2 {
		conn, err := db.write.Conn(ctx) // the first is released last: both are held at once
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rows, err := conn.QueryContext(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var stmt string
			var generic, custom int
			if err := rows.Scan(&stmt, &generic, &custom); err != nil {
				t.Fatal(err)
			}
			seen++
			if strings.Contains(stmt, "= ANY(") || strings.Contains(stmt, "run_at <=") {
				t.Errorf("connection %d prepared (%d generic plans, %d custom): %s", c, generic, custom, stmt)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	if seen == 0 {
		t.Fatal("no prepared statement on the pool's connections: the check sees nothing")
	}
}

// The reads of a batch of sends (Tx.prefetch) go through batch_reads
// (migration 0016), whose one generic plan per connection must reach
// recipients and tenants by their primary keys even when it was made while
// the tables were empty: made then as a plain statement's, it is a hash
// join over a sequential scan of recipients, and it would stay one as the
// table grows. pg_stat_xact_user_tables counts the scans of the current
// transaction.
func TestBatchReadsPlan(t *testing.T) {
	ctx := context.Background()
	tx := planTestTx(t)
	scans := func() map[string][2]int64 { return xactScans(t, tx, "recipients", "tenants") }
	reads := func(numbers ...string) map[string]any {
		t.Helper()
		ts, es, ns := []any{}, []any{}, []any{}
		for _, n := range numbers {
			ts, es, ns = append(ts, "tn_a"), append(es, "live"), append(ns, n)
		}
		rows, err := tx.QueryContext(ctx, `SELECT kind, tenant_id, number, opted_out, phones_version FROM batch_reads($1, $2, $3, $4)`,
			ts, es, ns, []any{"tn_a"})
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]any{}
		for rows.Next() {
			var kind int
			var tenant, number string
			var opted *int
			var version *int64
			if err := rows.Scan(&kind, &tenant, &number, &opted, &version); err != nil {
				t.Fatal(err)
			}
			if kind == 1 {
				got["version "+tenant] = *version
			} else if opted != nil {
				got[number] = *opted
			} else {
				got[number] = nil
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The counts of the backend's own scans not yet reported (the
	// migrations' among them) are the baseline.
	before := scans()
	// The plan is made at the first call, on empty tables.
	for range 6 {
		if got := reads("+15005550001", "+15005550002"); len(got) != 2 || got["+15005550001"] != nil {
			t.Fatalf("empty tables: %v", got)
		}
	}
	wantNoSeqScans(t, "batch_reads", before, scans(), 6)
	now := time.Now().UnixMicro()
	if _, err := tx.ExecContext(ctx, `INSERT INTO tenants (id, name, plan, status, trial_ends_at, created_at, phones_version) VALUES ('tn_a', 'a', 'scale', 'active', $1, $1, 7)`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO recipients (tenant_id, environment, number, opted_out, first_seen_at, updated_at)
		SELECT 'tn_a', 'live', '+1500555' || lpad(i::text, 4, '0'), i % 2, $1, $1 FROM generate_series(1, 2000) i`, now); err != nil {
		t.Fatal(err)
	}
	after := scans()
	got := reads("+15005550001", "+15005550002", "+15009999999")
	want := map[string]any{"+15005550001": 1, "+15005550002": 0, "+15009999999": nil, "version tn_a": int64(7)}
	if len(got) != len(want) {
		t.Fatalf("batch_reads: %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("batch_reads: %v, want %v", got, want)
		}
	}
	wantNoSeqScans(t, "batch_reads", after, scans(), 1)
}

// The send path's rows have no foreign key to their tenant on PostgreSQL
// (migration 0017): its check locked the tenant's row FOR KEY SHARE in
// every writer of every node at once.
func TestSendPathWithoutTenantLocks(t *testing.T) {
	url := testPostgresURL(t)
	ctx := context.Background()
	db := openTestDBOptions(t, url, Options{MaxConns: 2, Writers: 1})
	rows, err := db.write.QueryContext(ctx, `SELECT conrelid::regclass::text FROM pg_constraint
		WHERE contype = 'f' AND confrelid = 'tenants'::regclass AND conrelid::regclass::text IN ('messages', 'recipients')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var rel string
		if err := rows.Scan(&rel); err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s has a foreign key to tenants", rel)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The check sees foreign keys where there are some.
	var n int
	if err := db.write.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_constraint WHERE contype = 'f' AND confrelid = 'tenants'::regclass
		AND conrelid::regclass::text = 'api_keys'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("api_keys' foreign keys to tenants: %d, %v; want 1", n, err)
	}
}

// The outcome of a batch of delivered messages goes through
// finish_delivered (migration 0020), whose generic plans, made once per
// connection, must reach messages and message_claims by their primary keys
// even when they were made while the tables were empty.
func TestFinishDeliveredPlan(t *testing.T) {
	ctx := context.Background()
	tx := planTestTx(t)
	scans := func() map[string][2]int64 { return xactScans(t, tx, "messages", "message_claims") }
	finish := func(ids ...string) []string {
		t.Helper()
		rows, err := tx.QueryContext(ctx, `SELECT id FROM finish_delivered($1, 2, 1)`, ids)
		if err != nil {
			t.Fatal(err)
		}
		got, err := scanIDs(rows)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, id := range got {
			out = append(out, id.(string))
		}
		return out
	}
	before := scans()
	for range 6 { // the plans are made at the first call, on empty tables
		if got := finish("m1", "m2"); len(got) != 0 {
			t.Fatalf("empty tables: %v", got)
		}
	}
	wantNoSeqScans(t, "finish_delivered", before, scans(), 6)
	if _, err := tx.ExecContext(ctx, `INSERT INTO messages (id, tenant_id, environment, direction, from_number, to_number, body, channel, status, created_at)
		SELECT 'm' || i, 'tn', 'live', 'outbound', '+15005550000', '+15005550001', 'hi', 'sms', CASE WHEN i = 3 THEN 'failed' ELSE 'queued' END, 1
		FROM generate_series(1, 2000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO message_claims (message_id, node, until) SELECT 'm' || i, 'n', 5 FROM generate_series(1, 2000) i`); err != nil {
		t.Fatal(err)
	}
	after := scans()
	if got := finish("m1", "m2", "m3", "m9999"); len(got) != 2 || got[0] == got[1] || (got[0] != "m1" && got[0] != "m2") || (got[1] != "m1" && got[1] != "m2") {
		t.Fatalf("finish_delivered(m1, m2, m3 failed, m9999 unknown) = %v, want m1 and m2", got)
	}
	wantNoSeqScans(t, "finish_delivered", after, scans(), 1)
	var claims, delivered int
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM message_claims WHERE message_id IN ('m1', 'm2', 'm3')),
		(SELECT COUNT(*) FROM messages WHERE status = 'delivered' AND delivered_at = 2 AND sent_at = 1 AND run_at IS NULL)`).Scan(&claims, &delivered); err != nil {
		t.Fatal(err)
	}
	if claims != 0 || delivered != 2 {
		t.Errorf("after finish_delivered: %d claims of m1-m3 left, %d messages delivered; want 0 and 2", claims, delivered)
	}
}

func TestQueuePollsPlan(t *testing.T) {
	// The delivery worker's questions at each poll, queue_due and
	// queue_next, read the queue's partial indexes and the claims' index
	// whatever the tables held when their plans were made: here, nothing.
	ctx := context.Background()
	tx := planTestTx(t)
	scans := func() map[string][2]int64 { return xactScans(t, tx, "messages", "message_claims") }
	ask := func() (due bool, next sql.NullInt64) {
		t.Helper()
		if err := tx.QueryRowContext(ctx, `SELECT queue_due(100), queue_next(100, 200)`).Scan(&due, &next); err != nil {
			t.Fatal(err)
		}
		return due, next
	}
	before := scans()
	for range 6 { // the plans are made at the first call, on empty tables
		if due, next := ask(); due || next.Valid {
			t.Fatalf("empty tables: due %v, next %v", due, next)
		}
	}
	wantNoSeqScans(t, "queue_due and queue_next", before, scans(), 6)
	// 2,000 messages delivered and off the queue, one campaign message due
	// at 150 and a claim that ends at 120.
	if _, err := tx.ExecContext(ctx, `INSERT INTO messages (id, tenant_id, environment, direction, from_number, to_number, body, channel, status, created_at, campaign_id, run_at)
		SELECT 'm' || i, 'tn', 'live', 'outbound', '+15005550000', '+15005550001', 'hi', 'sms', CASE WHEN i = 1 THEN 'queued' ELSE 'delivered' END, 1,
			CASE WHEN i = 1 THEN 'c' END, CASE WHEN i = 1 THEN 150 END
		FROM generate_series(1, 2000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO message_claims (message_id, node, until) SELECT 'm' || i, 'n', 1000 + i FROM generate_series(3, 2000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO message_claims (message_id, node, until) VALUES ('m2', 'n', 120)`); err != nil {
		t.Fatal(err)
	}
	after := scans()
	if due, next := ask(); due || next.Int64 != 120 {
		t.Errorf("at 100: due %v, next %v; want nothing due, the claim's end (120) next", due, next)
	}
	wantNoSeqScans(t, "queue_due and queue_next", after, scans(), 1)
	var due119, due120, due130, due160 bool
	var next130 sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT queue_due(119), queue_due(120), queue_due(130), queue_next(130, 200), queue_due(160)`).Scan(&due119, &due120, &due130, &next130, &due160); err != nil {
		t.Fatal(err)
	}
	if due119 || !due120 || !due130 || next130.Int64 != 150 || !due160 {
		t.Errorf("due at 119 %v, at 120 %v, at 130 %v (next %v), at 160 %v; want false, then due from the claim's end (120), the message's 150 next after 130",
			due119, due120, due130, next130, due160)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM message_claims WHERE message_id = 'm2'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT queue_due(130), queue_due(160)`).Scan(&due130, &due160); err != nil {
		t.Fatal(err)
	}
	if due130 || !due160 {
		t.Errorf("without the claim: due at 130 %v, at 160 %v; want false, true (the campaign message)", due130, due160)
	}
}

func TestClaimDueIdle(t *testing.T) {
	// With nothing due and no claim run out, ClaimDue takes no
	// group-commit transaction (which would hold the sends of its batch);
	// a claim that ran out, or a message due, it does.
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		now := time.Now()
		commits, _ := db.BatchStats()
		if msgs, err := db.ClaimDue(ctx, now, time.Minute, 10); err != nil || len(msgs) != 0 {
			t.Fatalf("ClaimDue on an empty queue = %v, %v", msgs, err)
		}
		if c, _ := db.BatchStats(); c != commits {
			t.Errorf("%d group-commit transactions for a poll with nothing due; want none", c-commits)
		}
		if _, err := db.exec(ctx, `INSERT INTO message_claims (message_id, node, until) VALUES ('gone', 'n', ?)`, sb.Micros(now.Add(-time.Second))); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ClaimDue(ctx, now, time.Minute, 10); err != nil {
			t.Fatal(err)
		}
		var left int
		if err := db.queryRow(ctx, `SELECT COUNT(*) FROM message_claims`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if c, _ := db.BatchStats(); c == commits || left != 0 {
			t.Errorf("a claim that ran out: %d group-commit transactions, %d claims left; want one and none", c-commits, left)
		}
	})
}

// A dead node's takeover (releaseClaims) reaches the messages it held
// through the queue's partial indexes, not by reading the whole table,
// even without statistics (a new table, or autovacuum off).
func TestReleaseClaimsPlan(t *testing.T) {
	db := openTestDB(t, testPostgresURL(t))
	ctx := context.Background()
	if _, err := db.exec(ctx, `INSERT INTO messages (id, tenant_id, environment, direction, from_number, to_number, body, channel, status, created_at, campaign_id, claimed_by, run_at)
		SELECT 'm' || i, 'tn', 'live', 'outbound', '+15005550000', '+15005550001', 'hi', 'sms', 'delivered', 1, CASE WHEN i % 2 = 0 THEN 'c' END, 'dead', NULL
		FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.exec(ctx, `UPDATE messages SET status = 'queued', run_at = 5 WHERE id IN ('m1', 'm2')`); err != nil {
		t.Fatal(err)
	}
	// The counts of the backend's own scans not yet reported (the
	// statements above among them) are the baseline.
	var before, seq, moved int64
	const scans = `SELECT seq_scan FROM pg_stat_xact_user_tables WHERE schemaname = current_schema() AND relname = 'messages'`
	err := db.inTx(ctx, func(tx *Tx) error {
		if err := tx.queryRow(ctx, scans).Scan(&before); err != nil {
			return err
		}
		n, _, err := tx.releaseClaims(ctx, "dead", time.Now())
		if err != nil {
			return err
		}
		moved = int64(n)
		return tx.queryRow(ctx, scans).Scan(&seq)
	})
	seq -= before
	if err != nil {
		t.Fatal(err)
	}
	if moved != 2 || seq != 0 {
		t.Fatalf("releaseClaims moved %d messages with %d sequential scans of messages; want 2 and none", moved, seq)
	}
}

func TestDeviceSweepIdle(t *testing.T) {
	// With no device message due, the device sweeper's search (every two
	// seconds on every node) runs no group-commit transaction, which would
	// hold the sends of its batch until it is done, and on PostgreSQL its
	// question reads the queue's index, not the messages table, even
	// without statistics: with 20,000 messages, none for a device.
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		if db.dialect == Postgres {
			if _, err := db.exec(ctx, `INSERT INTO messages (id, tenant_id, environment, direction, from_number, to_number, body, channel, status, created_at)
				SELECT 'm' || i, 'tn', 'live', 'outbound', '+15005550000', '+15005550001', 'hi', 'sms', 'delivered', 1
				FROM generate_series(1, 20000) i`); err != nil {
				t.Fatal(err)
			}
		}
		commits, _ := db.BatchStats()
		sw, err := db.SweepDeviceMessages(ctx, time.Now(), 500)
		if err != nil || sw != (sb.DeviceSweep{}) {
			t.Fatalf("SweepDeviceMessages = %+v, %v; want nothing", sw, err)
		}
		if c, _ := db.BatchStats(); c != commits {
			t.Errorf("%d group-commit transactions for a sweep with nothing due; want none", c-commits)
		}
		if db.dialect != Postgres {
			return
		}
		// The question as queueCount asks it.
		tx := testTx(t, db)
		if _, err := tx.Exec(`SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(`EXPLAIN `+db.q(deviceDueProbe), sb.Micros(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if p := strings.Join(plan, "\n"); strings.Contains(p, "Seq Scan") || !strings.Contains(p, "messages_device_due") {
			t.Errorf("the sweeper's question reads messages without its index messages_device_due:\n%s", p)
		}
	})
}

func TestGaugesReadClaimsNotMessages(t *testing.T) {
	// The gauges of /metrics count the claimed messages of each lane by
	// reading the claims and each one's message, not the whole messages
	// table: with 20,000 messages and two claims (one of each lane), a
	// scrape fetches a handful of messages' rows, on a table without
	// statistics.
	db := openTestDB(t, testPostgresURL(t))
	ctx := context.Background()
	if _, err := db.exec(ctx, `INSERT INTO messages (id, tenant_id, environment, direction, from_number, to_number, body, channel, status, created_at, campaign_id)
		SELECT 'm' || i, 'tn', 'live', 'outbound', '+15005550000', '+15005550001', 'hi', 'sms', CASE WHEN i <= 2 THEN 'queued' ELSE 'delivered' END, 1,
			CASE WHEN i = 2 THEN 'c' END
		FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	// Every message was claimed once, as under load; the claims of those
	// delivered are deleted (and without a vacuum still take their place).
	if _, err := db.exec(ctx, `INSERT INTO message_claims (message_id, node, until) SELECT id, 'n', 5 FROM messages`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.exec(ctx, `DELETE FROM message_claims WHERE message_id NOT IN ('m1', 'm2')`); err != nil {
		t.Fatal(err)
	}
	g, err := db.Gauges(ctx, sb.Routing{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if g.Queue["direct"] != 1 || g.Queue["campaign"] != 1 {
		t.Errorf("queue gauges %v; want one direct and one campaign message (the claims)", g.Queue)
	}
	// The gauges' statements as queueCount runs them, in a transaction
	// whose backend's counts the test reads.
	tx := testTx(t, db)
	if _, err := tx.Exec(`SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	var before int64
	const fetched = `SELECT COALESCE(idx_tup_fetch, 0) + seq_tup_read FROM pg_stat_xact_user_tables WHERE schemaname = current_schema() AND relname = 'messages'`
	if err := tx.QueryRow(fetched).Scan(&before); err != nil {
		t.Fatal(err)
	}
	for _, q := range gaugeQueries {
		var n int64
		if err := tx.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	var after int64
	if err := tx.QueryRow(fetched).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if n := after - before; n > 10 {
		t.Errorf("the gauges read %d rows of messages for two claims; want a handful", n)
	}
}

// planTestTx opens the test's PostgreSQL schema and begins a transaction on
// one connection, rolled back when the test ends: the tests of a plan made
// once per connection count the scans of that connection's backend.
func planTestTx(t *testing.T) *sql.Tx {
	t.Helper()
	return testTx(t, openTestDBOptions(t, testPostgresURL(t), Options{MaxConns: 2, Writers: 1}))
}

// testTx begins a transaction of db on one connection, rolled back when the
// test ends.
func testTx(t *testing.T, db *DB) *sql.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := db.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

// xactScans returns the sequential and index scans of the tables rels that
// tx's backend has counted and not reported yet (pg_stat_xact_user_tables).
func xactScans(t *testing.T, tx *sql.Tx, rels ...string) map[string][2]int64 {
	t.Helper()
	rows, err := tx.QueryContext(context.Background(), `SELECT relname, seq_scan, COALESCE(idx_scan, 0) FROM pg_stat_xact_user_tables
		WHERE schemaname = current_schema() AND relname = ANY($1)`, rels)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][2]int64{}
	for rows.Next() {
		var rel string
		var seq, idx int64
		if err := rows.Scan(&rel, &seq, &idx); err != nil {
			t.Fatal(err)
		}
		out[rel] = [2]int64{seq, idx}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(rels) {
		t.Fatalf("pg_stat_xact_user_tables: %v, want %v", out, rels)
	}
	return out
}

// wantNoSeqScans fails the test unless calls calls of fn, between the
// counts before and after, scanned no table sequentially and each table by
// an index at least once a call.
func wantNoSeqScans(t *testing.T, fn string, before, after map[string][2]int64, calls int64) {
	t.Helper()
	for rel, n := range after {
		if seq, idx := n[0]-before[rel][0], n[1]-before[rel][1]; seq != 0 || idx < calls {
			t.Errorf("%s: %d sequential scans and %d index scans in %d calls of %s; want none and at least %d", rel, seq, idx, calls, fn, calls)
		}
	}
}
