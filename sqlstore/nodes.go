package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Node liveness (PostgreSQL). Every node registers in the nodes table under
// its id (NodeID, random per process) and beats; a live node that finds
// another's beat older than the dead-after limit marks it dead and, in the
// same transaction, makes the dead node's claims due again (TakeOverDead).
// Beats and the dead-after comparison use the database's clock, so that a
// node whose clock is off neither declares others dead early nor looks dead
// itself.
//
// The conditional UPDATE of the node's row is what makes one node, and only
// one, take a dead node's work over: PostgreSQL makes a second concurrent
// UPDATE of the row wait for the first and then see dead_at already set.

// dbClock is the database's clock in microseconds since the epoch.
const dbClock = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT`

// deadNodeRetention is how long the row of a dead node is kept.
const deadNodeRetention = time.Hour

// NodeID returns this process's node id: it names the claims the process
// holds and its row in the nodes table.
func (db *DB) NodeID() string { return db.node }

// Redeliveries returns what this process made due again or claimed again
// (see sb.Redeliveries), since it started.
func (db *DB) Redeliveries() sb.Redeliveries {
	return sb.Redeliveries{
		TakeoverMessages: db.redelivered.takeoverMessages.Load(), TakeoverDeliveries: db.redelivered.takeoverDeliveries.Load(),
		LeaseMessages: db.redelivered.leaseMessages.Load(), LeaseDeliveries: db.redelivered.leaseDeliveries.Load(),
	}
}

var errNodesNeedPostgres = errors.New("node liveness needs PostgreSQL (one SQLite file has one node)")

// hostID names the machine this process runs on: Linux's boot id, which
// processes in containers of one machine share too, else the host name.
func hostID() string {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id
		}
	}
	name, _ := os.Hostname()
	return name
}

// liveNodes tells Options.HostNodes how many live nodes share this one's
// machine, and adapts the node's group-commit writers to the number of
// live nodes (autoWriters), unless Options.Writers fixed them.
func (db *DB) liveNodes(n, onHost int) {
	if f := db.pool.opt.HostNodes; f != nil {
		f(onHost)
	}
	if db.fixedWriters {
		return
	}
	if w := autoWriters(n); db.batch.setActive(w) {
		db.pool.opt.Log.Info("group-commit writers changed with the live nodes", "node_id", db.node, "live_nodes", n, "writers", w)
	}
}

// NodeCounts returns how many nodes are registered and live (dead_at not
// set: beating, or silent and not found dead yet) and how many were declared
// dead in the last hour.
func (db *DB) NodeCounts(ctx context.Context) (live, dead int, err error) {
	if db.dialect != Postgres {
		return 0, 0, errNodesNeedPostgres
	}
	err = db.queryRow(ctx, `SELECT COUNT(*) FILTER (WHERE dead_at IS NULL), COUNT(*) FILTER (WHERE dead_at IS NOT NULL) FROM nodes`).Scan(&live, &dead)
	return live, dead, err
}

// RegisterNode records this node as live, beating now; addr is the address
// it listens on, for the operator.
func (db *DB) RegisterNode(ctx context.Context, addr string) error {
	if db.dialect != Postgres {
		return errNodesNeedPostgres
	}
	_, err := db.exec(ctx, `INSERT INTO nodes (id, addr, host, started_at, heartbeat_at) VALUES (?, ?, ?, `+dbClock+`, `+dbClock+`)
		ON CONFLICT (id) DO UPDATE SET addr = EXCLUDED.addr, host = EXCLUDED.host, heartbeat_at = EXCLUDED.heartbeat_at, dead_at = NULL, dead_by = NULL`,
		db.node, addr, db.host)
	return err
}

// Heartbeat records that this node is alive. When another node had
// declared it dead meanwhile (it was paused, or could not reach the
// database, for longer than the dead-after limit), its claims have been
// taken over: Heartbeat registers it again and returns the node that
// declared it dead (or "" when its row was gone).
func (db *DB) Heartbeat(ctx context.Context, addr string) (declaredDeadBy string, wasDead bool, err error) {
	if db.dialect != Postgres {
		return "", false, errNodesNeedPostgres
	}
	// The beat has a connection of its own: waiting for the pool, a busy
	// node would miss beats and be declared dead.
	// It also counts the live nodes, which sets how many group-commit
	// writers this one runs (autoWriters), and those on its machine.
	var live, onHost int
	err = db.beat.QueryRowContext(ctx, db.q(`UPDATE nodes SET heartbeat_at = `+dbClock+` WHERE id = ? AND dead_at IS NULL
		RETURNING (SELECT COUNT(*) FROM nodes WHERE dead_at IS NULL),
			(SELECT COUNT(*) FROM nodes WHERE dead_at IS NULL AND host = ?)`), db.node, db.host).Scan(&live, &onHost)
	if err == nil {
		db.liveNodes(live, onHost)
		return "", false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, db.classify(err)
	}
	var by sql.NullString
	if err := db.queryRow(ctx, `SELECT dead_by FROM nodes WHERE id = ?`, db.node).Scan(&by); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", false, err
	}
	return by.String, true, db.RegisterNode(ctx, addr)
}

// TakeOverDead marks dead every other node whose last beat is older than
// deadAfter and makes its claimed messages and leased webhook deliveries
// due at now, all in one transaction; it returns what it moved, one entry
// per node it declared dead. Rows of nodes dead for an hour are deleted.
func (db *DB) TakeOverDead(ctx context.Context, deadAfter time.Duration, now time.Time) ([]sb.Takeover, error) {
	if db.dialect != Postgres {
		return nil, errNodesNeedPostgres
	}
	var out []sb.Takeover
	err := db.inTx(ctx, func(tx *Tx) error {
		rows, err := tx.query(ctx, `UPDATE nodes SET dead_at = `+dbClock+`, dead_by = ?
			WHERE dead_at IS NULL AND id <> ? AND heartbeat_at < `+dbClock+` - ? RETURNING id, heartbeat_at, dead_at`,
			db.node, db.node, deadAfter.Microseconds())
		if err != nil {
			return err
		}
		for rows.Next() {
			var t sb.Takeover
			var beat, dead int64
			if err := rows.Scan(&t.Node, &beat, &dead); err != nil {
				rows.Close()
				return err
			}
			t.LastHeartbeat, t.DeclaredDead = sb.FromMicros(beat), sb.FromMicros(dead)
			out = append(out, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range out {
			if out[i].Messages, out[i].Deliveries, err = tx.releaseClaims(ctx, out[i].Node, now); err != nil {
				return err
			}
		}
		_, err = tx.exec(ctx, `DELETE FROM nodes WHERE dead_at < `+dbClock+` - ?`, deadNodeRetention.Microseconds())
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, t := range out {
		db.redelivered.takeoverMessages.Add(int64(t.Messages))
		db.redelivered.takeoverDeliveries.Add(int64(t.Deliveries))
		if t.Messages > 0 {
			db.wakeMessages()
		}
		if t.Deliveries > 0 {
			db.wakeWebhooks()
		}
	}
	return out, nil
}

// LeaveCluster is a clean stop: it makes this node's claimed messages and
// leased deliveries due at now, for the other nodes, and deletes its row.
// Call it once this node's workers have stopped.
func (db *DB) LeaveCluster(ctx context.Context, now time.Time) (sb.Takeover, error) {
	t := sb.Takeover{Node: db.node}
	if db.dialect != Postgres {
		return t, errNodesNeedPostgres
	}
	err := db.inTx(ctx, func(tx *Tx) error {
		var err error
		if t.Messages, t.Deliveries, err = tx.releaseClaims(ctx, db.node, now); err != nil {
			return err
		}
		_, err = tx.exec(ctx, `DELETE FROM nodes WHERE id = ?`, db.node)
		return err
	})
	return t, err
}

// releaseClaims makes the messages node has claimed (queued, or sent and
// waiting for their outcome) and the webhook deliveries it has leased due at
// now, unclaimed. Its claims are deleted first, each by one transaction
// only (as sweepClaims does), and their messages put back in the queue;
// then the messages still in the queue under its name (claims that ran
// out, and claims made before message_claims) are made due. These
// statements follow the queues' partial indexes (one per lane of
// messages), which hold only the outstanding work: on PostgreSQL with
// sequential scans priced out, since without statistics the planner reads
// the whole messages table for the campaign lane, and a takeover must take
// seconds at most whatever the table holds.
func (t *Tx) releaseClaims(ctx context.Context, node string, now time.Time) (msgs, dels int, err error) {
	if t.db.dialect == Postgres {
		if _, err := t.exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return 0, 0, err
		}
	}
	rows, err := t.query(ctx, `DELETE FROM message_claims WHERE node = ? RETURNING message_id`, node)
	if err != nil {
		return 0, 0, err
	}
	ids, err := scanIDs(rows)
	if err != nil {
		return 0, 0, err
	}
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		in, args := t.db.inIDs("id", ids[:n])
		res, err := t.exec(ctx, `UPDATE messages SET run_at = ?, claimed_by = NULL WHERE `+in+` AND status IN ('queued', 'sent')`,
			t.db.planEach(append([]any{sb.Micros(now)}, args...)...)...)
		if err != nil {
			return 0, 0, err
		}
		k, _ := res.RowsAffected()
		msgs += int(k)
		ids = ids[n:]
	}
	for _, lane := range []string{"campaign_id IS NULL", "campaign_id IS NOT NULL"} {
		res, err := t.exec(ctx, `UPDATE messages SET run_at = ?, claimed_by = NULL
			WHERE run_at IS NOT NULL AND `+lane+` AND claimed_by = ? AND status IN ('queued', 'sent')`, sb.Micros(now), node)
		if err != nil {
			return 0, 0, err
		}
		n, _ := res.RowsAffected()
		msgs += int(n)
	}
	res, err := t.exec(ctx, `UPDATE webhook_deliveries SET next_attempt_at = ?, leased = 0, claimed_by = NULL
		WHERE next_attempt_at IS NOT NULL AND leased = 1 AND claimed_by = ? AND status = 'pending'`, sb.Micros(now), node)
	if err != nil {
		return 0, 0, err
	}
	n, _ := res.RowsAffected()
	return msgs, int(n), nil
}
