package queuecompare

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The workload, the same for both queues: -qc.producers goroutines, each in
// a closed loop, insert a message row and enqueue its delivery in the same
// transaction (through the group-commit writer, synchronous commits), while
// the queue's workers take each message, call a no-op provider and mark the
// message delivered. Every slice of a round runs one queue in a fresh
// PostgreSQL schema (or SQLite file): warmup, a measured window, then the
// producers stop and the benchmark waits for the queue to drain.
var (
	flagDialects   = flag.String("qc.dialects", "postgres,sqlite", "databases to run on: postgres, sqlite (postgres needs SWITCHBOARD_TEST_POSTGRES)")
	flagQueues     = flag.String("qc.queues", "in-table,river", "queues to compare; the first is the baseline of the ratios")
	flagRounds     = flag.Int("qc.rounds", 5, "alternating rounds; each runs every queue once")
	flagDuration   = flag.Duration("qc.duration", 4*time.Second, "measured window of each queue in each round")
	flagWarmup     = flag.Duration("qc.warmup", time.Second, "load before each measured window, not recorded")
	flagDrain      = flag.Duration("qc.drain", 20*time.Second, "longest wait for the queue to drain after the producers stop")
	flagProducers  = flag.Int("qc.producers", 64, "concurrent producers")
	flagBatch      = flag.Int("qc.batch", 512, "in-table: messages claimed at once (delivery.Options.Batch)")
	flagPool       = flag.Int("qc.pool", 32, "postgres: connections in the pool both queues share (sqlstore uses 32)")
	flagRate       = flag.Float64("qc.rate", 0, "offered load in messages/s over all producers (open loop, latency from the scheduled time); 0 for closed loop, as fast as they go")
	flagInsertOnly = flag.Bool("qc.insert-only", false, "run the producers only, with no workers: the cost of the enqueue alone")

	flagRiverWorkers  = flag.Int("qc.river-workers", 512, "river: MaxWorkers of the queue")
	flagRiverCooldown = flag.Duration("qc.river-cooldown", 10*time.Millisecond, "river: FetchCooldown (River's default is 100ms)")
	flagRiverPoll     = flag.Duration("qc.river-poll", time.Second, "river: FetchPollInterval")
	flagRiverLoad     = flag.Bool("qc.river-load", true, "river: the worker loads the message row before calling the provider (the in-table claim returns the rows)")
	flagRiverDirect   = flag.Bool("qc.river-direct", false, "river: the worker's UPDATE commits on its own instead of through the group-commit writer")
)

// queue is one way of queueing and delivering messages.
type queue interface {
	name() string
	// setup creates what the queue needs beyond the messages table.
	setup(ctx context.Context, d db) error
	// runAt is the value of messages.run_at for a new message.
	runAt(now time.Time) any
	// enqueue runs in the producer's transaction, after the message insert.
	enqueue(ctx context.Context, tx txn, m *msg) error
	// afterCommit runs after the producer's transaction has committed.
	afterCommit()
	start(ctx context.Context, e *env) error
	stop(ctx context.Context) error
	// check reports anything left over in the queue's own tables.
	check(ctx context.Context, d db) string
}

// provider is the simulated message provider: instant, and it accepts any
// message with a recipient.
func provider(m *msg) error {
	if m.to == "" {
		return errors.New("provider: no recipient")
	}
	return nil
}

// env is what a running slice shares with its queue.
type env struct {
	dialect    dialect
	insertOnly bool
	db         db
	w          *writer

	winStart, winEnd atomic.Int64 // Unix microseconds; 0 until set

	accepted   atomic.Int64
	ndelivered atomic.Int64
	errs       atomic.Int64
	firstErr   atomic.Pointer[string]

	mu  sync.Mutex
	e2e []time.Duration // insert start to delivered, for inserts started in the window
}

func (e *env) inWindow(micros int64) bool {
	s, end := e.winStart.Load(), e.winEnd.Load()
	return s != 0 && micros >= s && (end == 0 || micros < end)
}

