// Package sqlstore is the storage adapter of Switchboard: one implementation
// of the domain's storage needs over database/sql, for SQLite (the embedded
// default, one file in WAL mode) and PostgreSQL (several nodes on one
// database). Queries are written once with `?` placeholders and rebound for
// PostgreSQL; the few statements that differ by dialect say so. Every query
// on tenant data names the tenant.
//
// It is not a general ORM and holds no business rules beyond the integrity
// the database enforces (uniqueness, the key cap under concurrency).
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib" // PostgreSQL driver "pgx"
	"github.com/mattn/go-sqlite3"    // SQLite driver "sqlite3"

	sb "github.com/switchboard/switchboard"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Dialect names the SQL database behind a DB.
type Dialect int

const (
	SQLite Dialect = iota
	Postgres
)

func (d Dialect) String() string {
	if d == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// DB is an open store. On SQLite it keeps one connection for writes (SQLite
// has one writer; queueing in Go is cheaper than busy-waiting in SQLite) and a
// pool for reads. On PostgreSQL both are the same pool.
type DB struct {
	dialect Dialect
	write   *sql.DB
	read    *sql.DB
	dsn     string

	pool poolState // PostgreSQL: the pool's options and failures
	// log is Options.Log, for both dialects: the node's logger, never the
	// process's default (tests run several nodes in one process).
	log *slog.Logger
	// fixedWriters is set when Options.Writers fixed the number of
	// group-commit writers; otherwise the heartbeat adapts it.
	fixedWriters bool
	// beat is PostgreSQL's connection of its own for the node's heartbeat
	// (see Heartbeat), so that an exhausted pool never makes a live node
	// look dead to the others.
	beat     *sql.DB
	rebound  sync.Map // query with ? -> query with $n
	keyLists sync.Map // tenant id -> *keyList
	// keyListGen counts key-list invalidations (see Keys).
	keyListGen atomic.Uint64
	batch      *batcher

	ckpt            *sql.DB // SQLite: the connection that runs checkpoints
	stopCheckpoints chan struct{}
	checkpointsDone chan struct{}
	walFull         atomic.Bool  // SQLite: the WAL should start over (see restartWAL)
	walRestartPages atomic.Int64 // SQLite: the WAL length that asks for it
	// walPath is the SQLite WAL file; walCopied the size and time of its
	// last write when a checkpoint last found every frame copied (see
	// checkpoint). Only the checkpoint loop uses them.
	walPath   string
	walCopied walStamp

	// pairingKey keys the stored form of pairing codes (pairingkey.go).
	pairingKey       []byte
	pairingKeySource string

	// routing decides which phones can take a message (SetRouting);
	// phoneCache keeps tenants' phones with their use (see phoneCache).
	routing    sb.Routing
	phoneCache phoneCache
	// node names this process in the notifications it sends, so that it
	// ignores its own; phoneWork is called when a phone's device has work
	// (see OnPhoneWork).
	node      string
	phoneWork atomic.Pointer[func(phoneID string)]
	// host names the machine this process runs on, in its nodes row
	// (see HostNodes).
	host string

	// observer, when set, learns of every message event this process
	// commits (see SetObserver).
	observer atomic.Pointer[func(m *sb.Message, event string)]

	// reads keeps the send path's reads for later batches (keptreads.go).
	reads keptReads

	// allow holds the units of limited daily counters this node reserved
	// and has not spent; shardBase is the first of the counter shards its
	// writers add to (see counters.go).
	allow          allowances
	limits         limitCounters
	shardBase      int
	stopAllowances chan struct{}
	allowancesDone chan struct{}

	messagesDue  chan struct{}            // wakes this node's delivery workers
	handover     atomic.Pointer[handover] // accepted sends on their way to this node's worker
	webhooksDue  chan struct{}            // wakes this node's webhook workers
	campaignsDue chan struct{}            // wakes this node's campaign runner

	// redelivered counts possible duplicate hand-offs (see Redeliveries).
	redelivered struct {
		takeoverMessages, takeoverDeliveries atomic.Int64
		leaseMessages, leaseDeliveries       atomic.Int64
	}
}

// MessagesDue is signalled (without blocking) after this process commits a
// message that is due now. Other nodes find it by polling.
func (db *DB) MessagesDue() <-chan struct{} { return db.messagesDue }

// WebhooksDue is signalled after this process commits a webhook delivery.
func (db *DB) WebhooksDue() <-chan struct{} { return db.webhooksDue }

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// CampaignsDue is signalled after this process launches or cancels a
// campaign. Other nodes find it by polling.
func (db *DB) CampaignsDue() <-chan struct{} { return db.campaignsDue }

func (db *DB) wakeMessages() { wake(db.messagesDue) }
func (db *DB) wakeWebhooks() { wake(db.webhooksDue) }

// SetObserver makes fn learn of every message event (message.delivered,
// message.failed, message.received) this process commits, once the
// transaction that records it has committed, whether or not a webhook
// subscribes to it. fn runs on the writer: it must be quick (count, log).
// The message carries what the event reports (for a delivery: its tenant,
// environment, numbers, channel, created_at, scheduled_at and
// delivered_at).
func (db *DB) SetObserver(fn func(m *sb.Message, event string)) { db.observer.Store(&fn) }

// SetRouting sets the rules that decide which phones can take a message.
// Call it before the store is used.
func (db *DB) SetRouting(r sb.Routing) { db.routing = r }

// Routing returns the store's routing rules.
func (db *DB) Routing() sb.Routing { return db.routing }

// CheckURL reports whether url names a database Open accepts:
// "sqlite:PATH" (PATH not empty) or "postgres://..." / "postgresql://...".
// Anything else is an error that says what is accepted; it quotes no more of
// url than its scheme, since an address may carry a password.
func CheckURL(url string) error {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return nil
	case strings.HasPrefix(url, "sqlite:"):
		if strings.TrimPrefix(url, "sqlite:") == "" {
			return errors.New("database sqlite: names no file: use sqlite:PATH, e.g. sqlite:data/switchboard.db")
		}
		return nil
	case url == "":
		return errors.New("no database given: use sqlite:PATH or postgres://...")
	}
	if scheme, _, ok := strings.Cut(url, ":"); ok && scheme != "" && !strings.ContainsAny(scheme, "/\\. ") {
		return fmt.Errorf("database scheme %q is not supported: use sqlite:PATH or postgres://... (postgresql:// also works)", scheme)
	}
	return errors.New("database address has no scheme: use sqlite:PATH (e.g. sqlite:data/switchboard.db) or postgres://...")
}

