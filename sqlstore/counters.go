package sqlstore

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Daily counters across nodes. Every send is counted on its phone's daily
// counter, and a send to a new recipient on the tenant's new_contacts. With
// one row per counter, every group-commit writer of every node updated the
// same rows and held their locks until its batch committed: on PostgreSQL
// the nodes took turns, and a tenant's sends got slower as nodes were added.
//
// Counting: a counter is the sum of its shards (daily_counters.shard). Each
// writer adds what its batch counted to a shard of its own, in one statement
// right before the commit (flushBumps); a node's writers have distinct
// shards, and nodes draw theirs at random among counterShards, so two
// writers share a row only by chance. Readers SUM the shards.
//
// Limits: a counter with a daily limit (a phone's daily_limit, the plan's
// new contacts per day) is spent from blocks of the limit that a node
// reserves in daily_reservations, one short transaction per block
// (reserveBlock), and spends in memory (take); the send still counts on the
// writer's shard. A block is at most blockMax units and at most
// 1/blockDiv of what the limit has left, so near the limit blocks shrink to
// one unit and the nodes still sending share what is left. What a node
// holds and does not use goes back to the pool when the node has not spent
// from it for idleGiveBack, and when it closes.
//
// Exactness: a counter never goes over its limit, whatever the number of
// nodes and whether or not they crash: every counted send spends a unit of
// a committed reservation, and a reservation never takes reserved past the
// limit (counting from the larger of reserved and the counter's sum, so
// that sends counted while the counter had no limit count too). It can stop
// short of the limit for a while: a node that finds the pool empty refuses
// for emptyRetry before it looks again, while other live nodes hold units
// they have not spent (at most a block each, given back within
// idleGiveBack of their last use); and a node that dies (kill -9) takes
// the units it held (a block per counter, or two when its writers reserved
// at the same moment) with it until the day ends. A lower limit applies on a node once it has read the phone again
// (its phone cache, at most a second); units it held under the old limit
// go back to the pool.
const (
	counterShards = 256
	blockMax      = 64
	blockDiv      = 8
	idleGiveBack  = time.Second
	emptyRetry    = 250 * time.Millisecond
	settleWait    = 250 * time.Millisecond
)

// LimitStats are this node's reservations of daily limits since it
// started (see counters.go), for /metrics.
type LimitStats struct {
	Blocks      int64 // blocks reserved
	Units       int64 // units in them
	Empty       int64 // reservations that found the limit used up
	GivenBack   int64 // units given back to the pool (idle, at close, a changed limit)
	Held        int64 // units held now, not spent yet
	ShardWrites int64 // counter shard rows written by commits
}

// LimitStats returns this node's reservations of daily limits.
func (db *DB) LimitStats() LimitStats {
	st := LimitStats{Blocks: db.limits.blocks.Load(), Units: db.limits.units.Load(), Empty: db.limits.empty.Load(),
		GivenBack: db.limits.givenBack.Load(), ShardWrites: db.limits.shardWrites.Load()}
	db.allow.mu.Lock()
	for _, e := range db.allow.m {
		st.Held += e.avail
	}
	db.allow.mu.Unlock()
	return st
}

type limitCounters struct{ blocks, units, empty, givenBack, shardWrites atomic.Int64 }

// allowances are the units of limited counters this node has reserved and
// not spent yet.
type allowances struct {
	mu sync.Mutex
	m  map[counterKey]*allowance
	// settled is closed (and replaced) whenever a transaction settles a
	// unit it took (see waitOthers).
	settled chan struct{}
}

type allowance struct {
	avail    int64
	inflight int       // units taken by transactions not ended yet
	limit    int       // the limit the units were reserved under
	used     time.Time // last spent or reserved
	empty    time.Time // when a reservation last found nothing left
}

func (a *allowances) entry(k counterKey) *allowance {
	if a.m == nil {
		a.m = map[counterKey]*allowance{}
	}
	e := a.m[k]
	if e == nil {
		e = &allowance{}
		a.m[k] = e
	}
	return e
}

// take spends one unit of k. When it has none it says whether to reserve a
// block (reserve) or to refuse (the pool was found empty within
// emptyRetry). Units held under another limit come out as giveBack.
func (a *allowances) take(k counterKey, limit int, now time.Time) (ok, reserve bool, giveBack int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(k)
	if e.limit != limit {
		giveBack, e.avail, e.limit, e.empty = e.avail, 0, limit, time.Time{}
	}
	if e.avail > 0 {
		e.avail--
		e.inflight++
		e.used = now
		return true, false, giveBack
	}
	return false, now.Sub(e.empty) >= emptyRetry, giveBack
}