// delivered records that m's delivery has committed at t.
func (e *env) delivered(m *msg, t time.Time) {
	e.ndelivered.Add(1)
	if e.inWindow(m.createdAt) {
		d := t.Sub(time.UnixMicro(m.createdAt))
		e.mu.Lock()
		e.e2e = append(e.e2e, d)
		e.mu.Unlock()
	}
}

func (e *env) fail(what string, err error) {
	e.errs.Add(1)
	s := what + ": " + err.Error()
	e.firstErr.CompareAndSwap(nil, &s)
}

// sliceResult is one queue's measurement in one round.
type sliceResult struct {
	queue      string
	window     time.Duration
	accepted   int64 // in the window
	delivered  int64 // in the window
	insLat     []time.Duration
	e2eLat     []time.Duration
	backlog    int64 // accepted but not delivered at the window's end
	drain      time.Duration
	drained    bool
	total      int64 // accepted over the whole slice
	errs       int64
	notes      []string
	writes     string // rows written and space used per message
	insertOnly bool
}

func (r *sliceResult) acceptedPerSec() float64 {
	return float64(r.accepted) / r.window.Seconds()
}
func (r *sliceResult) deliveredPerSec() float64 {
	return float64(r.delivered) / r.window.Seconds()
}

type sliceConfig struct {
	dialect    dialect
	pgURL      string // postgres: the base connection URL
	dir        string // sqlite: where the files go
	producers  int
	warmup     time.Duration
	window     time.Duration
	drain      time.Duration
	newQueue   func(db) (queue, error)
	tag        string // unique within the run, for schema and file names
	insertOnly bool
	rate       float64 // messages/s over all producers; 0 for closed loop
}

// fresh is a new, empty database: a new schema on PostgreSQL, or a new
// SQLite file.
type fresh struct {
	db     db
	admin  *pgDB // postgres: a connection outside the schema
	schema string
}

func openFresh(ctx context.Context, c *sliceConfig) (*fresh, error) {
	if c.dialect == sqlite {
		d, err := openSQLite(c.dir, c.tag)
		if err != nil {
			return nil, err
		}
		return &fresh{db: d}, nil
	}
	admin, err := openPG(ctx, c.pgURL, 1)
	if err != nil {
		return nil, err
	}
	f := &fresh{admin: admin, schema: "queuecompare_" + c.tag}
	if err := admin.exec(ctx, "CREATE SCHEMA "+f.schema); err != nil {
		admin.close()
		return nil, err
	}
	// Durable commits whatever the server's default, and every table in
	// the fresh schema.
	u, err := withParams(c.pgURL, map[string]string{"search_path": f.schema, "synchronous_commit": "on"})
	if err == nil {
		f.db, err = openPG(ctx, u, int32(*flagPool))
	}
	if err != nil {
		f.cleanup()
		return nil, err
	}
	return f, nil
}

// cleanup closes the database and drops the schema or removes the file.
func (f *fresh) cleanup() {
	if f.db != nil {
		f.db.close()
	}
	if f.admin == nil {
		return
	}
	if err := f.admin.exec(context.Background(), "DROP SCHEMA "+f.schema+" CASCADE"); err != nil {
		fmt.Fprintf(os.Stderr, "queuecompare: dropping schema %s: %v\n", f.schema, err)
	}
	f.admin.close()
}