// Open opens the database named by url, "sqlite:PATH" or "postgres://..." /
// "postgresql://..." (see CheckURL), and applies pending migrations.
func Open(ctx context.Context, url string) (*DB, error) {
	return OpenOptions(ctx, url, Options{})
}

// OpenOptions is Open with the pool's options.
func OpenOptions(ctx context.Context, url string, opt Options) (*DB, error) {
	if err := CheckURL(url); err != nil {
		return nil, err
	}
	opt.defaults()
	var db *DB
	var err error
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		db, err = openPostgres(url, opt)
	default:
		db, err = openSQLite(strings.TrimPrefix(url, "sqlite:"))
	}
	if err != nil {
		return nil, err
	}
	db.log = opt.Log
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.loadPairingKey(ctx, opt.PairingSecret); err != nil {
		db.Close()
		return nil, err
	}
	db.messagesDue = make(chan struct{}, 1)
	db.webhooksDue = make(chan struct{}, 1)
	db.campaignsDue = make(chan struct{}, 1)
	db.node = sb.NewID()
	db.host = hostID()
	db.shardBase = newShardBase()
	db.stopAllowances, db.allowancesDone = make(chan struct{}), make(chan struct{})
	go db.allowanceLoop(db.stopAllowances, db.allowancesDone)
	db.fixedWriters = opt.Writers > 0
	switch {
	case db.dialect == SQLite:
		db.batch = newBatcher(db, 1, 1) // one writer
	case db.fixedWriters:
		db.batch = newBatcher(db, opt.Writers, opt.Writers)
	default:
		db.batch = newBatcher(db, maxAutoWriters, autoWriters(1))
	}
	if db.dialect == SQLite {
		db.stopCheckpoints = make(chan struct{})
		db.checkpointsDone = make(chan struct{})
		go db.checkpointLoop()
	}
	return db, nil
}

// sqliteWriter is the SQLite driver of the write connection. Checkpoints
// copy the WAL into the database file and fsync it. Left automatic, they run
// inside whichever commit crosses the threshold and stall every caller of
// that batch; a background goroutine runs them instead (see checkpointLoop),
// and the writer when the WAL must start over (see restartWAL, which also
// explains journal_size_limit). The settings are made whenever the pool
// opens the connection, which it does again after closing one it found
// broken (see endSQLite).
const sqliteWriter = "sqlite3-switchboard-writer"

func init() {
	sql.Register(sqliteWriter, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec(`PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = `+strconv.Itoa(walSizeLimit), nil)
		return err
	}})
}

