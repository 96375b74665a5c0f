package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"

	sb "github.com/switchboard/switchboard"
)

// Group commit. Durable writes on the hot paths (accepting a send, claiming
// and finishing deliveries) go through a few writer goroutines that run many
// callers' work in one transaction: one commit, one fsync, for a whole batch.
// A caller returns only after the batch has committed, so an answer never
// gets ahead of the disk.
//
// The rule for work run through Write: make every check before the first
// write. A check that fails returns an *sb.Error (or *ErrReplay) having
// written nothing, and the batch goes on without it; any other error aborts
// the batch, which is then run again one caller per transaction, so one
// caller's failure never undoes another's work.

const maxBatch = 256

type batchReq struct {
	ctx  context.Context
	fn   func(*Tx) error
	err  error
	done chan struct{}
	// reads is what fn reads first, which the writer reads for several
	// callers at once before it runs them (see Tx.prefetch); zero when
	// nothing.
	reads rcpKey
}

type batcher struct {
	db    *DB
	queue chan *batchReq
	wg    sync.WaitGroup
	stop  chan struct{}
	// keepConns says the writers keep their connections between
	// transactions (keptConn): on PostgreSQL, when that leaves the rest
	// of the node more connections than the writers hold.
	keepConns bool

	// active is how many of the writers take work; the others wait for
	// wake to be closed (see setActive).
	active atomic.Int32
	mu     sync.Mutex
	wake   chan struct{}

	// turn is the right to commit, held by one writer at a time (see
	// awaitTurn); turnWait is how long a writer waits for it, in
	// nanoseconds (turnWait by default; tests change it).
	turn     chan struct{}
	turnWait atomic.Int64

	// commits counts the writers' transactions (committed or tried) and
	// writes the callers' work they ran: see DB.BatchStats.
	commits, writes atomic.Int64
}

// newBatcher starts writers writer goroutines, active of which take work.
func newBatcher(db *DB, writers, active int) *batcher {
	b := &batcher{db: db, queue: make(chan *batchReq, 4096), stop: make(chan struct{}), wake: make(chan struct{}),
		turn: make(chan struct{}, 1)}
	b.turn <- struct{}{}
	b.turnWait.Store(int64(turnWait))
	b.keepConns = db.dialect == Postgres && db.pool.opt.MaxConns > 2*writers
	b.active.Store(int32(min(max(active, 1), writers)))
	for i := 0; i < writers; i++ {
		b.wg.Add(1)
		go b.loop(i, (db.shardBase+i)%counterShards)
	}
	return b
}

// How many writers a PostgreSQL node runs. Each writer keeps a transaction
// open while callers come, so the writers of all the nodes are the
// transactions that write to the database at once. Measured on one
// machine, two writers serve a
// lone node best, and nodes sharing a database lose throughput as soon as
// the cluster runs more writers than that: their transactions insert into
// the same last pages of the messages table's indexes and wait for each
// other there, and every extra transaction costs the database a commit.
// A node alone therefore runs two writers and a node with others one,
// so that the cluster's total grows by one per node, not two or four;
// the heartbeat tells a node how many live nodes there are (Heartbeat).
const maxAutoWriters = 2

func autoWriters(liveNodes int) int {
	if liveNodes <= 1 {
		return maxAutoWriters
	}
	return 1
}

// setActive lets n writers take work (at least one, at most those
// started); writers beyond n finish their batch and wait.
func (b *batcher) setActive(n int) (changed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if int32(n) == b.active.Load() {
		return false
	}
	b.active.Store(int32(n))
	close(b.wake)
	b.wake = make(chan struct{})
	return true
}

// idle waits while writer i is not active; it reports false when the
// batcher stops.
func (b *batcher) idle(i int) bool {
	for int32(i) >= b.active.Load() {
		b.mu.Lock()
		wake := b.wake
		b.mu.Unlock()
		if int32(i) < b.active.Load() {
			break
		}
		select {
		case <-wake:
		case <-b.stop:
			return false
		}
	}
	return true
}

// Writers returns how many group-commit writers take work now.
func (db *DB) Writers() int { return int(db.batch.active.Load()) }

func (b *batcher) close() {
	close(b.stop)
	b.wg.Wait()
}

var reqPool = sync.Pool{New: func() any { return &batchReq{done: make(chan struct{}, 1)} }}

