package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/bench/rounds"
	"github.com/switchboard/switchboard/sqlstore"
)

// benchReport is what a scenario's report hook adds to the report: text
// lines after the table, JSON lines before the summary line, and reasons the
// run cannot be trusted (which make the command fail).
type benchReport struct {
	text     string
	json     [][]byte
	failures []string
}

// close runs the closers registered by the scenario, last first.
func (e *benchEnv) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
}

// benchPostgresSchema creates a fresh schema in the PostgreSQL database of
// env.database, registers its removal (with everything in it) as a closer,
// and returns the URL with a search_path pointing at it, as the tests do.
// The closer runs when the command ends, after the server has stopped.
func benchPostgresSchema(ctx context.Context, env *benchEnv) (string, error) {
	var b [6]byte
	rand.Read(b[:])
	schema := "sbbench_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", env.database)
	if err != nil {
		return "", err
	}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return "", fmt.Errorf("postgres: create schema: %w", err)
	}
	env.closers = append(env.closers, func() {
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			fmt.Fprintf(env.stderr, "bench: dropping schema %s: %v\n", schema, err)
		}
		admin.Close()
	})
	sep := "?"
	if strings.Contains(env.database, "?") {
		sep = "&"
	}
	return env.database + sep + "search_path=" + schema, nil
}

// benchSendRecipients are simulator magic numbers: always delivered and
// never in quiet hours, so every send answers 202. +15005550000 resolves
// `auto` to chat and +15005550004 to sms; the bench alternates them.
var benchSendRecipients = []string{"+15005550000", "+15005550004"}

// benchSendBodies returns a send's body for each of benchSendRecipients.
func benchSendBodies() [][]byte {
	bodies := make([][]byte, len(benchSendRecipients))
	for i, to := range benchSendRecipients {
		bodies[i] = []byte(`{"to":"` + to + `","body":"Your order has shipped","channel":"auto"}`)
	}
	return bodies
}

// Targets of the send scenario besides the ratio.
const (
	benchSendP99Target = 25 * time.Millisecond
	// benchSendKeepUp is the smallest ratio of delivered to accepted
	// messages per second, while the server is loaded, at which the
	// delivery pipeline counts as keeping up.
	benchSendKeepUp = 0.95
	// benchSendDrainWait is how long the bench waits for the backlog to
	// drain once the load has stopped.
	benchSendDrainWait = 60 * time.Second
)