func openSQLite(path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty path")
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// synchronous=FULL: a commit is on disk before it returns, so an accepted
	// message survives kill -9 and power loss alike.
	params := "_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_foreign_keys=on&_txlock=immediate&cache=private&_stmt_cache_size=128"
	write, err := sql.Open(sqliteWriter, "file:"+path+"?"+params)
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	// Processes opening a new file at once can find it locked while one of
	// them switches it to WAL: wait for that to finish.
	for attempt := 0; ; attempt++ {
		err := write.Ping()
		if err == nil {
			break
		}
		if !isRetryable(err) || attempt == 50 {
			write.Close()
			return nil, fmt.Errorf("sqlite %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	read, err := sql.Open("sqlite3", "file:"+path+"?"+params+"&_query_only=true")
	if err != nil {
		write.Close()
		return nil, err
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	read.SetConnMaxLifetime(0)
	ckpt, err := sql.Open("sqlite3", "file:"+path+"?"+params)
	if err != nil {
		write.Close()
		read.Close()
		return nil, err
	}
	ckpt.SetMaxOpenConns(1)
	db := &DB{dialect: SQLite, write: write, read: read, ckpt: ckpt, dsn: path, walPath: path + "-wal"}
	db.walRestartPages.Store(walRestartPages)
	return db, nil
}

// privateFiles makes the database file at path readable and writable by
// its owner only: it holds webhook secrets and key hashes. A missing file is
// created empty (an empty file is an empty SQLite database) with mode 0600,
// and SQLite gives its WAL and shared-memory files the mode of the database
// file; files that an older version left more open are closed down to 0600
// (with a warning when that fails).
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			// A file of another owner cannot be changed; it still opens.
			if err := os.Chmod(p, 0o600); err != nil {
				slog.Warn("sqlite file is open to other users and could not be made private", "file", p, "mode", fi.Mode().Perm().String(), "err", err)
			}
		}
	}
	return nil
}

func openPostgres(url string, opt Options) (*DB, error) {
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pool := stdlib.OpenDB(*cc, stdlib.OptionAfterConnect(keepBackendHeap))
	pool.SetMaxOpenConns(opt.MaxConns)
	pool.SetMaxIdleConns(opt.MaxConns)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	beat, err := sql.Open("pgx", url)
	if err != nil {
		pool.Close()
		return nil, err
	}
	beat.SetMaxOpenConns(1)
	beat.SetMaxIdleConns(1)
	db := &DB{dialect: Postgres, write: pool, read: pool, beat: beat, dsn: url}
	db.pool.opt = opt
	db.reads.on = true
	return db, nil
}

// keepBackendHeap runs on each new connection of the pool. It has the
// PostgreSQL backend allocate and free one block of 4 MiB, which makes
// glibc's malloc in that backend keep the memory its statements free instead
// of giving it back to the kernel after each of them: the backend then keeps
// up to 8 MiB free at the top of its heap (what its largest statement took,
// no more), and takes blocks under 4 MiB from the heap rather than from
// mmap; all of it goes back to the kernel when the backend ends (the pool
// closes a connection idle for 5 minutes).
//
// By default glibc trims its heap whenever more than 128 KiB lie free at its
// top (M_TRIM_THRESHOLD). A backend running the writers' pipelines grows its
// heap by 550-700 KiB for each and frees it at the end, so each pipeline
// paid brk calls and a page fault for every page touched again: 30% of
// PostgreSQL's CPU under the send bench on one virtual machine, 2% on
// another (docs/scale-out.md, "Create the database"). glibc's
// thresholds are dynamic (mallopt(3)): freeing a block that was mmapped
// because it exceeded the mmap threshold raises that threshold to the
// block's size and the trim threshold to twice that, for the rest of the
// process. The block here is the result of the outer repeat(), freed as the
// statement ends; repeating a 4 KiB string fills it with 1,024 copies where
// repeating one character took four million (50 ms against 10 on a slow
// machine, most of what is left being the kernel's first touch of the
// block's pages). A PostgreSQL on another C library runs the statement for
// nothing; an operator's MALLOC_* settings in PostgreSQL's environment turn
// the dynamic thresholds off and take precedence. An error of PostgreSQL's
// (a proxy or a role that refuses the statement) leaves the connection as it
// was and in the pool; only a broken connection is refused.
//
// The statement runs under its own bound (keepHeapWait), not under the
// deadline of the caller that waits for the connection (--db-wait): on a
// loaded machine opening a connection can take most of that wait, and a
// request must not be turned away with 503 for a statement that only saves
// the backend work later. The wait can then exceed --db-wait by this
// statement's time, once for each connection opened.
func keepBackendHeap(ctx context.Context, c *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keepHeapWait)
	defer cancel()
	_, err := c.Exec(ctx, keepHeapQuery)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return nil
	}
	return err
}

// keepHeapQuery is keepBackendHeap's statement (a variable for its tests)
// and keepHeapWait its bound.
var keepHeapQuery = "SELECT octet_length(repeat(repeat('x', 4096), 1024))"

const keepHeapWait = 5 * time.Second

// Dialect reports which database this is.
func (db *DB) Dialect() Dialect { return db.dialect }

// Close closes the database.
func (db *DB) Close() error {
	if db.stopAllowances != nil {
		close(db.stopAllowances)
		<-db.allowancesDone
		db.giveBackIdle(context.Background(), 0) // what this node holds of daily limits
	}
	if db.stopCheckpoints != nil {
		close(db.stopCheckpoints)
		<-db.checkpointsDone
	}
	if db.batch != nil {
		db.batch.close()
	}
	err := db.write.Close()
	if db.read != db.write {
		err = errors.Join(err, db.read.Close())
	}
	if db.ckpt != nil {
		err = errors.Join(err, db.ckpt.Close())
	}
	if db.beat != nil {
		err = errors.Join(err, db.beat.Close())
	}
	return err
}

