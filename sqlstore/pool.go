package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	sb "github.com/switchboard/switchboard"
)

// The PostgreSQL connection pool.
//
// Every node opens at most MaxConns connections (plus one of its own for
// LISTEN). A caller that finds them all taken waits at most Wait for one;
// then, like a caller whose connection cannot be opened at all (the server
// is unreachable, or refuses more clients: SQLSTATE 53300), it gets an
// error that the HTTP API answers with 503 DATABASE_UNAVAILABLE and a
// Retry-After, never 500.

// DefaultMaxConns is the default size of a node's PostgreSQL pool: five
// nodes at 16 (and one LISTEN connection each) use 85 of PostgreSQL's
// default max_connections of 100, which keeps 3 for superusers.
const DefaultMaxConns = 16

// DefaultConnWait is how long a caller waits for a connection of an
// exhausted pool by default.
const DefaultConnWait = 2 * time.Second

// Options tunes Open. Zero values take the defaults.
type Options struct {
	// MaxConns caps the connections of the PostgreSQL pool
	// (DefaultMaxConns). SQLite ignores it.
	MaxConns int
	// ConnWait bounds the wait for a connection of an exhausted PostgreSQL
	// pool (DefaultConnWait).
	ConnWait time.Duration
	// Writers fixes the number of group-commit writers of a PostgreSQL
	// node (see batch.go); 0 adapts it to the live nodes (autoWriters).
	// SQLite always has one.
	Writers int
	// Log receives the pool's state changes (default slog.Default()).
	Log *slog.Logger
	// HostNodes, when set, is called at every heartbeat of a PostgreSQL
	// node with how many live nodes, this one included, run on its
	// machine (see Heartbeat).
	HostNodes func(n int)
	// PairingSecret, when set (at least MinPairingSecret characters),
	// keys the stored form of pairing codes; see pairingkey.go for where
	// the key comes from without it.
	PairingSecret string
}

func (o *Options) defaults() {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.ConnWait <= 0 {
		o.ConnWait = DefaultConnWait
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// poolState is what the pool remembers of its failures, for the log (a
// line when it starts failing and one when it recovers), /metrics and
// /readyz.
type poolState struct {
	opt Options
	// failing is the reason of the last failure ("pool exhausted",
	// "unreachable") until a connection is taken again; "" while healthy.
	failing atomic.Pointer[string]
	// exhausted and unreachable count the callers turned away.
	exhausted, unreachable atomic.Int64
	// recovered is when (Unix nanoseconds) a connection was last taken
	// after a failure: a caller that began waiting before it and timed out
	// after it waited through the same outage, which it does not declare
	// again.
	recovered atomic.Int64
}

// PoolStats is the state of the PostgreSQL pool for /metrics.
type PoolStats struct {
	sql.DBStats
	// MaxConns is the pool's cap.
	MaxConns int
	// Exhausted counts the callers that waited ConnWait in vain;
	// Unreachable those whose connection could not be opened.
	Exhausted, Unreachable int64
}

// PoolStats returns the pool's counts; ok is false on SQLite.
func (db *DB) PoolStats() (PoolStats, bool) {
	if db.dialect != Postgres {
		return PoolStats{}, false
	}
	return PoolStats{DBStats: db.write.Stats(), MaxConns: db.pool.opt.MaxConns,
		Exhausted: db.pool.exhausted.Load(), Unreachable: db.pool.unreachable.Load()}, true
}

// acquire takes a connection of the PostgreSQL pool, waiting at most
// ConnWait. The connection goes back with Close.
func (db *DB) acquire(ctx context.Context) (*sql.Conn, error) {
	start := time.Now().UnixNano()
	actx, cancel := context.WithTimeout(ctx, db.pool.opt.ConnWait)
	conn, err := db.write.Conn(actx)
	// database/sql tries three pooled connections before it gives up with
	// ErrBadConn; after many broke at once (a burst of canceled requests
	// interrupts their statements), the pool may hold more than that.
	for i := 0; i < db.pool.opt.MaxConns && errors.Is(err, driver.ErrBadConn) && actx.Err() == nil; i++ {
		conn, err = db.write.Conn(actx)
	}
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the caller gave up: no fault of the database
		}
		if errors.Is(err, context.DeadlineExceeded) {
			db.pool.exhausted.Add(1)
			if start < db.pool.recovered.Load() {
				return nil, &UnavailableError{Reason: "pool exhausted", Err: err}
			}
			return nil, db.unavailable("pool exhausted", err)
		}
		db.pool.unreachable.Add(1)
		return nil, db.unavailable("unreachable", err)
	}
	if db.pool.failing.Load() != nil {
		if was := db.pool.failing.Swap(nil); was != nil {
			db.pool.recovered.Store(time.Now().UnixNano())
			db.pool.opt.Log.Info("database: connections are available again", "was", *was)
		}
	}
	return conn, nil
}