// writeStats tells how many rows each table had inserted and updated per
// message (PostgreSQL, from pg_stat_user_tables, with the share of HOT
// updates, which write no index entries) and how much space the tables and
// their indexes take per message. It closes the database on PostgreSQL, so
// that its sessions flush their statistics.
func (f *fresh) writeStats(ctx context.Context, messages int64) string {
	if messages == 0 {
		return ""
	}
	per := func(n int64) float64 { return float64(n) / float64(messages) }
	if f.admin == nil {
		sd := f.db.(*sqliteDB)
		size, err := sd.count(ctx, `SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`)
		if err != nil {
			return "size: " + err.Error()
		}
		if st, err := os.Stat(sd.path + "-wal"); err == nil {
			size += st.Size()
		}
		return fmt.Sprintf("file and WAL %.0f B/msg", per(size))
	}
	f.db.close()
	f.db = nil
	time.Sleep(500 * time.Millisecond) // sessions report their statistics as they end
	rows, err := f.admin.pool.Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, pg_total_relation_size(relid)
		FROM pg_stat_user_tables WHERE schemaname = $1 ORDER BY relname`, f.schema)
	if err != nil {
		return "stats: " + err.Error()
	}
	defer rows.Close()
	var parts []string
	var size int64
	for rows.Next() {
		var name string
		var ins, upd, hot, bytes int64
		if err := rows.Scan(&name, &ins, &upd, &hot, &bytes); err != nil {
			return "stats: " + err.Error()
		}
		size += bytes
		if per(ins+upd) < 0.005 { // River's bookkeeping tables
			continue
		}
		p := fmt.Sprintf("%s ins %.2f upd %.2f", name, per(ins), per(upd))
		if upd > 0 {
			p += fmt.Sprintf(" (%.0f%% HOT)", 100*float64(hot)/float64(upd))
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("per message: %s; tables+indexes %.0f B", strings.Join(parts, ", "), per(size))
}

// runSlice measures one queue once.
func runSlice(ctx context.Context, c *sliceConfig) (*sliceResult, error) {
	f, err := openFresh(ctx, c)
	if err != nil {
		return nil, err
	}
	defer f.cleanup()
	d := f.db
	for _, s := range []string{messagesDDL, messagesTenantIndex} {
		if err := d.exec(ctx, s); err != nil {
			return nil, err
		}
	}
	q, err := c.newQueue(d)
	if err != nil {
		return nil, err
	}
	if err := q.setup(ctx, d); err != nil {
		return nil, fmt.Errorf("%s setup: %w", q.name(), err)
	}
	writers := 4 // as sqlstore: 4 writers on PostgreSQL, 1 on SQLite
	if c.dialect == sqlite {
		writers = 1
	}
	e := &env{dialect: c.dialect, insertOnly: c.insertOnly, db: d, w: newWriter(d, writers)}
	if err := q.start(ctx, e); err != nil {
		e.w.close()
		return nil, fmt.Errorf("%s start: %w", q.name(), err)
	}

	// Producers run until stop is set; they are never cancelled mid-write, so
	// every accepted message is counted.
	var stop atomic.Bool
	var seq atomic.Int64
	insLat := make([][]time.Duration, c.producers)
	var pwg sync.WaitGroup
	insert := rebind(c.dialect, insertMessageSQL)
	var interval time.Duration
	if c.rate > 0 {
		interval = time.Duration(float64(c.producers) / c.rate * float64(time.Second))
	}
	begin := time.Now()
	for p := range c.producers {
		pwg.Go(func() {
			next := begin.Add(interval * time.Duration(p) / time.Duration(c.producers))
			for !stop.Load() {
				t0 := time.Now()
				if interval > 0 {
					// Open loop: each message has its time; a producer that
					// falls behind sends at once, and its latency counts from
					// the time the message was due.
					if d := next.Sub(t0); d > 0 {
						time.Sleep(d)
					}
					t0 = next
					next = next.Add(interval)
				}
				n := seq.Add(1)
				m := msg{
					id:        fmt.Sprintf("msg_%016d", n),
					tenant:    fmt.Sprintf("ten_%02d", n%16),
					from:      "+15550001000",
					to:        fmt.Sprintf("+1555%07d", n%10_000_000),
					body:      "Your verification code is 482913. Reply STOP to opt out.",
					createdAt: t0.UnixMicro(),
				}
				runAt := q.runAt(t0)
				err := e.w.write(func(ctx context.Context, tx txn) error {
					if err := tx.exec(ctx, insert, m.id, m.tenant, m.from, m.to, m.body, m.createdAt, runAt); err != nil {
						return err
					}
					return q.enqueue(ctx, tx, &m)
				})
				if err != nil {
					e.fail("insert", err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				t1 := time.Now()
				e.accepted.Add(1)
				q.afterCommit()
				if e.inWindow(m.createdAt) {
					insLat[p] = append(insLat[p], t1.Sub(t0))
				}
			}
		})
	}

	time.Sleep(c.warmup)
	start := time.Now()
	acc0, del0 := e.accepted.Load(), e.ndelivered.Load()
	e.winStart.Store(start.UnixMicro())
	time.Sleep(c.window)
	end := time.Now()
	e.winEnd.Store(end.UnixMicro())
	acc1, del1 := e.accepted.Load(), e.ndelivered.Load()

	stop.Store(true)
	pwg.Wait()
	stopped := time.Now()
	total := e.accepted.Load()
	res := &sliceResult{
		queue:      q.name(),
		window:     end.Sub(start),
		accepted:   acc1 - acc0,
		delivered:  del1 - del0,
		backlog:    acc1 - del1,
		total:      total,
		insertOnly: c.insertOnly,
	}
	deadline := stopped.Add(c.drain)
	if c.insertOnly {
		deadline = stopped
	}
	for e.ndelivered.Load() < total && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	res.drained = e.ndelivered.Load() >= total
	res.drain = time.Since(stopped)
	if err := q.stop(ctx); err != nil {
		res.notes = append(res.notes, "stop: "+err.Error())
	}
	e.w.close()

	for _, l := range insLat {
		res.insLat = append(res.insLat, l...)
	}
	e.mu.Lock()
	res.e2eLat = e.e2e
	e.mu.Unlock()
	res.errs = e.errs.Load()
	if p := e.firstErr.Load(); p != nil {
		res.notes = append(res.notes, "first error: "+*p)
	}
	if n := e.ndelivered.Load(); n > total {
		res.notes = append(res.notes, fmt.Sprintf("%d deliveries for %d messages", n, total))
	}
	// The database must agree with the counters.
	if rows, err := d.count(ctx, `SELECT COUNT(*) FROM messages`); err != nil || rows != total {
		res.notes = append(res.notes, fmt.Sprintf("messages table holds %d rows for %d accepted (%v)", rows, total, err))
	}
	if !c.insertOnly {
		if left, err := d.count(ctx, `SELECT COUNT(*) FROM messages WHERE status <> 'delivered'`); err != nil || left > 0 {
			res.notes = append(res.notes, fmt.Sprintf("%d messages not delivered (%v)", left, err))
		}
		if s := q.check(ctx, d); s != "" {
			res.notes = append(res.notes, s)
		}
	}
	res.writes = f.writeStats(ctx, total)
	return res, nil
}

// BenchmarkQueueCompare runs the comparison on each database of -qc.dialects
// and prints a table per database. It runs once whatever b.N is: use
// -benchtime 1x.
func BenchmarkQueueCompare(b *testing.B) {
	for _, name := range strings.Split(*flagDialects, ",") {
		switch strings.TrimSpace(name) {
		case "postgres":
			b.Run("postgres", func(b *testing.B) {
				u := os.Getenv("SWITCHBOARD_TEST_POSTGRES")
				if u == "" {
					b.Skip("SWITCHBOARD_TEST_POSTGRES is not set (e.g. postgres://127.0.0.1:5432/test?sslmode=disable): skipping PostgreSQL")
				}
				compare(b, postgres, u)
			})
		case "sqlite":
			b.Run("sqlite", func(b *testing.B) { compare(b, sqlite, "") })
		case "":
		default:
			b.Fatalf("unknown dialect %q in -qc.dialects", name)
		}
	}
}

func queueFactory(name string, d dialect) (func(db) (queue, error), error) {
	switch name {
	case "in-table":
		return func(db) (queue, error) { return newInTable(d, *flagBatch), nil }, nil
	case "river":
		opt := riverOptions{
			workers:  *flagRiverWorkers,
			cooldown: *flagRiverCooldown,
			poll:     *flagRiverPoll,
			load:     *flagRiverLoad,
			direct:   *flagRiverDirect,
		}
		return func(x db) (queue, error) { return newRiver(x, opt) }, nil
	case "river-default":
		// River's defaults: 100 workers, FetchCooldown 100ms, FetchPollInterval 1s.
		opt := riverOptions{workers: 100, load: *flagRiverLoad, direct: *flagRiverDirect}
		return func(x db) (queue, error) { return newRiverNamed(x, opt, "river-default") }, nil
	}
	return nil, fmt.Errorf("unknown queue %q in -qc.queues (in-table, river, river-default)", name)
}

func compare(b *testing.B, d dialect, pgURL string) {
	names := strings.Split(*flagQueues, ",")
	factories := make([]func(db) (queue, error), len(names))
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
		f, err := queueFactory(names[i], d)
		if err != nil {
			b.Fatal(err)
		}
		factories[i] = f
	}
	ctx := context.Background()
	out := os.Stdout
	load := "closed loop"
	if *flagRate > 0 {
		load = fmt.Sprintf("open loop at %.0f msg/s", *flagRate)
	}
	fmt.Fprintf(out, "\n%s: %d rounds x %v measured per queue (warmup %v), %d producers %s, %s\n",
		d, *flagRounds, *flagDuration, *flagWarmup, *flagProducers, load, configLine(d))

	results := make(map[string][]*sliceResult)
	runID := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	b.ResetTimer()
	for r := range *flagRounds {
		// Alternate the order from round to round.
		order := make([]int, len(names))
		for i := range order {
			order[i] = (i + r) % len(names)
		}
		for _, i := range order {
			c := &sliceConfig{
				dialect:    d,
				pgURL:      pgURL,
				dir:        b.TempDir(),
				producers:  *flagProducers,
				warmup:     *flagWarmup,
				window:     *flagDuration,
				drain:      *flagDrain,
				newQueue:   factories[i],
				insertOnly: *flagInsertOnly,
				rate:       *flagRate,
				tag:        fmt.Sprintf("%s_r%d_%s", runID, r, strings.ReplaceAll(names[i], "-", "")),
			}
			res, err := runSlice(ctx, c)
			if err != nil {
				b.Fatalf("round %d, %s: %v", r+1, names[i], err)
			}
			results[names[i]] = append(results[names[i]], res)
			fmt.Fprintf(out, "  round %d %-13s %s\n", r+1, names[i], res.line())
			if res.writes != "" {
				fmt.Fprintf(out, "          %-13s %s\n", "", res.writes)
			}
			debug.FreeOSMemory()
		}
	}
	b.StopTimer()
	report(b, out, names, results)
}

func configLine(d dialect) string {
	s := "group commit (4 writers"
	if *flagInsertOnly {
		s = "INSERT ONLY (no workers); " + s
	}
	if d == sqlite {
		s = strings.Replace(s, "(4 writers", "(1 writer, 1 connection, WAL, synchronous=FULL", 1)
	} else {
		s += fmt.Sprintf(", pool of %d, synchronous_commit=on", *flagPool)
	}
	s += fmt.Sprintf("); in-table batch %d; River %s MaxWorkers %d FetchCooldown %v FetchPollInterval %v load=%v direct=%v",
		*flagBatch, riverVersion(), *flagRiverWorkers, *flagRiverCooldown, *flagRiverPoll, *flagRiverLoad, *flagRiverDirect)
	return s
}

// riverVersion reads River's version from go.mod (test binaries carry no
// module information); tests run in the package's directory.
func riverVersion() string {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		return "(unknown version)"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "github.com/riverqueue/river" {
			return f[1]
		}
	}
	return "(unknown version)"
}

func (r *sliceResult) line() string {
	s := fmt.Sprintf("accepted/s %7.0f  delivered/s %7.0f  insert p50/p99 %6.1f/%6.1f ms  e2e p50/p99 %7.1f/%7.1f ms  backlog %6d  drain %5.2fs",
		r.acceptedPerSec(), r.deliveredPerSec(),
		ms(percentile(r.insLat, 50)), ms(percentile(r.insLat, 99)),
		ms(percentile(r.e2eLat, 50)), ms(percentile(r.e2eLat, 99)),
		r.backlog, r.drain.Seconds())
	if r.insertOnly {
		s += " (insert only)"
	} else if !r.drained {
		s += " NOT DRAINED"
	}
	if r.errs > 0 {
		s += fmt.Sprintf("  errors %d", r.errs)
	}
	for _, n := range r.notes {
		s += "  [" + n + "]"
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the p-th percentile (nearest rank) of ds, sorting it.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(p/100*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// median returns the median of xs (which it sorts) with the smallest and
// largest.
func median(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	n := len(xs)
	med = xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return med, xs[0], xs[n-1]
}

type metric struct {
	name string
	unit string
	get  func(*sliceResult) float64
}

var metrics = []metric{
	{"accepted/s", "accepted-ratio", (*sliceResult).acceptedPerSec},
	{"delivered/s", "delivered-ratio", (*sliceResult).deliveredPerSec},
	{"insert p50", "insert-p50-ratio", func(r *sliceResult) float64 { return ms(percentile(r.insLat, 50)) }},
	{"insert p99", "insert-p99-ratio", func(r *sliceResult) float64 { return ms(percentile(r.insLat, 99)) }},
	{"e2e p50", "e2e-p50-ratio", func(r *sliceResult) float64 { return ms(percentile(r.e2eLat, 50)) }},
	{"e2e p99", "e2e-p99-ratio", func(r *sliceResult) float64 { return ms(percentile(r.e2eLat, 99)) }},
}

// report prints the aggregate table and the per-round ratios of every queue
// to the first, and reports the median ratios as benchmark metrics.
func report(b *testing.B, out io.Writer, names []string, results map[string][]*sliceResult) {
	fmt.Fprintf(out, "\n%-13s %10s %11s %8s %8s %9s %9s %11s %9s %s\n",
		"queue", "accepted/s", "delivered/s", "ins p50", "ins p99", "e2e p50", "e2e p99", "max backlog", "max drain", "drained")
	for _, n := range names {
		var agg sliceResult
		drained := 0
		for _, r := range results[n] {
			agg.window += r.window
			agg.accepted += r.accepted
			agg.delivered += r.delivered
			agg.insLat = append(agg.insLat, r.insLat...)
			agg.e2eLat = append(agg.e2eLat, r.e2eLat...)
			agg.backlog = max(agg.backlog, r.backlog)
			agg.drain = max(agg.drain, r.drain)
			if r.drained {
				drained++
			}
		}
		fmt.Fprintf(out, "%-13s %10.0f %11.0f %5.1f ms %5.1f ms %6.1f ms %6.1f ms %11d %8.2fs %d/%d rounds\n",
			n, agg.acceptedPerSec(), agg.deliveredPerSec(),
			ms(percentile(agg.insLat, 50)), ms(percentile(agg.insLat, 99)),
			ms(percentile(agg.e2eLat, 50)), ms(percentile(agg.e2eLat, 99)),
			agg.backlog, agg.drain.Seconds(), drained, len(results[n]))
		b.ReportMetric(agg.acceptedPerSec(), n+"-accepted/s")
		b.ReportMetric(agg.deliveredPerSec(), n+"-delivered/s")
	}
	base := results[names[0]]
	for _, n := range names[1:] {
		fmt.Fprintf(out, "%s/%s, median of per-round ratios (min-max) over %d rounds:\n", n, names[0], len(base))
		for _, m := range metrics {
			var ratios []float64
			for i, r := range results[n] {
				if den := m.get(base[i]); den > 0 {
					ratios = append(ratios, m.get(r)/den)
				}
			}
			med, lo, hi := median(ratios)
			fmt.Fprintf(out, "  %-12s %6.3fx  (%.3f-%.3f)\n", m.name, med, lo, hi)
			if len(names) == 2 {
				b.ReportMetric(med, m.unit)
			}
		}
	}
}