// q returns query with its `?` placeholders rebound for the dialect.
func (db *DB) q(query string) string {
	if db.dialect != Postgres {
		return query
	}
	if s, ok := db.rebound.Load(query); ok {
		return s.(string)
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	s := b.String()
	db.rebound.Store(query, s)
	return s
}

// planEach returns args for a statement that PostgreSQL must plan each time
// it runs, for its arguments and the tables' size of the moment. pgx
// otherwise prepares every statement once per connection, and PostgreSQL
// soon settles on a generic plan, made once from what the tables held then.
// For a statement over an array of ids, made while the messages table was
// still small (a new database, the first seconds of a node), that plan is a
// sequential scan, and it stays one as the table grows, until an ANALYZE of
// the table makes PostgreSQL plan again: an outcome's UPDATE of 100 messages
// read every row of the table (80 us a message after 60,000 sends instead
// of 28 us). Planning again costs tens of
// microseconds a statement, which only statements over a batch, and the
// queue's polls (a few a second, over a range of run_at), repay.
func (db *DB) planEach(args ...any) []any {
	if db.dialect != Postgres {
		return args
	}
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}

// On PostgreSQL, exec, query, queryRow and begin take their connection with
// acquire, which waits at most the pool's wait (see Options) and then fails
// with DATABASE_UNAVAILABLE; the statement itself runs under ctx alone. A
// connection found broken before the statement was sent (driver.ErrBadConn)
// is replaced, as database/sql does for its own calls.

// badConnRetries is how many times a statement is tried on another
// connection after driver.ErrBadConn.
const badConnRetries = 2

func (db *DB) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if db.dialect != Postgres {
		return db.write.ExecContext(ctx, db.q(query), args...)
	}
	for attempt := 0; ; attempt++ {
		conn, err := db.acquire(ctx)
		if err != nil {
			return nil, err
		}
		res, err := conn.ExecContext(ctx, db.q(query), args...)
		conn.Close()
		if errors.Is(err, driver.ErrBadConn) && attempt < badConnRetries {
			continue
		}
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err() // the caller gave up: no fault of the database
		}
		return res, db.classify(err)
	}
}

func (db *DB) queryRow(ctx context.Context, query string, args ...any) row {
	if db.dialect != Postgres {
		return row{r: db.read.QueryRowContext(ctx, db.q(query), args...)}
	}
	rows, err := db.query(ctx, query, args...)
	return row{rows: rows, err: err, db: db, ctx: ctx}
}

func (db *DB) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if db.dialect != Postgres {
		return db.read.QueryContext(ctx, db.q(query), args...)
	}
	for attempt := 0; ; attempt++ {
		conn, err := db.acquire(ctx)
		if err != nil {
			return nil, err
		}
		rows, err := conn.QueryContext(ctx, db.q(query), args...)
		if err != nil {
			conn.Close()
			if errors.Is(err, driver.ErrBadConn) && attempt < badConnRetries {
				continue
			}
			if ctx.Err() != nil {
				return nil, ctx.Err() // the caller gave up: no fault of the database
			}
			return nil, db.classify(err)
		}
		go conn.Close() // returns to the pool once rows is closed (Conn.Close waits for its rows)
		return rows, nil
	}
}

// queryFunc runs a query: db.query, or one of a snapshot (readSnapshot).
type queryFunc func(ctx context.Context, query string, args ...any) (*sql.Rows, error)

// readSnapshot runs fn with queries that all see one snapshot of the
// database: a read-only REPEATABLE READ transaction on PostgreSQL, a read
// transaction on SQLite (WAL keeps its snapshot until it ends). For reads
// whose parts must agree, such as rows and their children read apart.
func (db *DB) readSnapshot(ctx context.Context, fn func(q queryFunc) error) error {
	var conn *sql.Conn
	var err error
	begin := "BEGIN DEFERRED" // not the pool's _txlock=immediate: the read pool may not write
	if db.dialect == Postgres {
		conn, err = db.acquire(ctx)
		begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	} else {
		conn, err = db.read.Conn(ctx)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, begin); err != nil {
		return db.classify(err)
	}
	// Read only: nothing to commit. A connection whose ROLLBACK fails is
	// not given back to the pool.
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	return fn(func(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
		return conn.QueryContext(ctx, db.q(query), args...)
	})
}

// row is one row of a query: a *sql.Row on SQLite; on PostgreSQL the rows
// of the query, or the error of taking a connection for it.
type row struct {
	r    *sql.Row
	rows *sql.Rows
	err  error
	db   *DB // PostgreSQL: classifies the errors of the query
	ctx  context.Context
}

// Scan is (*sql.Row).Scan.
func (r row) Scan(dest ...any) error {
	if r.r != nil {
		return r.r.Scan(dest...)
	}
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return r.classify(err)
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return r.classify(err)
	}
	return r.classify(r.rows.Close())
}

func (r row) classify(err error) error {
	if err != nil && r.ctx.Err() != nil {
		return r.ctx.Err() // the caller gave up: no fault of the database
	}
	return r.db.classify(err)
}