// started notes a unit a transaction took out of a block it reserved.
func (a *allowances) started(k counterKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entry(k).inflight++
}

// settle ends a unit a transaction took: spent, or given back to the node
// (back).
func (a *allowances) settle(k counterKey, limit int, back bool, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(k)
	e.inflight--
	if back {
		if e.limit == 0 {
			e.limit = limit
		}
		e.avail++
		e.used = now
	}
	if a.settled != nil {
		close(a.settled)
		a.settled = nil
	}
}

// waitOthers waits, up to d, for a transaction to settle a unit when
// other transactions (the caller holds no unit of k) have units of k in
// flight: one that fails gives its unit back. It reports whether it
// waited.
func (a *allowances) waitOthers(k counterKey, d time.Duration) bool {
	a.mu.Lock()
	e := a.m[k]
	if e != nil && e.avail > 0 {
		a.mu.Unlock()
		return true // a unit came back meanwhile
	}
	if d <= 0 || e == nil || e.inflight == 0 {
		a.mu.Unlock()
		return false
	}
	if a.settled == nil {
		a.settled = make(chan struct{})
	}
	ch := a.settled
	a.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
	return true
}

// add gives n units of k to the node (a reserved block, units a
// transaction took and did not spend).
func (a *allowances) add(k counterKey, limit int, n int64, now time.Time) {
	if n <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.entry(k)
	if e.limit == 0 {
		e.limit = limit
	}
	e.avail += n
	e.used = now
}

func (a *allowances) markEmpty(k counterKey, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entry(k).empty = now
}

// forgetEmpty makes the next take of the tenant's counters look at the pool
// again (its phones' limits changed).
func (a *allowances) forgetEmpty(tenantID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, e := range a.m {
		if k.tenantID == tenantID {
			e.empty = time.Time{}
		}
	}
}

// idle takes out the units not spent for idle (all of them when idle is
// 0), to give back, and forgets the counters of days before today's.
func (a *allowances) idle(now time.Time, idle time.Duration) map[counterKey]int64 {
	today := sb.Day(now)
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[counterKey]int64{}
	for k, e := range a.m {
		if k.day < today {
			delete(a.m, k) // the day is over: nothing to give back
			continue
		}
		if e.avail > 0 && now.Sub(e.used) >= idle {
			out[k], e.avail = e.avail, 0
		}
		if e.avail == 0 && e.inflight == 0 && now.Sub(e.used) >= time.Minute && now.Sub(e.empty) >= emptyRetry {
			delete(a.m, k)
		}
	}
	return out
}

// held returns the units of k this node holds.
func (a *allowances) held(k counterKey) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.m[k]; e != nil {
		return e.avail
	}
	return 0
}

// taken is a unit a transaction took from a limited counter: from the
// node's allowance, or (SQLite) from a block it reserved itself (pending).
type taken struct {
	key     counterKey
	limit   int
	pending bool
}

// take spends a unit of the limited counter k (limit > 0) for this
// transaction's work, reserving a block first when the node has none. It
// reports false when the limit is reached: after waiting, up to
// settleWait, for the units other transactions of this node have in
// flight, since one that fails (a recipient another made known at the same
// time) gives its unit back; waited says that it waited, and what the
// others committed meanwhile may change the caller's checks. The unit goes
// back to the node if the work fails (untake) or the transaction rolls
// back; the caller counts the send with bumpLater once its checks are done.
func (t *Tx) take(ctx context.Context, k counterKey, limit int) (ok bool, err error) {
	ok, _, err = t.takeWaited(ctx, k, limit)
	return ok, err
}