// Write runs fn in a transaction shared with other concurrent writers and
// returns once that transaction has committed (or fn's error). fn may run
// more than once (when its batch has to be retried), so it must keep its
// results in variables it sets afresh on every run.
func (db *DB) Write(ctx context.Context, fn func(*Tx) error) error {
	return db.writeReading(ctx, fn, rcpKey{})
}

// writeReading is Write for work whose first reads are the recipient
// reads and its tenant's phones' version: the writer takes what the node
// kept of them (Tx.assume) and reads the rest for all the callers waiting
// at once, in one round trip (see Tx.prefetch).
func (db *DB) writeReading(ctx context.Context, fn func(*Tx) error, reads rcpKey) error {
	r := reqPool.Get().(*batchReq)
	r.ctx, r.fn, r.err, r.reads = ctx, fn, nil, reads
	select {
	case db.batch.queue <- r:
	case <-ctx.Done():
		reqPool.Put(r)
		return ctx.Err()
	}
	<-r.done // the writer always answers, even after ctx ends
	err := r.err
	r.ctx, r.fn = nil, nil
	reqPool.Put(r)
	return err
}

// The writer runs each caller's work as soon as it arrives, in a
// transaction it keeps open while more callers come: a batch is not
// collected first and run afterwards. It commits when no caller is waiting,
// or, after a batch of at least lingerMin callers, once no caller has come
// for lingerGap (or lingerMax has passed since the batch began). Under load
// callers come back in cohorts (those of the batch that just committed send
// their next request while the following batch runs), and a writer that
// committed whenever its queue was empty would settle into many small
// batches, each paying a whole commit: its pages written to the WAL and an
// fsync. Lingering merges the cohorts, and since the work of each caller
// that arrives meanwhile is done at once, the wait costs the writer nothing
// it could have spent on them. A light load never waits: the linger only
// follows a batch of at least lingerMin callers.
const (
	lingerMin = 2
	lingerGap = 50 * time.Microsecond
	lingerMax = 500 * time.Microsecond
)

// A node's writers commit in turn. A writer whose batch is ready while
// another writer's commit is in flight waits for that commit to come back,
// for up to turnWait, and goes on taking the callers that come meanwhile:
// the callers of one commit's round trip join the next commit instead of
// making a third. Measured with one node (two writers) on PostgreSQL
// (the send bench): 19-24 sends a commit
// instead of 16-17, and 5-20% less of PostgreSQL's CPU a send. The wait is
// bounded so that a commit that hangs (a lock, a slow disk) holds the
// other writer back by turnWait at most, not for as long as it hangs.
const turnWait = 500 * time.Microsecond

// awaitTurn waits for the turn to commit (see turnWait), running the
// callers that come meanwhile in tx as take does. It reports the batch,
// whether the transaction can go on, and whether the writer holds the
// turn, which it then gives back once its commit is back.
func (b *batcher) awaitTurn(tx *Tx, batch []*batchReq, timer *time.Timer) (_ []*batchReq, ok, haveTurn bool) {
	timer.Reset(time.Duration(b.turnWait.Load()))
	defer timer.Stop()
	for len(batch) < maxBatch {
		select {
		case <-b.turn:
			return batch, true, true
		case r := <-b.queue:
			if batch, ok = b.take(tx, append(batch, r), len(batch)); !ok {
				return batch, false, false
			}
		case <-timer.C:
			return batch, true, false
		}
	}
	return batch, true, false
}

// keptConn is the PostgreSQL connection a writer keeps from one
// transaction to the next, so that under load its transactions run on one
// PostgreSQL backend and do not go through the pool. Through the pool, a
// writer's transactions ran on whichever connection was free, since the
// node's reads take connections in between: with three nodes, their three
// writers' transactions ran on 17 backends, each woken in turn with its
// caches cold. A writer that had nothing to do for keptIdle gives its
// connection back (loop), so a connection kept never sat idle longer than
// the pool's own check of idle connections (pgx's ping after a second) lets
// one go unchecked; a writer made inactive, or about to run a batch again
// the careful way, gives it back at once. Writers keep none when that
// would leave the rest of the node fewer connections than they hold
// (batcher.keepConns): with --db-max-conns 1, a kept connection would
// turn every other request away for as long as it is kept.
type keptConn struct {
	conn  *sql.Conn
	timer *time.Timer
}