// Tx is a write transaction with the store's placeholder rebinding.
//
// It runs on a connection taken from the pool as a *sql.Conn, on which the
// transaction is begun and committed with statements, not on a *sql.Tx:
// database/sql gives every *sql.Tx a context of its own that can be
// canceled, and for such a transaction starts a goroutine for every query
// (to close its rows if the transaction ends first). The single writer runs
// a query or two for every send, so that was a goroutine started and ended
// for each, with the scheduler wake-ups that come with them, on the one
// goroutine every send waits for. On PostgreSQL it also lets the BEGIN go
// with the first statement and the COMMIT with the deferred writes, in one
// round trip each (pgx's pipeline, which database/sql cannot reach): a
// batch of sends costs two round trips instead of four, and one when it
// reads nothing the node has not kept (keptreads.go).
type Tx struct {
	db *DB
	// tx is the connection the transaction runs on; conn is the same
	// connection on PostgreSQL, closed (given back) at the transaction's
	// end. On PostgreSQL the transaction's BEGIN goes with its first
	// statement and its COMMIT with its deferred writes, in one round
	// trip each (see start and commitPostgres); begun says BEGIN was
	// sent, and startErr is the error of start, if it failed.
	tx       execer
	conn     *sql.Conn
	kept     *keptConn
	begun    bool
	startErr error
	after    []func()
	// bumps holds increments of daily counters without a limit, applied
	// just before the commit (see bumpLater).
	bumps map[counterKey]int64
	// counted holds every increment of a daily counter this transaction
	// made, applied or not; phones the tenants' phones it has read, with
	// their counts (see phoneList).
	counted map[counterKey]int64
	phones  map[phoneKey]*txPhones
	// shard is the shard of the counters this transaction adds to; takes
	// the units of limited counters it took, pending (SQLite) what is left
	// of blocks it reserved itself, full the limited counters it found
	// used up (see counters.go).
	shard int
	// messages are rows of messages inserted just before the commit
	// (insertMessageLater), claims rows of message_claims (see queue.go)
	// written then too, or before a statement that names them.
	messages [][]any
	claims   [][]any
	takes    []taken
	pending  map[counterKey]int64
	full     map[counterKey]bool
	// recipients are the recipients the transaction read (see recipient),
	// versions the phones' versions of tenants (see phoneList), read
	// ahead for a batch by prefetch.
	recipients map[rcpKey]recipient
	versions   map[string]int64
	// assumed is what of them the transaction took from the node's kept
	// reads, checked with its next statement (see keptreads.go).
	assumed assumedReads
	// newRecipients are rows of recipients inserted with the commit's
	// statement (insertRecipient, PostgreSQL).
	newRecipients [][]any
}

// execer is what *sql.Tx and *sql.Conn have in common.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// afterCommit runs fn once the transaction has committed.
func (t *Tx) afterCommit(fn func()) { t.after = append(t.after, fn) }

// The statements of a write transaction run under context.WithoutCancel of
// the caller's context. A group-commit transaction is shared by a batch of
// callers, so one caller's request ending must not interrupt it; and given
// a context that can end, the SQLite driver starts a goroutine for every
// statement to watch it (database/sql one for every query), which would
// cost the single writer two goroutine switches per statement.
func (t *Tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := t.ensureBegun(); err != nil {
		return nil, err
	}
	if err := t.prepare(ctx, query); err != nil {
		return nil, err
	}
	return t.tx.ExecContext(context.WithoutCancel(ctx), t.db.q(query), args...)
}

func (t *Tx) queryRow(ctx context.Context, query string, args ...any) row {
	if err := t.ensureBegun(); err != nil {
		return row{err: err}
	}
	if err := t.prepare(ctx, query); err != nil {
		return row{err: err}
	}
	return row{r: t.tx.QueryRowContext(context.WithoutCancel(ctx), t.db.q(query), args...)}
}

func (t *Tx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := t.ensureBegun(); err != nil {
		return nil, err
	}
	if err := t.prepare(ctx, query); err != nil {
		return nil, err
	}
	return t.tx.QueryContext(context.WithoutCancel(ctx), t.db.q(query), args...)
}

// prepare readies the transaction for a statement: a statement that names
// recipients or message_claims sees the rows the transaction deferred
// (insertRecipient, insertMessageLater), and the transaction
// forgets what the statement may change (wrote).
func (t *Tx) prepare(ctx context.Context, query string) error {
	if len(t.newRecipients) > 0 && strings.Contains(query, "recipients") {
		if err := t.insertRecipientsNow(ctx); err != nil {
			return err
		}
	}
	if len(t.claims) > 0 && strings.Contains(query, "message_claims") {
		if err := t.flushClaims(ctx); err != nil {
			return err
		}
	}
	t.wrote(query)
	return nil
}

// wrote forgets the recipients and phones' versions the transaction has
// read (see recipient, phoneList) before a statement that may change them.
func (t *Tx) wrote(query string) {
	if strings.HasPrefix(query, "SELECT") {
		return
	}
	if t.recipients != nil && strings.Contains(query, "recipients") {
		t.recipients = nil
	}
	if t.versions != nil && strings.Contains(query, "tenants") {
		t.versions = nil
	}
}

