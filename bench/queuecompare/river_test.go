package queuecompare

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// riverOptions tune the River client; see the flags in queue_bench_test.go.
type riverOptions struct {
	workers  int           // QueueConfig.MaxWorkers of the one queue
	cooldown time.Duration // Config.FetchCooldown
	poll     time.Duration // Config.FetchPollInterval
	load     bool          // the worker loads the message row before sending it
	direct   bool          // the worker's UPDATE commits on its own, not through the writer
}

// deliverArgs is the delivery job: the message's id (and, only when the
// worker does not load the row, the insert's start time for the latency).
type deliverArgs struct {
	MessageID string `json:"message_id"`
	CreatedAt int64  `json:"created_at,omitempty"`
}

func (deliverArgs) Kind() string { return "deliver" }

// riverQueue is River as Switchboard would use it: the producer inserts the
// message and, in the same transaction, the delivery job with InsertTx; a
// River worker loads the message, calls the provider and marks the message
// delivered, and River completes the job itself (its batch completer updates
// the river_job row afterwards). The worker's UPDATE goes through the same
// group-commit writer as the in-table queue's finish, so concurrent jobs
// share commits instead of paying one fsync each.
type riverQueue[TTx any] struct {
	name_   string
	opt     riverOptions
	driver  riverdriver.Driver[TTx]
	client  *river.Client[TTx]
	started bool
	db      db
	finish  string
	load    string
}

func newRiver(d db, opt riverOptions) (queue, error) { return newRiverNamed(d, opt, "river") }

func newRiverNamed(d db, opt riverOptions, name string) (queue, error) {
	finish := rebind(d.dialect(), `UPDATE messages SET status = 'delivered', delivered_at = ?, sent_at = COALESCE(sent_at, ?)
		WHERE id = ? AND status IN ('queued', 'sent')`)
	load := rebind(d.dialect(), loadMessageSQL)
	switch d := d.(type) {
	case *pgDB:
		return &riverQueue[pgx.Tx]{name_: name, opt: opt, driver: riverpgxv5.New(d.pool), db: d, finish: finish, load: load}, nil
	case *sqliteDB:
		return &riverQueue[*sql.Tx]{name_: name, opt: opt, driver: riversqlite.New(d.db), db: d, finish: finish, load: load}, nil
	}
	return nil, fmt.Errorf("river: no driver for %T", d)
}

func (q *riverQueue[TTx]) name() string { return q.name_ }

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// setup runs River's migrations into the fresh schema (PostgreSQL: the
// search_path of the pool) or database file.
func (q *riverQueue[TTx]) setup(ctx context.Context, _ db) error {
	m, err := rivermigrate.New(q.driver, &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// runAt leaves the in-table queue's column empty: River keeps the queue.
func (q *riverQueue[TTx]) runAt(time.Time) any { return nil }

func (q *riverQueue[TTx]) enqueue(ctx context.Context, tx txn, m *msg) error {
	args := deliverArgs{MessageID: m.id}
	if !q.opt.load {
		args.CreatedAt = m.createdAt
	}
	_, err := q.client.InsertTx(ctx, tx.raw().(TTx), args, nil)
	return err
}

func (q *riverQueue[TTx]) afterCommit() {} // River notifies its producers itself

func (q *riverQueue[TTx]) start(ctx context.Context, e *env) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &deliverWorker[TTx]{q: q, env: e})
	cfg := &river.Config{
		FetchCooldown:     q.opt.cooldown,
		FetchPollInterval: q.opt.poll,
		Logger:            quietLogger(),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: q.opt.workers}},
		Workers:           workers,
	}
	if e.insertOnly {
		cfg.Queues = nil // an insert-only client, never started
	}
	client, err := river.NewClient(q.driver, cfg)
	if err != nil {
		return err
	}
	q.client = client
	if e.insertOnly {
		return nil
	}
	q.started = true
	return client.Start(ctx)
}

func (q *riverQueue[TTx]) stop(ctx context.Context) error {
	if !q.started {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return q.client.Stop(ctx)
}

// check reports River jobs that were not completed by the end (their
// completion is written after the work, in batches).
func (q *riverQueue[TTx]) check(ctx context.Context, d db) string {
	n, err := d.count(ctx, `SELECT COUNT(*) FROM river_job WHERE state <> 'completed'`)
	if err != nil {
		return "river_job: " + err.Error()
	}
	if n > 0 {
		return fmt.Sprintf("%d river_job rows not completed", n)
	}
	return ""
}

type deliverWorker[TTx any] struct {
	river.WorkerDefaults[deliverArgs]
	q   *riverQueue[TTx]
	env *env
}

func (w *deliverWorker[TTx]) Work(ctx context.Context, job *river.Job[deliverArgs]) error {
	m := msg{id: job.Args.MessageID, createdAt: job.Args.CreatedAt, to: "+15550000000"}
	if w.q.opt.load {
		var err error
		if m, err = w.q.db.loadMsg(ctx, w.q.load, job.Args.MessageID); err != nil {
			w.env.fail("load", err)
			return err
		}
	}
	if err := provider(&m); err != nil {
		return err
	}
	at := time.Now().UnixMicro()
	var err error
	if w.q.opt.direct {
		err = w.q.db.exec(ctx, w.q.finish, at, at, m.id)
	} else {
		err = w.env.w.write(func(ctx context.Context, tx txn) error { return tx.exec(ctx, w.q.finish, at, at, m.id) })
	}
	if err != nil {
		w.env.fail("finish", err)
		return err
	}
	w.env.delivered(&m, time.Now())
	return nil
}