const keptIdle = time.Second

// take returns the connection kept, if any, and holds it no longer.
func (k *keptConn) take() *sql.Conn {
	if k == nil {
		return nil
	}
	c := k.conn
	k.conn = nil
	return c
}

// keep holds c for the writer's next transaction; false when there is no
// writer to hold it (k is nil) or it holds one already.
func (k *keptConn) keep(c *sql.Conn) bool {
	if k == nil || k.conn != nil {
		return false
	}
	k.conn = c
	return true
}

// idle returns a channel ready once the connection kept has gone unused
// for keptIdle from now; nil, never ready, when none is kept.
func (k *keptConn) idle() <-chan time.Time {
	if k == nil || k.conn == nil {
		return nil
	}
	k.timer.Reset(keptIdle)
	return k.timer.C
}

// release gives the connection kept back to the pool.
func (k *keptConn) release() {
	if k != nil && k.conn != nil {
		k.conn.Close()
		k.conn = nil
	}
}

// loop is writer i; shard is the shard of the daily counters its
// transactions add to, its own among the node's writers.
func (b *batcher) loop(i, shard int) {
	defer b.wg.Done()
	batch := make([]*batchReq, 0, maxBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	prev := 0
	var kept *keptConn // nil: the writer keeps no connection
	if b.keepConns {
		kept = &keptConn{timer: time.NewTimer(keptIdle)}
		defer kept.release()
	}
	for {
		if int32(i) >= b.active.Load() {
			kept.release()
		}
		if !b.idle(i) {
			return // the active writers drain the queue
		}
		var r *batchReq
		for r == nil {
			select {
			case r = <-b.queue:
			case <-kept.idle():
				kept.release()
			case <-b.stop:
				b.drain()
				return
			}
		}
		batch = append(batch[:0], r)
		start := time.Now()
		tx, err := b.db.beginOn(context.Background(), kept)
		if ue := (*UnavailableError)(nil); errors.As(err, &ue) {
			// No connection in time: every caller waiting now would wait
			// as long again; they all get the answer at once.
			b.refuse(batch, err)
			prev = 0
			continue
		}
		if err == nil {
			tx.shard = shard
		}
		ok := err == nil
		if ok {
			batch, ok = b.take(tx, batch, 0)
		}
		linger := prev >= lingerMin
		deadline := start.Add(lingerMax)
	fill:
		for ok && len(batch) < maxBatch {
			select {
			case r := <-b.queue:
				batch, ok = b.take(tx, append(batch, r), len(batch))
				continue
			default:
			}
			if !linger {
				break
			}
			wait := time.Until(deadline)
			if wait <= 0 {
				break
			}
			timer.Reset(min(wait, lingerGap))
			select {
			case r := <-b.queue:
				timer.Stop()
				batch, ok = b.take(tx, append(batch, r), len(batch))
			case <-timer.C:
				break fill
			}
		}
		haveTurn := false
		if ok {
			batch, ok, haveTurn = b.awaitTurn(tx, batch, timer)
		}
		if ue := (*UnavailableError)(nil); !ok && tx != nil && errors.As(tx.startErr, &ue) {
			// The transaction could not begin for want of a connection:
			// as when begin fails, everyone waiting gets the answer now.
			tx.rollback()
			b.refuse(batch, tx.startErr)
			prev = 0
			continue
		}
		prev = len(batch)
		b.commits.Add(1)
		b.writes.Add(int64(len(batch)))
		if ok {
			err = tx.commit(context.Background())
			if haveTurn {
				b.turn <- struct{}{}
			}
		} else if tx != nil {
			tx.rollback()
		}
		if !ok || err != nil {
			// A caller's work failed (not a verdict) or the commit did:
			// run the batch again the careful way.
			kept.release()
			b.run(batch)
		} else {
			for _, r := range batch {
				r.done <- struct{}{}
			}
		}
		b.db.restartWAL() // between two transactions, when the WAL is full
	}
}

// take runs the callers of batch from index from in the writer's open
// transaction, with every caller waiting in the queue now (up to maxBatch),
// which it appends to batch: first it takes what they all read first from
// what the node kept (Tx.assume) and reads the rest (Tx.prefetch), then it
// runs them in order. It reports whether the transaction can go on (see
// exec); callers it appended but did not run are run with the rest of the
// batch when the batch is run again.
func (b *batcher) take(tx *Tx, batch []*batchReq, from int) ([]*batchReq, bool) {
drain:
	for len(batch) < maxBatch {
		select {
		case r := <-b.queue:
			batch = append(batch, r)
		default:
			break drain
		}
	}
	tx.assume(batch[from:])
	if err := tx.prefetch(batch[from:]); err != nil {
		return batch, false
	}
	for _, r := range batch[from:] {
		if !b.exec(tx, r) {
			return batch, false
		}
	}
	return batch, true
}

// exec runs one caller's work in the writer's open transaction and reports
// whether the transaction can go on: the work succeeded, or failed with a
// verdict (which by the rule above wrote nothing). A caller whose context
// has ended is not run.
func (b *batcher) exec(tx *Tx, r *batchReq) bool {
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return true
	}
	mark := tx.mark()
	r.err = r.fn(tx)
	if r.err != nil {
		tx.undo(mark) // what the failed work deferred to the commit
	}
	return r.err == nil || isVerdict(r.err)
}