// inTx runs fn in a write transaction, committing when it returns nil.
func (db *DB) inTx(ctx context.Context, fn func(*Tx) error) error {
	t, err := db.begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(t); err != nil {
		t.rollback()
		return err
	}
	return t.commit(ctx)
}

// begin starts a write transaction. On PostgreSQL it only takes a
// connection: BEGIN goes with the transaction's first statement (start).
func (db *DB) begin(ctx context.Context) (*Tx, error) {
	return db.beginOn(ctx, nil)
}

// beginOn is begin for a group-commit writer on PostgreSQL: the
// transaction runs on the connection kept holds, if any, and leaves its
// connection there when it ends (see keptConn).
func (db *DB) beginOn(ctx context.Context, kept *keptConn) (*Tx, error) {
	if db.dialect == Postgres {
		conn := kept.take()
		if conn == nil {
			var err error
			if conn, err = db.acquire(ctx); err != nil {
				return nil, err
			}
		}
		return &Tx{db: db, tx: conn, conn: conn, kept: kept, shard: db.shardBase}, nil
	}
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		return nil, err
	}
	return &Tx{db: db, tx: conn, begun: true, shard: db.shardBase}, nil
}

// ensureBegun sends BEGIN on PostgreSQL before the transaction's first
// statement, unless a statement went with it (see start).
func (t *Tx) ensureBegun() error {
	if t.startErr != nil {
		return t.startErr // the transaction could not begin
	}
	if t.begun {
		return nil
	}
	return t.start(nil)
}

// start begins the transaction on PostgreSQL: it sends BEGIN, the check of
// what the transaction assumed (queueCheck), and the statements that queue
// adds to b after them, in one round trip. A connection found broken then,
// before any of the transaction has run, is replaced with another and all
// is sent again, up to badConnRetries times (queue's callbacks must keep
// what they read only once the batch has succeeded). The transaction's
// BEGIN counts as sent even when a statement after it failed: the
// transaction then ends with a ROLLBACK.
func (t *Tx) start(queue func(b *pgx.Batch)) error {
	for attempt := 0; ; attempt++ {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		t.queueCheck(b)
		if queue != nil {
			queue(b)
		}
		broken := false
		err := t.raw(func(c *pgx.Conn) error {
			err := c.SendBatch(context.Background(), b).Close()
			broken = c.IsClosed()
			return err
		})
		t.begun = true
		if err == nil {
			t.assumed.checked()
			return nil
		}
		if !broken && !errors.Is(err, driver.ErrBadConn) {
			t.staleReads(err)
			t.startErr = err
			return err
		}
		if attempt >= badConnRetries {
			t.startErr = t.db.classify(err)
			return t.startErr
		}
		t.conn.Close()
		conn, aerr := t.db.acquire(context.Background())
		if aerr != nil {
			t.conn, t.tx, t.startErr = nil, nil, aerr
			return aerr
		}
		t.conn, t.tx, t.begun = conn, conn, false
	}
}

// raw runs f on the pgx connection of the transaction (PostgreSQL).
func (t *Tx) raw(f func(*pgx.Conn) error) error {
	return t.conn.Raw(func(dc any) error { return f(dc.(*stdlib.Conn).Conn()) })
}

// commit applies the deferred writes, commits, and then runs the
// afterCommit functions. It rolls back when it fails before the commit.
func (t *Tx) commit(ctx context.Context) error {
	var err error
	if t.db.dialect == Postgres {
		var sent bool
		if sent, err = t.commitPostgres(); !sent {
			t.rollback()
			return err
		}
	} else {
		if err := t.flushDeferred(ctx); err != nil {
			t.rollback()
			return err
		}
		err = endSQLite(t.tx.(*sql.Conn), "COMMIT")
	}
	if err != nil {
		// It may have committed all the same (a connection lost during
		// the commit): the units it took stay spent.
		t.endTakes(false, true)
		return err
	}
	t.endTakes(true, false)
	if len(t.counted) > 0 {
		t.db.phoneCache.committed(t.counted)
	}
	for _, f := range t.after {
		f()
	}
	return nil
}

// commitPostgres sends the transaction's deferred writes (deferredStatement)
// and its COMMIT in one round trip, after the check of what it assumed and
// has not checked yet (queueCheck), and after its BEGIN too when no
// statement has run yet; a transaction with none of them sends nothing.
// sent is false when the COMMIT cannot have run: the check or the deferred
// statement failed with the server's error (the transaction is then still
// to be rolled back), or the transaction could not begin. The connection
// is given back once the transaction has ended.
func (t *Tx) commitPostgres() (sent bool, err error) {
	if t.conn == nil {
		return false, t.startErr // start could not replace a broken connection
	}
	query, args, counters := t.deferredStatement()
	if query == "" && !t.begun && !t.assumed.unchecked() {
		t.endConn()
		return true, nil
	}
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue("BEGIN")
	}
	t.queueCheck(b) // the callers' verdicts too rest on what it assumed
	if query != "" {
		b.Queue(query, args...)
	}
	b.Queue("COMMIT")
	var stmtErr error
	err = t.raw(func(c *pgx.Conn) error {
		br := c.SendBatch(context.Background(), b)
		for range b.Len() - 1 {
			if _, err := br.Exec(); err != nil {
				stmtErr = err
				break
			}
		}
		if stmtErr == nil {
			_, err := br.Exec()
			return cmp.Or(err, br.Close())
		}
		br.Close()
		return stmtErr
	})
	t.begun = true
	var pe *pgconn.PgError
	if stmtErr != nil && errors.As(stmtErr, &pe) {
		t.staleReads(stmtErr)
		return false, stmtErr // refused by the server: the pipeline stopped before COMMIT
	}
	t.endConn()
	if err != nil {
		return true, t.db.classify(err)
	}
	t.db.limits.shardWrites.Add(int64(counters))
	t.messages, t.claims, t.bumps, t.newRecipients = nil, nil, nil, nil
	return true, nil
}

