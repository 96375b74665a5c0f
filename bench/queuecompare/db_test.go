package queuecompare

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/mattn/go-sqlite3"
)

// The benchmark talks to PostgreSQL through pgx (River's PostgreSQL driver
// needs a pgxpool, so both queues get the same pool) and to SQLite through
// database/sql with mattn/go-sqlite3 (the driver Switchboard uses, and the
// only form River's SQLite driver takes). db and txn hide the difference.

type dialect int

const (
	postgres dialect = iota
	sqlite
)

func (d dialect) String() string {
	if d == postgres {
		return "postgres"
	}
	return "sqlite"
}

// msg is a claimed or loaded message: what a provider needs to send it.
type msg struct {
	id        string
	tenant    string
	from, to  string
	body      string
	createdAt int64 // Unix microseconds; the producer's start of the insert
	attempts  int
}

type db interface {
	dialect() dialect
	begin(ctx context.Context) (txn, error)
	exec(ctx context.Context, q string, args ...any) error
	count(ctx context.Context, q string, args ...any) (int64, error)
	loadMsg(ctx context.Context, q string, id string) (msg, error)
	close()
}

type txn interface {
	exec(ctx context.Context, q string, args ...any) error
	queryMsgs(ctx context.Context, dst []msg, q string, args ...any) ([]msg, error)
	commit(ctx context.Context) error
	rollback(ctx context.Context)
	raw() any // pgx.Tx or *sql.Tx, for River's InsertTx
}

// --- PostgreSQL

type pgDB struct{ pool *pgxpool.Pool }

// withParams adds PostgreSQL run-time parameters to a connection URL.
func withParams(base string, params map[string]string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func openPG(ctx context.Context, connURL string, maxConns int32) (*pgDB, error) {
	cfg, err := pgxpool.ParseConfig(connURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return &pgDB{pool: pool}, nil
}

func (d *pgDB) dialect() dialect { return postgres }
func (d *pgDB) close()           { d.pool.Close() }

func (d *pgDB) begin(ctx context.Context) (txn, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return pgTx{tx}, nil
}

func (d *pgDB) exec(ctx context.Context, q string, args ...any) error {
	_, err := d.pool.Exec(ctx, q, args...)
	return err
}

func (d *pgDB) count(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	err := d.pool.QueryRow(ctx, q, args...).Scan(&n)
	return n, err
}

func (d *pgDB) loadMsg(ctx context.Context, q string, id string) (msg, error) {
	m := msg{id: id}
	err := d.pool.QueryRow(ctx, q, id).Scan(&m.tenant, &m.from, &m.to, &m.body, &m.createdAt, &m.attempts)
	return m, err
}

type pgTx struct{ tx pgx.Tx }

func (t pgTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.Exec(ctx, q, args...)
	return err
}

func (t pgTx) queryMsgs(ctx context.Context, dst []msg, q string, args ...any) ([]msg, error) {
	rows, err := t.tx.Query(ctx, q, args...)
	if err != nil {
		return dst, err
	}
	defer rows.Close()
	for rows.Next() {
		var m msg
		if err := rows.Scan(&m.id, &m.tenant, &m.from, &m.to, &m.body, &m.createdAt, &m.attempts); err != nil {
			return dst, err
		}
		dst = append(dst, m)
	}
	return dst, rows.Err()
}

func (t pgTx) commit(ctx context.Context) error { return t.tx.Commit(ctx) }
func (t pgTx) rollback(ctx context.Context)     { _ = t.tx.Rollback(ctx) }
func (t pgTx) raw() any                         { return t.tx }

// --- SQLite

type sqliteDB struct {
	db   *sql.DB
	path string
}

// openSQLite opens a new database file in dir with Switchboard's settings
// (sqlstore/db.go): WAL, synchronous=FULL (a commit is on disk before it
// returns), BEGIN IMMEDIATE, and a single connection, since SQLite has one
// writer and queueing in Go beats busy-waiting in SQLite. River's SQLite
// driver asks for one connection too.
func openSQLite(dir, name string) (*sqliteDB, error) {
	path := filepath.Join(dir, name+".db")
	params := "_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_txlock=immediate&cache=private&_stmt_cache_size=128"
	sdb, err := sql.Open("sqlite3", "file:"+path+"?"+params)
	if err != nil {
		return nil, err
	}
	sdb.SetMaxOpenConns(1)
	sdb.SetMaxIdleConns(1)
	sdb.SetConnMaxLifetime(0)
	if err := sdb.Ping(); err != nil {
		sdb.Close()
		return nil, err
	}
	return &sqliteDB{db: sdb, path: path}, nil
}

func (d *sqliteDB) dialect() dialect { return sqlite }

func (d *sqliteDB) close() {
	d.db.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(d.path + suffix)
	}
}

func (d *sqliteDB) begin(ctx context.Context) (txn, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return sqlTx{tx}, nil
}

func (d *sqliteDB) exec(ctx context.Context, q string, args ...any) error {
	_, err := d.db.ExecContext(ctx, q, args...)
	return err
}

func (d *sqliteDB) count(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	err := d.db.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

func (d *sqliteDB) loadMsg(ctx context.Context, q string, id string) (msg, error) {
	m := msg{id: id}
	err := d.db.QueryRowContext(ctx, q, id).Scan(&m.tenant, &m.from, &m.to, &m.body, &m.createdAt, &m.attempts)
	return m, err
}

type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, q, args...)
	return err
}