// refuse answers the requests of batch and every request queued now with
// err.
func (b *batcher) refuse(batch []*batchReq, err error) {
	for _, r := range batch {
		r.err = err
		r.done <- struct{}{}
	}
	for {
		select {
		case r := <-b.queue:
			r.err = err
			r.done <- struct{}{}
		default:
			return
		}
	}
}

// drain answers every queued request after close.
func (b *batcher) drain() {
	for {
		select {
		case r := <-b.queue:
			r.err = errClosed
			r.done <- struct{}{}
		default:
			return
		}
	}
}

var errClosed = errors.New("sqlstore: closed")

// run commits a batch; when the batch as a whole fails (a deadlock between
// nodes, a lost connection), every caller is run again on its own.
func (b *batcher) run(batch []*batchReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			r.done <- struct{}{}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	err := b.runTx(live)
	if err != nil && len(live) > 1 {
		for _, r := range live {
			// runTx of one caller sets its err (its verdict or the
			// transaction's failure) and returns nil: keep that err.
			b.runTx([]*batchReq{r})
		}
	} else if err != nil {
		live[0].err = err
	}
	for _, r := range live {
		r.done <- struct{}{}
	}
}

func (b *batcher) runTx(reqs []*batchReq) error {
	ctx := context.Background()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = b.db.inTx(ctx, func(tx *Tx) error {
			for _, r := range reqs {
				mark := tx.mark()
				r.err = r.fn(tx)
				if r.err != nil {
					tx.undo(mark)
				}
				if r.err != nil && (len(reqs) == 1 || !isVerdict(r.err)) {
					return r.err
				}
			}
			return nil
		})
		if !isRetryable(err) {
			break
		}
	}
	if len(reqs) == 1 {
		if err != nil && reqs[0].err == nil {
			reqs[0].err = err
		}
		return nil
	}
	return err
}

// isVerdict reports whether err is a caller's answer (a failed check, which
// by the rule above wrote nothing) rather than a failure of the transaction.
func isVerdict(err error) bool {
	var e *sb.Error
	var r *ErrReplay
	var u *UnavailableError
	if errors.As(err, &u) {
		return false // reads as an *sb.Error, but the transaction failed
	}
	return errors.As(err, &e) || errors.As(err, &r) || errors.Is(err, sb.ErrAlreadyStored)
}

// isRetryable reports whether a failed transaction may succeed if run again.
func isRetryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked
	}
	return false
}

// txMark is where a caller's work began in a transaction's deferred work.
type txMark struct{ takes, messages, claims, recipients int }

func (t *Tx) mark() txMark {
	return txMark{len(t.takes), len(t.messages), len(t.claims), len(t.newRecipients)}
}

// undo drops what the work since m deferred to the commit (messages to
// insert) and gives back the units of daily limits it took. (Its counter
// increments are made only once its checks have passed: see bumpLater.)
func (t *Tx) undo(m txMark) {
	t.untake(m.takes)
	if m.messages < len(t.messages) {
		t.messages = t.messages[:m.messages]
	}
	if m.claims < len(t.claims) {
		t.claims = t.claims[:m.claims]
	}
	if m.recipients < len(t.newRecipients) {
		// They read as known: forget every recipient read, to read again.
		t.newRecipients, t.recipients = t.newRecipients[:m.recipients], nil
	}
}