// endConn gives the connection of a PostgreSQL transaction back to the
// pool, or to the writer that keeps it (keptConn), rolling back first a
// transaction still open on it; a connection that cannot be rolled back is
// closed instead.
func (t *Tx) endConn() {
	if t.conn == nil {
		return
	}
	reusable := false
	t.conn.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		if c.IsClosed() {
			return nil
		}
		if c.PgConn().TxStatus() != 'I' {
			if _, err := c.Exec(context.Background(), "ROLLBACK"); err != nil || c.PgConn().TxStatus() != 'I' {
				return driver.ErrBadConn // database/sql closes it
			}
		}
		reusable = true
		return nil
	})
	if !reusable || !t.kept.keep(t.conn) {
		t.conn.Close()
	}
	t.conn, t.tx = nil, nil
}

// rollback ends the transaction without committing it.
func (t *Tx) rollback() {
	t.endTakes(false, false)
	if t.db.dialect == Postgres {
		t.endConn()
		return
	}
	endSQLite(t.tx.(*sql.Conn), "ROLLBACK")
}

// endSQLite ends the transaction on the write connection conn with stmt
// (COMMIT or ROLLBACK) and gives conn back to the pool. A COMMIT that fails
// can leave the transaction open (a deferred constraint, a full disk), so it
// is rolled back; a ROLLBACK fails harmlessly when SQLite has already rolled
// the transaction back itself. Should a transaction still be open even so,
// the connection is closed rather than reused.
func endSQLite(conn *sql.Conn, stmt string) error {
	ctx := context.Background()
	_, err := conn.ExecContext(ctx, stmt)
	if err != nil {
		conn.ExecContext(ctx, "ROLLBACK")
		conn.Raw(func(c any) error {
			if sc, ok := c.(*sqlite3.SQLiteConn); ok && !sc.AutoCommit() {
				return driver.ErrBadConn // database/sql closes it
			}
			return nil
		})
	}
	conn.Close()
	return err
}

type migration struct {
	version int
	name    string
	sql     string
	// code, when set, is a migration written in Go (codeMigrations), run
	// in the migration's transaction instead of sql.
	code func(ctx context.Context, tx *Tx) error
}

// migrations returns the embedded migrations for the dialect in version
// order. "NNNN_name.sql" applies to both dialects; "NNNN_name.sqlite.sql" or
// "NNNN_name.postgres.sql" only to one. A version that has no file for the
// dialect is still recorded, as a migration with no SQL, so that a schema
// version means the same on both dialects (see SchemaVersion).
func (db *DB) migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]migration{}
	for _, e := range entries {
		name := e.Name()
		base := strings.TrimSuffix(name, ".sql")
		v, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: bad version", name)
		}
		if d := filepath.Ext(base); (d == ".sqlite" || d == ".postgres") && d[1:] != db.dialect.String() {
			if _, ok := byVersion[v]; !ok {
				byVersion[v] = migration{version: v, name: name}
			}
			continue
		}
		if other, ok := byVersion[v]; ok && other.sql != "" {
			// Two files of one version: the second would be skipped as
			// applied, silently, on every database.
			return nil, fmt.Errorf("migration %s: version %d is also %s", name, v, other.name)
		}
		body, err := migrationFS.ReadFile("migrations/" + name)
		if err != nil {
			return nil, err
		}
		byVersion[v] = migration{version: v, name: name, sql: string(body)}
	}
	for _, m := range codeMigrations[db.dialect] {
		// It takes the place of the other dialect's file of its version.
		if other, ok := byVersion[m.version]; ok && other.sql != "" {
			return nil, fmt.Errorf("migration %s: version %d is also %s", m.name, m.version, other.name)
		}
		byVersion[m.version] = m
	}
	out := make([]migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// migrate applies pending migrations, each in its own transaction. On
// PostgreSQL an advisory lock keeps several nodes starting at once from
// applying the same migration twice: each migration runs once, on one
// node, while the others wait for it. A database that holds a migration
// this build does not know (a newer build migrated it) is refused before
// anything is written.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := db.migrations()
	if err != nil {
		return err
	}
	// lockedApplied takes the lock (PostgreSQL) and returns the versions
	// applied, refusing a database that a newer build migrated.
	lockedApplied := func(tx *Tx) (map[int]bool, error) {
		if db.dialect == Postgres {
			if _, err := tx.exec(ctx, `SELECT pg_advisory_xact_lock(7311)`); err != nil {
				return nil, err
			}
		}
		applied, err := tx.appliedMigrations(ctx)
		if err != nil {
			return nil, err
		}
		if err := db.checkSchema(applied); err != nil {
			return nil, err
		}
		set := map[int]bool{}
		for _, v := range applied {
			set[v] = true
		}
		return set, nil
	}
	var applied map[int]bool
	err = db.inTx(ctx, func(tx *Tx) error {
		// Under the lock: nodes starting at once on a new database would
		// otherwise race to create the table itself.
		if db.dialect == Postgres {
			if _, err := tx.exec(ctx, `SELECT pg_advisory_xact_lock(7311)`); err != nil {
				return err
			}
		}
		if _, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
			return err
		}
		applied, err = lockedApplied(tx)
		return err
	})
	if IsNewerSchema(err) {
		return err
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		err := db.inTx(ctx, func(tx *Tx) error {
			// Another node may have applied it, or a newer build migrated
			// the database, since the first look.
			now, err := lockedApplied(tx)
			if err != nil || now[m.version] {
				return err
			}
			if m.code != nil {
				if err := m.code(ctx, tx); err != nil {
					return err
				}
			} else if m.sql != "" {
				if _, err := tx.tx.ExecContext(ctx, m.sql); err != nil {
					return err
				}
			}
			_, err = tx.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, m.version, m.name, time.Now().UnixMicro())
			return err
		})
		if IsNewerSchema(err) {
			return err
		}
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