func (t *Tx) takeWaited(ctx context.Context, k counterKey, limit int) (ok, waited bool, err error) {
	if t.pending[k] > 0 {
		t.pending[k]--
		t.takes = append(t.takes, taken{k, limit, true})
		return true, false, nil
	}
	deadline := time.Now().Add(settleWait)
	for {
		now := time.Now()
		ok, reserve, back := t.db.allow.take(k, limit, now)
		if back > 0 {
			t.db.giveBack(ctx, t, k, back)
		}
		if ok {
			t.takes = append(t.takes, taken{k, limit, false})
			return true, waited, nil
		}
		if reserve {
			got, err := t.reserveBlock(ctx, k, limit)
			if err != nil {
				return false, waited, err
			}
			if got > 0 {
				if t.db.dialect == Postgres {
					t.db.allow.add(k, limit, got-1, now)
					t.db.allow.started(k)
					t.takes = append(t.takes, taken{k, limit, false})
				} else {
					if t.pending == nil {
						t.pending = map[counterKey]int64{}
					}
					t.pending[k] += got - 1
					t.takes = append(t.takes, taken{k, limit, true})
				}
				return true, waited, nil
			}
			t.db.allow.markEmpty(k, now)
		}
		// Only a transaction that holds no unit of k waits: one that
		// holds some may be what the others wait for.
		for _, u := range t.takes {
			if u.key == k {
				return false, waited, nil
			}
		}
		if !t.db.allow.waitOthers(k, time.Until(deadline)) {
			return false, waited, nil
		}
		waited = true
	}
}

// untake gives back the units taken since mark (a len of t.takes): the
// work that took them failed.
func (t *Tx) untake(mark int) {
	if mark >= len(t.takes) {
		return
	}
	now := time.Now()
	for _, u := range t.takes[mark:] {
		if u.pending {
			t.pending[u.key]++
		} else {
			t.db.allow.settle(u.key, u.limit, true, now)
		}
	}
	t.takes = t.takes[:mark]
}

// returnTake gives back the last unit taken of k, which the work does not
// spend after all.
func (t *Tx) returnTake(k counterKey) {
	for i := len(t.takes) - 1; i >= 0; i-- {
		if t.takes[i].key == k {
			u := t.takes[i]
			t.takes = slices.Delete(t.takes, i, i+1)
			if u.pending {
				t.pending[k]++
			} else {
				t.db.allow.settle(k, u.limit, true, time.Now())
			}
			return
		}
	}
}

// endTakes settles the units when the transaction ends: committed (or
// perhaps committed: lost), the units are spent, and the blocks it reserved
// itself and did not spend become the node's; rolled back, the units it
// took from the node go back to it (those of its own blocks are gone with
// the blocks).
func (t *Tx) endTakes(committed, lost bool) {
	now := time.Now()
	if committed {
		for k, n := range t.pending {
			limit := 0
			for _, u := range t.takes {
				if u.key == k {
					limit = u.limit
				}
			}
			t.db.allow.add(k, limit, n, now)
		}
	}
	for _, u := range t.takes {
		if !u.pending {
			t.db.allow.settle(u.key, u.limit, !committed && !lost, now)
		}
	}
	t.takes, t.pending = nil, nil
}

// reserveBlock reserves a block of the limited counter k for this node and
// returns its size, 0 when nothing is left. On PostgreSQL it runs in a
// short transaction of its own, so that the pool's row is locked only for
// that and never by a batch (which would make every node's reservations
// wait for the batch's commit, or a writer wait for itself); on SQLite, in
// the writer's transaction.
func (t *Tx) reserveBlock(ctx context.Context, k counterKey, limit int) (int64, error) {
	if t.db.dialect != Postgres {
		got, err := t.grant(ctx, k, limit)
		if err == nil {
			t.db.limits.reserved(got) // when the writer's transaction commits
		}
		return got, err
	}
	ctx = context.WithoutCancel(ctx)
	r, err := t.db.begin(ctx) // waits for a connection at most the pool's wait
	if err != nil {
		return 0, err
	}
	got, err := r.grant(ctx, k, limit)
	if err != nil {
		r.rollback()
		return 0, err
	}
	if err := r.commit(ctx); err != nil {
		return 0, err
	}
	t.db.limits.reserved(got)
	return got, nil
}

func (c *limitCounters) reserved(got int64) {
	if got == 0 {
		c.empty.Add(1)
		return
	}
	c.blocks.Add(1)
	c.units.Add(got)
}