// benchSendSetup prepares the send scenario: a Scale tenant (no rate limit,
// no quota) sending to magic numbers, and a second handle on the server's
// database that samples the delivery backlog every second while the rounds
// run (see benchSendPipeline).
func benchSendSetup(ctx context.Context, env *benchEnv) ([]benchVariant, error) {
	tenant, err := env.createTenant(ctx, "bench send", "scale")
	if err != nil {
		return nil, err
	}
	store, err := sqlstore.Open(ctx, env.database)
	if err != nil {
		return nil, err
	}
	env.closers = append(env.closers, func() { store.Close() })
	server := &benchChild{url: env.serverURL}
	p, err := startBenchSendPipeline(ctx, store, time.Second, []*benchChild{server})
	if err != nil {
		return nil, err
	}
	env.closers = append(env.closers, p.stop)
	env.report = p.report

	hdr := http.Header{"Authorization": {"Bearer " + tenant.LiveKey}, "Content-Type": {"application/json"}}
	bodies := benchSendBodies()
	return []benchVariant{{
		name:   "send (scale, durable)",
		status: http.StatusAccepted,
		request: func(base string, worker int, seq uint64) loadgen.Request {
			if base == env.serverURL {
				p.issued.Add(1)
			}
			return loadgen.Request{Method: http.MethodPost, URL: base + "/v1/messages", Header: hdr,
				Body: bodies[(uint64(worker)+seq)%uint64(len(bodies))]}
		},
		check: func(_ *http.Response, body []byte) error {
			var r struct {
				Data struct {
					MessageID string `json:"message_id"`
					Status    string `json:"status"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &r); err != nil || r.Data.MessageID == "" || r.Data.Status != sb.StatusQueued {
				return fmt.Errorf("want a queued message, got %s", body)
			}
			return nil
		},
	}}, nil
}

// benchSendPipeline watches the delivery pipeline during a send run: every
// interval it samples the backlog (messages queued or sent) and how many
// sends the bench has issued to the server so far. The samples tell whether
// deliveries keep up with accepts while the server is loaded: between two
// samples, accepted - delivered = growth of the backlog.
type benchSendPipeline struct {
	store    *sqlstore.DB
	issued   atomic.Int64 // sends issued to the server (probe included)
	start    time.Time
	counts0  map[string]int64
	interval time.Duration
	// servers are the servers sent to, whose group-commit counters
	// (their /metrics) were commits0 at the start.
	servers  []*benchChild
	commits0 nodeCommits

	quit, done chan struct{}
	once       sync.Once

	mu      sync.Mutex
	samples []benchPipelineSample
	err     error
}

type benchPipelineSample struct {
	at      time.Time
	issued  int64
	backlog int64
}

func startBenchSendPipeline(ctx context.Context, store *sqlstore.DB, interval time.Duration, servers []*benchChild) (*benchSendPipeline, error) {
	counts, err := store.MessageCounts(ctx)
	if err != nil {
		return nil, err
	}
	p := &benchSendPipeline{store: store, start: time.Now(), counts0: counts, interval: interval, servers: servers,
		quit: make(chan struct{}), done: make(chan struct{})}
	if p.commits0, err = nodesCommits(ctx, servers); err != nil {
		return nil, fmt.Errorf("reading the server's group-commit counters: %w", err)
	}
	if err := p.sample(ctx); err != nil {
		return nil, err
	}
	go p.loop(ctx)
	return p, nil
}

func (p *benchSendPipeline) sample(ctx context.Context) error {
	issued := p.issued.Load()
	n, err := p.store.QueueDepth(ctx)
	if err != nil {
		return fmt.Errorf("sampling the backlog: %w", err)
	}
	p.mu.Lock()
	p.samples = append(p.samples, benchPipelineSample{at: time.Now(), issued: issued, backlog: n})
	p.mu.Unlock()
	return nil
}

func (p *benchSendPipeline) loop(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			if err := p.sample(ctx); err != nil && ctx.Err() == nil {
				p.mu.Lock()
				p.err = err
				p.mu.Unlock()
				return
			}
		}
	}
}

// stop ends the sampling; it may be called more than once.
func (p *benchSendPipeline) stop() {
	p.once.Do(func() { close(p.quit) })
	<-p.done
}

// benchPipelineFigures is what report computes; it is also the JSON line.
type benchPipelineFigures struct {
	Scenario string `json:"scenario"`
	Pipeline bool   `json:"pipeline"`
	// Over the whole run, from the end of setup to the end of the rounds.
	RunS          benchFloat `json:"run_s"`
	Accepted      int64      `json:"accepted"`
	AcceptedPerS  benchFloat `json:"accepted_per_s"`
	Delivered     int64      `json:"delivered"`
	DeliveredPerS benchFloat `json:"delivered_per_s"`
	Failed        int64      `json:"failed"`
	// Over the samples taken while the server was loaded (interior ones:
	// the neighbouring intervals were loaded too).
	LoadedS             benchFloat `json:"loaded_s"`
	LoadedAcceptedPerS  benchFloat `json:"loaded_accepted_per_s"`
	LoadedDeliveredPerS benchFloat `json:"loaded_delivered_per_s"`
	LoadedRatio         benchFloat `json:"loaded_ratio"`
	BacklogMax          int64      `json:"backlog_max"`
	BacklogEnd          int64      `json:"backlog_end"`
	Backlog             []int64    `json:"backlog_samples"`
	Drained             bool       `json:"drained"`
	DrainS              benchFloat `json:"drain_s"`
	KeepsUp             bool       `json:"keeps_up"`
	P99Ms               benchFloat `json:"p99_ms"`
	P99TargetMs         benchFloat `json:"p99_target_ms"`
	P99Pass             bool       `json:"p99_pass"`
	Commits             int64      `json:"commits"`
	WritesPerCommit     benchFloat `json:"writes_per_commit"`

	end time.Time // the end of the run
}

// report runs once the rounds are over: it stops the sampling, waits for the
// backlog to drain, and computes the pipeline's figures.
func (p *benchSendPipeline) report(ctx context.Context, o rounds.Outcome) (benchReport, error) {
	f, err := p.figures(ctx, o)
	if err != nil {
		return benchReport{}, err
	}
	return p.text(f, o, true)
}

// figures stops the sampling, waits for the backlog to drain, and computes
// the pipeline's figures.
func (p *benchSendPipeline) figures(ctx context.Context, o rounds.Outcome) (benchPipelineFigures, error) {
	// An interrupted run (ctx cancelled) still gets its figures, without
	// the wait for the drain.
	interrupted := ctx.Done()
	ctx = context.WithoutCancel(ctx)
	end := time.Now()
	commits, commitsErr := nodesCommits(ctx, p.servers)
	p.stop()
	if err := p.sample(ctx); err != nil {
		return benchPipelineFigures{}, err
	}
	countsEnd, err := p.store.MessageCounts(ctx)
	if err != nil {
		return benchPipelineFigures{}, err
	}
	p.mu.Lock()
	samples, sampleErr := slices.Clone(p.samples), p.err
	p.mu.Unlock()
	if sampleErr != nil {
		return benchPipelineFigures{}, sampleErr
	}

	f := benchPipelineFigures{Scenario: "send", Pipeline: true, RunS: benchFloat(end.Sub(p.start).Seconds()), end: end}
	f.BacklogEnd = samples[len(samples)-1].backlog
	f.WritesPerCommit = benchFloat(math.NaN())
	if commitsErr == nil {
		commits.sub(p.commits0)
		f.Commits = int64(commits.commits)
		f.WritesPerCommit = commits.per(commits.writes)
	}
	for _, s := range samples {
		f.Backlog = append(f.Backlog, s.backlog)
		f.BacklogMax = max(f.BacklogMax, s.backlog)
	}

	// The backlog must drain once the load stops.
	drainStart := time.Now()
	backlog := f.BacklogEnd
	for backlog > 0 && time.Since(drainStart) < benchSendDrainWait {
		select {
		case <-interrupted:
			return benchPipelineFigures{}, errors.New("interrupted while waiting for the backlog to drain")
		case <-time.After(50 * time.Millisecond):
		}
		if backlog, err = p.store.QueueDepth(ctx); err != nil {
			return benchPipelineFigures{}, err
		}
	}
	f.Drained = backlog == 0
	f.DrainS = benchFloat(math.NaN())
	if f.Drained {
		f.DrainS = benchFloat(time.Since(drainStart).Seconds())
	}
	countsDrained, err := p.store.MessageCounts(ctx)
	if err != nil {
		return benchPipelineFigures{}, err
	}

	total := func(c map[string]int64) (n int64) {
		for _, v := range c {
			n += v
		}
		return n
	}
	f.Accepted = total(countsEnd) - total(p.counts0)
	f.Delivered = countsEnd[sb.StatusDelivered] - p.counts0[sb.StatusDelivered]
	f.Failed = countsDrained[sb.StatusFailed] - p.counts0[sb.StatusFailed]
	run := end.Sub(p.start).Seconds()
	f.AcceptedPerS, f.DeliveredPerS = benchFloat(float64(f.Accepted)/run), benchFloat(float64(f.Delivered)/run)

	// Intervals between samples in which sends were issued, and in the
	// intervals before and after as well, so that the edges of the server's
	// slices (the backlog filling up, then draining) are left out.
	loaded := make([]bool, len(samples))
	for i := 1; i < len(samples); i++ {
		loaded[i] = samples[i].issued > samples[i-1].issued
	}
	var dt time.Duration
	var dIssued, dBacklog int64
	for i := 2; i < len(samples)-1; i++ {
		if loaded[i-1] && loaded[i] && loaded[i+1] {
			dt += samples[i].at.Sub(samples[i-1].at)
			dIssued += samples[i].issued - samples[i-1].issued
			dBacklog += samples[i].backlog - samples[i-1].backlog
		}
	}
	f.LoadedS = benchFloat(dt.Seconds())
	f.LoadedAcceptedPerS, f.LoadedDeliveredPerS, f.LoadedRatio = benchFloat(math.NaN()), benchFloat(math.NaN()), benchFloat(math.NaN())
	if dt > 0 && dIssued > 0 {
		f.LoadedAcceptedPerS = benchFloat(float64(dIssued) / dt.Seconds())
		f.LoadedDeliveredPerS = benchFloat(float64(dIssued-dBacklog) / dt.Seconds())
		f.LoadedRatio = benchFloat(float64(dIssued-dBacklog) / float64(dIssued))
	}
	f.KeepsUp = f.Drained && (math.IsNaN(float64(f.LoadedRatio)) || float64(f.LoadedRatio) >= benchSendKeepUp)

	var p99 time.Duration
	if len(o.Targets) > 0 {
		p99 = o.Targets[0].Total.P99
	}
	f.P99Ms, f.P99TargetMs = benchFloat(micros(p99)/1000), benchFloat(micros(benchSendP99Target)/1000)
	f.P99Pass = p99 > 0 && p99 < benchSendP99Target

	return f, nil
}

// text renders f as report lines, the group-commit line only when
// groupCommit (the server ran in this process, so its counters are ours).
func (p *benchSendPipeline) text(f benchPipelineFigures, o rounds.Outcome, groupCommit bool) (benchReport, error) {
	run := f.end.Sub(p.start).Seconds()
	dt := time.Duration(float64(f.LoadedS) * float64(time.Second))
	var rep benchReport
	if f.Failed > 0 {
		rep.failures = append(rep.failures, fmt.Sprintf("send: %d messages failed delivery (the magic numbers used are always delivered)", f.Failed))
	}
	line, err := json.Marshal(f)
	if err != nil {
		return rep, err
	}
	rep.json = [][]byte{line}

	var b strings.Builder
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	name := "send"
	if len(o.Targets) > 0 {
		name = o.Targets[0].Name
	}
	fmt.Fprintf(&b, "%s: p99 %.3f ms (median of the rounds' p99); target < %v: %s\n", name, float64(f.P99Ms), benchSendP99Target, verdict(f.P99Pass))
	fmt.Fprintf(&b, "delivery pipeline (queued -> sent -> delivered through the simulator), over the whole run of %.1fs:\n", run)
	fmt.Fprintf(&b, "  accepted %d (%.1f/s), delivered %d (%.1f/s) during the run; %d failed\n",
		f.Accepted, float64(f.AcceptedPerS), f.Delivered, float64(f.DeliveredPerS), f.Failed)
	if dt > 0 {
		fmt.Fprintf(&b, "  while the server was loaded (%.0fs of samples): accepted %.1f/s, delivered %.1f/s (%.3fx)\n",
			dt.Seconds(), float64(f.LoadedAcceptedPerS), float64(f.LoadedDeliveredPerS), float64(f.LoadedRatio))
	}
	drain := "did not drain within " + benchSendDrainWait.String()
	if f.Drained {
		drain = fmt.Sprintf("drained to 0 in %.2fs after the load stopped", float64(f.DrainS))
	}
	fmt.Fprintf(&b, "  backlog (queued + sent), sampled every %v: max %d, %d at the end of the run; %s\n", p.interval, f.BacklogMax, f.BacklogEnd, drain)
	if groupCommit {
		fmt.Fprintf(&b, "  group commit: %d transactions, %.1f writes (accepts, claims, hand-offs, outcomes) per commit\n",
			f.Commits, float64(f.WritesPerCommit))
	}
	fmt.Fprintf(&b, "  pipeline keeps up (delivered >= %.2fx accepted while loaded, backlog drains within %v): %s\n",
		benchSendKeepUp, benchSendDrainWait, verdict(f.KeepsUp))
	rep.text = b.String()
	return rep, nil
}