// checkpointLoop copies the WAL into the database file every 200 ms from a
// connection of its own (PASSIVE: it never blocks the writer or readers),
// and truncates the WAL on close.
func (db *DB) checkpointLoop() {
	defer close(db.checkpointsDone)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-db.stopCheckpoints:
			db.ckpt.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			return
		case <-t.C:
			db.checkpoint()
		}
	}
}

// walStamp is the size and modification time of the WAL file.
type walStamp struct{ size, mod int64 }

// checkpoint copies the WAL into the database file from the checkpoint
// connection (PASSIVE: it never blocks the writer or readers) and asks the
// writer to restart the WAL once it is walRestartPages long. A WAL not
// written since a checkpoint found every frame copied has nothing to copy:
// it is left alone, without a statement (an idle server's most frequent
// work). File times may be coarse (a write in the same clock tick as the
// look would not change them), so a WAL written within the last second is
// always checkpointed.
func (db *DB) checkpoint() {
	var st walStamp
	if fi, err := os.Stat(db.walPath); err == nil && time.Since(fi.ModTime()) > time.Second {
		st = walStamp{fi.Size(), fi.ModTime().UnixNano()}
		if st == db.walCopied {
			return
		}
	}
	busy, logPages, done, ok := passiveCheckpoint(db.ckpt)
	if ok && int64(logPages) >= db.walRestartPages.Load() {
		db.walFull.Store(true)
	}
	db.walCopied = walStamp{}
	if ok && !busy && done == logPages {
		db.walCopied = st // zero (never matched) unless the WAL was last written over a second ago
	}
}

// passiveCheckpoint runs a PASSIVE checkpoint on c and reports whether
// another checkpoint was running (busy: nothing was copied), how many
// frames the WAL holds and how many of them are copied; ok is false (and
// the error logged) when it failed.
func passiveCheckpoint(c *sql.DB) (busy bool, logPages, copied int, ok bool) {
	var b int
	if err := c.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&b, &logPages, &copied); err != nil {
		slog.Warn("sqlite checkpoint", "err", err)
		return false, 0, 0, false
	}
	return b != 0, logPages, copied, true
}

// The WAL starts over from its beginning only when a write transaction
// begins with every frame already copied into the database file. Under a
// steady load the writer always has frames the background checkpoint has
// not copied yet, so the WAL would grow without end: at the send rate of a
// 2-core machine, 16 MB a second, until the disk is full. So once the WAL
// holds walRestartPages frames, the writer itself, between two
// transactions, copies what the background checkpoints left; its next
// transaction then writes from the start of the WAL, which
// journal_size_limit cuts back to walSizeLimit bytes if it grew longer.
const (
	walRestartPages = 8192             // 32 MiB of 4 KiB pages
	walSizeLimit    = 64 * 1024 * 1024 // bytes
)

// restartWAL runs on the writer between transactions. When the last
// checkpoint found the WAL full, it checkpoints from the writer's own
// connection. It tries again after the next transaction when the
// background checkpoint was running (busy, having copied nothing), and
// leaves it to the next background checkpoint to ask again when a reader
// kept it from copying everything.
func (db *DB) restartWAL() {
	if !db.walFull.CompareAndSwap(true, false) {
		return
	}
	if busy, _, _, ok := passiveCheckpoint(db.write); ok && busy {
		db.walFull.Store(true)
	}
}