func (t sqlTx) queryMsgs(ctx context.Context, dst []msg, q string, args ...any) ([]msg, error) {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return dst, err
	}
	defer rows.Close()
	for rows.Next() {
		var m msg
		if err := rows.Scan(&m.id, &m.tenant, &m.from, &m.to, &m.body, &m.createdAt, &m.attempts); err != nil {
			return dst, err
		}
		dst = append(dst, m)
	}
	return dst, rows.Err()
}

func (t sqlTx) commit(context.Context) error { return t.tx.Commit() }
func (t sqlTx) rollback(context.Context)     { _ = t.tx.Rollback() }
func (t sqlTx) raw() any                     { return t.tx }

// --- group commit

// writer is a compact copy of sqlstore's group-commit writer
// (sqlstore/batch.go): a few goroutines run many callers' closures in one
// transaction, so a batch of callers shares one commit and one fsync, and a
// caller returns only once its batch has committed. A batch that fails is run
// again one caller per transaction. Both queues' producers, and the work
// their workers write, go through it, as everything on Switchboard's hot
// paths does.
type writer struct {
	db   db
	reqs chan *writeReq
	wg   sync.WaitGroup
}

type writeReq struct {
	fn   func(context.Context, txn) error
	err  error
	done chan struct{}
}

const maxWriteBatch = 256 // as sqlstore

var writeReqPool = sync.Pool{New: func() any { return &writeReq{done: make(chan struct{}, 1)} }}

func newWriter(d db, loops int) *writer {
	w := &writer{db: d, reqs: make(chan *writeReq, 4096)}
	for range loops {
		w.wg.Go(w.loop)
	}
	return w
}

// close stops the writer once every caller has returned.
func (w *writer) close() {
	close(w.reqs)
	w.wg.Wait()
}

// write runs fn in a shared transaction and returns when it has committed.
// fn may run twice (when its batch is retried one by one).
func (w *writer) write(fn func(context.Context, txn) error) error {
	r := writeReqPool.Get().(*writeReq)
	r.fn, r.err = fn, nil
	w.reqs <- r
	<-r.done
	err := r.err
	r.fn = nil
	writeReqPool.Put(r)
	return err
}

func (w *writer) loop() {
	batch := make([]*writeReq, 0, maxWriteBatch)
	for {
		r, ok := <-w.reqs
		if !ok {
			return
		}
		batch = append(batch[:0], r)
	fill:
		for len(batch) < maxWriteBatch {
			select {
			case r, ok := <-w.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		err := w.runTx(batch)
		if err != nil && len(batch) > 1 {
			for _, r := range batch {
				r.err = w.runTx([]*writeReq{r})
			}
		} else if err != nil {
			batch[0].err = err
		}
		for _, r := range batch {
			r.done <- struct{}{}
		}
	}
}

func (w *writer) runTx(batch []*writeReq) error {
	ctx := context.Background()
	tx, err := w.db.begin(ctx)
	if err != nil {
		return err
	}
	for _, r := range batch {
		if err := r.fn(ctx, tx); err != nil {
			tx.rollback(ctx)
			return err
		}
	}
	return tx.commit(ctx)
}

// --- schema

// messagesDDL is the part of Switchboard's messages table that matters here
// (sqlstore/migrations/0002_messages.sql): the same kinds of columns, with a
// TEXT primary key and the tenant index. The queue's columns (run_at,
// attempts) exist in both variants; only the in-table queue indexes them.
const messagesDDL = `CREATE TABLE messages (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    environment  TEXT NOT NULL,
    direction    TEXT NOT NULL,
    from_number  TEXT NOT NULL,
    to_number    TEXT NOT NULL,
    body         TEXT NOT NULL,
    channel      TEXT NOT NULL,
    status       TEXT NOT NULL,
    campaign_id  TEXT,
    created_at   BIGINT NOT NULL,
    sent_at      BIGINT,
    delivered_at BIGINT,
    run_at       BIGINT,
    attempts     INTEGER NOT NULL DEFAULT 0
)`

const messagesTenantIndex = `CREATE INDEX messages_tenant ON messages (tenant_id, environment, id)`

// queueIndexes are the in-table queue's indexes (0004_queue_lanes.sql).
var queueIndexes = []string{
	`CREATE INDEX messages_due_direct ON messages (run_at) WHERE run_at IS NOT NULL AND campaign_id IS NULL`,
	`CREATE INDEX messages_due_campaign ON messages (run_at) WHERE run_at IS NOT NULL AND campaign_id IS NOT NULL`,
}

// rebind turns ? placeholders into $n for PostgreSQL.
func rebind(d dialect, q string) string {
	if d != postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

const insertMessageSQL = `INSERT INTO messages (id, tenant_id, environment, direction, from_number, to_number, body, channel, status, created_at, run_at)
	VALUES (?, ?, 'live', 'outbound', ?, ?, ?, 'sms', 'queued', ?, ?)`

const loadMessageSQL = `SELECT tenant_id, from_number, to_number, body, created_at, attempts FROM messages WHERE id = ?`
