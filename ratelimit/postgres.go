package ratelimit

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SQL is what [Postgres] needs of a database: one statement that returns a
// row, scanned into dest, and one that returns none. The store's pool
// (sqlstore.DB) provides it, so that the limiter's statements take their
// connections like every other; [SQLDB] adapts a *sql.DB.
type SQL interface {
	ScanRow(ctx context.Context, query string, args []any, dest ...any) error
	ExecRows(ctx context.Context, query string, args ...any) (int64, error)
}

// pgGCRA is the PostgreSQL side of [gcra]: one UPSERT per decision, atomic
// on the bucket's row, reading the time from the database server's clock
// (clock_timestamp(), in microseconds since the Unix epoch), so that nodes
// with skewed clocks agree, as with [Redis].
//
// $1 is the bucket, $2 the emission interval and $3 the burst window, both
// in microseconds. A new row is an allowed request. On an existing row, the
// TAT is capped to [now, now+window] as gcra does; the request is allowed
// (ok) when one more interval still fits in the window, and then the TAT
// moves on by one interval; a denied request leaves it as it was. The row
// returns the TAT after the decision, the decision, and now: enough to
// rebuild the whole Decision. The table is created by the store's
// migration 0014 (sqlstore/migrations/0014_rate_limits.postgres.sql).
const pgGCRA = `INSERT INTO rate_limits AS r (key, tat, ok, seen)
SELECT $1, n.t + $2, true, n.t FROM (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS t) n
ON CONFLICT (key) DO UPDATE SET
  ok = LEAST(GREATEST(r.tat, EXCLUDED.seen), EXCLUDED.seen + $3) + $2 - EXCLUDED.seen <= $3,
  tat = CASE WHEN LEAST(GREATEST(r.tat, EXCLUDED.seen), EXCLUDED.seen + $3) + $2 - EXCLUDED.seen <= $3
    THEN LEAST(GREATEST(r.tat, EXCLUDED.seen), EXCLUDED.seen + $3) + $2 ELSE r.tat END,
  seen = EXCLUDED.seen
RETURNING tat, ok, seen`

// pgRefund gives back one request of bucket $1: its TAT moves back by one
// emission interval ($2, in microseconds). A TAT that falls before now
// means a full bucket, as gcra reads it.
const pgRefund = `UPDATE rate_limits SET tat = tat - $2 WHERE key = $1`

// pgSweep forgets the buckets that are full again, which an absent row
// means as well.
const pgSweep = `DELETE FROM rate_limits WHERE tat < (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// Postgres is a [Limiter] whose state is shared through a PostgreSQL table,
// for several nodes on one database without Redis. Each decision is one
// statement, one round trip. Buckets whose time has passed stay in the
// table until [Postgres.Sweep] removes them.
type Postgres struct {
	db SQL
}

var _ Limiter = (*Postgres)(nil)

// NewPostgres returns a limiter keeping its state in db's rate_limits table.
func NewPostgres(db SQL) *Postgres { return &Postgres{db: db} }

// Allow implements [Limiter]. Besides invalid arguments it returns the
// database's errors; the Decision is then the zero value.
func (p *Postgres) Allow(ctx context.Context, key string, limit int, period time.Duration) (Decision, error) {
	interval, window, err := params(limit, period)
	if err != nil {
		return Decision{}, err
	}
	var tat, now int64
	var ok bool
	if err := p.db.ScanRow(ctx, pgGCRA, []any{key, interval.Microseconds(), window.Microseconds()}, &tat, &ok, &now); err != nil {
		return Decision{}, fmt.Errorf("ratelimit: postgres: %w", err)
	}
	tat, now = tat*int64(time.Microsecond), now*int64(time.Microsecond)
	if ok {
		tat -= int64(interval) // the TAT this request was judged against
	}
	d, _ := gcra(now, tat, interval, window, limit)
	return d, nil
}

// Refund gives back one request of key that Allow allowed with the same
// limit and period, as [Memory.Refund] does.
func (p *Postgres) Refund(ctx context.Context, key string, limit int, period time.Duration) error {
	interval, _, err := params(limit, period)
	if err != nil {
		return err
	}
	if _, err := p.db.ExecRows(ctx, pgRefund, key, interval.Microseconds()); err != nil {
		return fmt.Errorf("ratelimit: postgres: %w", err)
	}
	return nil
}

// Sweep deletes the buckets that are full again and returns how many.
func (p *Postgres) Sweep(ctx context.Context) (int64, error) {
	return p.db.ExecRows(ctx, pgSweep)
}

// SQLDB adapts a *sql.DB to [SQL].
type SQLDB struct{ DB *sql.DB }

// ScanRow implements [SQL].
func (d SQLDB) ScanRow(ctx context.Context, query string, args []any, dest ...any) error {
	return d.DB.QueryRowContext(ctx, query, args...).Scan(dest...)
}

// ExecRows implements [SQL].
func (d SQLDB) ExecRows(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := d.DB.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