// grant takes a block of k's limit in the pool.
func (t *Tx) grant(ctx context.Context, k counterKey, limit int) (int64, error) {
	var reserved int64
	// The no-op update locks the row (PostgreSQL) and returns it, created
	// if this is the counter's first reservation of the day.
	err := t.queryRow(ctx, `INSERT INTO daily_reservations (tenant_id, environment, counter, day, reserved) VALUES (?, ?, ?, ?, 0)
		ON CONFLICT (tenant_id, environment, counter, day) DO UPDATE SET reserved = daily_reservations.reserved RETURNING reserved`,
		k.tenantID, string(k.env), k.name, k.day).Scan(&reserved)
	if err != nil {
		return 0, err
	}
	counted, err := t.counter(ctx, k.tenantID, k.env, k.name, k.day)
	if err != nil {
		return 0, err
	}
	base := max(reserved, counted)
	left := int64(limit) - base
	if left <= 0 {
		return 0, nil
	}
	g := min(blockMax, max(1, left/blockDiv))
	if _, err := t.exec(ctx, `UPDATE daily_reservations SET reserved = ? WHERE tenant_id = ? AND environment = ? AND counter = ? AND day = ?`,
		base+g, k.tenantID, string(k.env), k.name, k.day); err != nil {
		return 0, err
	}
	return g, nil
}

// giveBack returns n units of k to the pool. On SQLite it writes in tx
// (the writer's transaction) or, when tx is nil, through the writer; on
// PostgreSQL always on a connection of its own (see reserveBlock). A
// failure is logged: the units stay reserved until the day ends, which
// keeps the limit.
func (db *DB) giveBack(ctx context.Context, tx *Tx, k counterKey, n int64) {
	const q = `UPDATE daily_reservations SET reserved = CASE WHEN reserved > ? THEN reserved - ? ELSE 0 END
		WHERE tenant_id = ? AND environment = ? AND counter = ? AND day = ?`
	args := []any{n, n, k.tenantID, string(k.env), k.name, k.day}
	var err error
	switch {
	case db.dialect == Postgres:
		_, err = db.exec(context.WithoutCancel(ctx), q, args...)
	case tx != nil:
		_, err = tx.exec(ctx, q, args...)
	default:
		err = db.Write(ctx, func(tx *Tx) error {
			_, err := tx.exec(ctx, q, args...)
			return err
		})
	}
	if err == nil {
		db.limits.givenBack.Add(n)
	}
	if err != nil {
		slog.Warn("giving back reserved units of a daily limit", "tenant_id", k.tenantID, "environment", string(k.env),
			"counter", k.name, "day", k.day, "units", n, "err", err)
	}
}

// giveBackIdle gives back the units this node has not spent for idle (all
// of them when idle is 0).
func (db *DB) giveBackIdle(ctx context.Context, idle time.Duration) {
	back := db.allow.idle(time.Now(), idle)
	for _, k := range slices.SortedFunc(func(yield func(counterKey) bool) {
		for k := range back {
			if !yield(k) {
				return
			}
		}
	}, compareCounterKeys) {
		db.giveBack(ctx, nil, k, back[k])
	}
}

// allowanceLoop gives back idle units every idleGiveBack until stop closes.
func (db *DB) allowanceLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(idleGiveBack)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			db.giveBackIdle(context.Background(), idleGiveBack)
		}
	}
}

func compareCounterKeys(a, b counterKey) int {
	return cmp.Or(cmp.Compare(a.tenantID, b.tenantID), cmp.Compare(a.env, b.env), cmp.Compare(a.name, b.name), cmp.Compare(a.day, b.day))
}

// newShardBase draws the first of this process's shards.
func newShardBase() int { return rand.IntN(counterShards) }

// counter returns the sum of a daily counter's shards.
func (t *Tx) counter(ctx context.Context, tenantID string, env sb.Environment, name, day string) (int64, error) {
	return counterSum(t.queryRow(ctx, counterQuery, tenantID, string(env), name, day))
}

const counterQuery = `SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM daily_counters
	WHERE tenant_id = ? AND environment = ? AND counter = ? AND day = ?`

func counterSum(row interface{ Scan(...any) error }) (int64, error) {
	var n int64
	err := row.Scan(&n)
	return n, err
}

// NewContactsToday returns how many first-time recipients the tenant has
// messaged on day.
func (db *DB) NewContactsToday(ctx context.Context, tenantID string, env sb.Environment, day string) (int64, error) {
	return counterSum(db.queryRow(ctx, counterQuery, tenantID, string(env), "new_contacts", day))
}

// Counter returns the sum of a daily counter (a phone's is "phone:" and its
// id), for tests and operators.
func (db *DB) Counter(ctx context.Context, tenantID string, env sb.Environment, name, day string) (int64, error) {
	return counterSum(db.queryRow(ctx, counterQuery, tenantID, string(env), name, day))
}