// unavailable records a failure to get a connection and returns the error
// callers see.
func (db *DB) unavailable(reason string, err error) error {
	if old := db.pool.failing.Swap(&reason); old == nil || *old != reason {
		args := []any{"reason", reason, "err", err}
		if reason == "pool exhausted" {
			args = append(args, "max_conns", db.pool.opt.MaxConns, "wait", db.pool.opt.ConnWait.String())
		}
		db.pool.opt.Log.Warn("database: requests are turned away with 503 DATABASE_UNAVAILABLE", args...)
	}
	return &UnavailableError{Reason: reason, Err: err}
}

// PoolFailing returns why the last caller could not get a connection ("pool
// exhausted", "unreachable"), or "" when the last one could.
func (db *DB) PoolFailing() string {
	if p := db.pool.failing.Load(); p != nil {
		return *p
	}
	return ""
}

// classify turns the error of a statement on PostgreSQL that failed because
// of the connection or the server's state into an *UnavailableError; other
// errors, and nil, are returned as they are.
func (db *DB) classify(err error) error {
	if err == nil || !connectionError(err) {
		return err
	}
	db.pool.unreachable.Add(1)
	return db.unavailable("unreachable", err)
}

// connectionError reports whether err says the database cannot serve at all
// rather than that a statement failed: no connection could be opened or it
// broke, or the server is refusing connections or shutting down.
func connectionError(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "53300", // too_many_connections
			"57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		}
		return pe.Code[:2] == "08" // connection exception
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) // the server closed the connection mid-statement
}

// UnavailableError is the error of a caller the database could not serve
// in time. It reads as DATABASE_UNAVAILABLE to errors.As with an
// **sb.Error, and unwraps to the driver's error for the logs.
type UnavailableError struct {
	Reason string // "pool exhausted" or "unreachable"
	Err    error
}

func (e *UnavailableError) Error() string { return "database " + e.Reason + ": " + e.Err.Error() }

func (e *UnavailableError) Unwrap() error { return e.Err }

// As lets errors.As find the domain error the API answers with.
func (e *UnavailableError) As(target any) bool {
	if p, ok := target.(**sb.Error); ok {
		*p = errDatabaseUnavailable
		return true
	}
	return false
}

var errDatabaseUnavailable = sb.Errorf(sb.CodeDatabaseUnavailable,
	"The database is busy or unreachable; the request was not carried out. Retry later.")

// Ping reports whether the database answers, taking a connection the way
// every request does.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	return db.queryRow(ctx, `SELECT 1`).Scan(&one)
}

// ScanRow runs query, which returns one row, and scans it into dest: for
// adapters that keep a table of their own in the store's database (the
// rate limiter's rate_limits). It takes its connection like every
// statement of the store.
func (db *DB) ScanRow(ctx context.Context, query string, args []any, dest ...any) error {
	return db.queryRow(ctx, query, args...).Scan(dest...)
}

// ExecRows runs query and returns the number of rows it affected, for the
// same adapters as ScanRow.
func (db *DB) ExecRows(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := db.exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
