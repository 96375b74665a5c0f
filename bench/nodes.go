package bench

// The send scenario on several nodes (--nodes 1,2,3): for each node count
// N, a fresh PostgreSQL schema, N `serve` child processes of the switchboard
// binary on it, each on its own port, and the load generator's connections
// dealt to the nodes in turn (connection w goes to node w mod N, as a
// load balancer with keep-alive connections spreads them). Each step
// measures, in alternating rounds against the bare handler, one variant per
// tenant count (--tenants, default 1 and 3; a variant's requests rotate over
// its tenants). The report gives per N and tenant count the sends/s, the
// ratio to the bare handler, the ratio to one node, the p99 and whether
// delivery kept up, with PASS/FAIL against two targets: N nodes >= 0.9x
// of one node, and one node >= 0.25x of the bare handler. See
// docs/benchmarks.md.

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/bench/rounds"
	"github.com/switchboard/switchboard/sqlstore"
)

const (
	maxNodes   = 16
	maxTenants = 64
	// nodesScaleTarget is the smallest throughput of N nodes, as a share
	// of one node's, that counts as scaling out.
	nodesScaleTarget = 0.9
	// nodesOneNodeTarget is the smallest ratio of one node's sends/s to the
	// bare handler's on PostgreSQL.
	nodesOneNodeTarget = 0.25
)

// nodesResult is the figures of one node count and tenant count; it is also
// the JSON line.
type nodesResult struct {
	Scenario    string       `json:"scenario"`
	Nodes       int          `json:"nodes"`
	Tenants     int          `json:"tenants"`
	Requests    uint64       `json:"requests"`
	Errors      uint64       `json:"errors"`
	SendsPerS   benchFloat   `json:"sends_per_s"`
	BarePerS    benchFloat   `json:"bare_per_s"`
	MedianRatio benchFloat   `json:"median_ratio"`
	RoundRatios []benchFloat `json:"round_ratios"`
	P99Ms       benchFloat   `json:"p99_ms"`
	PerNode     []int64      `json:"requests_per_node"`
	// The whole machine's busy CPU time per request (the load generator,
	// the nodes, PostgreSQL) and the median share of its processors' time
	// left idle, for the bare handler's rounds and the step's (Linux; NaN,
	// null in JSON, elsewhere). An idle share well above the bare
	// handler's says the nodes waited rather than worked.
	BareCPUUs   benchFloat `json:"bare_cpu_us_per_request"`
	CPUUs       benchFloat `json:"cpu_us_per_send"`
	BareIdlePct benchFloat `json:"bare_idle_pct"`
	IdlePct     benchFloat `json:"idle_pct"`
	// Where a send's CPU went, per process (Linux; NaN, null in JSON,
	// where not measured): the nodes together, this machine's PostgreSQL
	// server processes (not measured when the database is elsewhere), and
	// the bench's own process, the load generator.
	NodeCPUUs     benchFloat `json:"node_cpu_us_per_send"`
	PostgresCPUUs benchFloat `json:"postgres_cpu_us_per_send"`
	BenchCPUUs    benchFloat `json:"bench_cpu_us_per_send"`
	// The nodes' group-commit transactions over the step's rounds (the
	// sum of switchboard_db_commits_total): the sends issued to the nodes,
	// warmups included, and the writes they ran (sends, batches of
	// outcomes, claims), per commit. Nodes that share the load make
	// smaller batches, and each commit costs the nodes and PostgreSQL
	// about the same whatever its size.
	SendsPerCommit  benchFloat `json:"sends_per_commit"`
	WritesPerCommit benchFloat `json:"writes_per_commit"`
	// VsOneNode is MedianRatio over one node's MedianRatio for the same
	// tenant count: each step's throughput relative to the bare handler
	// measured beside it, so that the machine's drift between steps
	// cancels out. RawVsOneNode compares the sends/s themselves.
	VsOneNode    *benchFloat `json:"vs_one_node,omitempty"`
	RawVsOneNode *benchFloat `json:"raw_vs_one_node,omitempty"`
	// The delivery pipeline of the step (shared by its tenant counts).
	DeliveredPerS benchFloat `json:"delivered_per_s"`
	KeepsUp       bool       `json:"keeps_up"`
	DrainS        benchFloat `json:"drain_s"`
	Failed        int64      `json:"failed"`
}

func runNodes(ctx context.Context, env *benchEnv, c Config, o benchOptions, stdout io.Writer) error {
	slice := o.duration / time.Duration(o.rounds)
	header := fmt.Sprintf("scenario send on %s nodes (tenants %s): %d connections dealt to the nodes in turn, %d rounds of %v per target (warmup %v), database postgres (a temporary schema per node count)",
		joinInts(c.Nodes), joinInts(c.Tenants), o.connections, o.rounds, slice, o.warmup)
	fmt.Fprintln(env.stderr, header)
	var results []*nodesResult
	var failures []string
	for _, n := range c.Nodes {
		rs, fs, err := nodesStep(ctx, env, c, o, n)
		if err != nil {
			return fmt.Errorf("bench: %d nodes: %w", n, err)
		}
		results = append(results, rs...)
		failures = append(failures, fs...)
	}

	verdicts := nodesVerdicts(results, c.Nodes)
	pass := len(failures) == 0
	for _, v := range verdicts {
		pass = pass && v.pass
	}

	var b bytes.Buffer
	if c.JSON {
		for _, r := range results {
			line, err := json.Marshal(r)
			if err != nil {
				return err
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		var vs []string
		for _, v := range verdicts {
			vs = append(vs, v.text)
		}
		sum, err := json.Marshal(map[string]any{"scenario": "send", "summary": true, "nodes": c.Nodes, "tenants": c.Tenants,
			"rounds": o.rounds, "connections": o.connections, "slice_s": slice.Seconds(), "database": "postgres",
			"verdicts": nonNil(vs), "errors_ok": len(failures) == 0, "failures": nonNil(failures), "pass": pass})
		if err != nil {
			return err
		}
		b.Write(sum)
		b.WriteByte('\n')
	} else {
		fmt.Fprintln(&b, header)
		fmt.Fprintf(&b, "%-5s %-7s %9s %7s %9s %9s %10s %10s %8s %11s %-8s %-11s %-9s %-18s %-12s %s\n", "nodes", "tenants", "requests", "errors", "sends/s",
			"bare/s", "vs bare", "vs 1 node", "p99 ms", "delivered/s", "keeps up", "cpu us/req", "idle %", "node/pg/bench us", "sends/commit", "requests per node")
		for _, r := range results {
			vs := "-"
			if r.VsOneNode != nil {
				vs = fmt.Sprintf("%.2fx", float64(*r.VsOneNode))
			}
			per := make([]string, len(r.PerNode))
			for i, x := range r.PerNode {
				per[i] = fmt.Sprint(x)
			}
			fmt.Fprintf(&b, "%-5d %-7d %9d %7d %9.0f %9.0f %9.2fx %10s %8.1f %11.0f %-8s %-11s %-9s %-18s %-12s %s\n", r.Nodes, r.Tenants, r.Requests, r.Errors,
				float64(r.SendsPerS), float64(r.BarePerS), float64(r.MedianRatio), vs, float64(r.P99Ms), float64(r.DeliveredPerS),
				passFail(r.KeepsUp), slashed("%.0f", r.BareCPUUs, r.CPUUs), slashed("%.0f", r.BareIdlePct, r.IdlePct),
				slashed("%.0f", r.NodeCPUUs, r.PostgresCPUUs, r.BenchCPUUs), slashed("%.1f", r.SendsPerCommit), strings.Join(per, "/"))
		}
		fmt.Fprintf(&b, "(vs bare: median over the rounds of sends/s over the bare handler's req/s in the same round; vs 1 node: that ratio over one node's, so the machine's drift between steps cancels out; sends/s is the step's own figure; cpu us/req and idle %%: the whole machine's busy CPU per request and its idle share, bare handler/step; node/pg/bench us: the step's CPU per send of the nodes together, of this machine's PostgreSQL processes and of the bench's own process, the load generator; sends/commit: the sends issued to the nodes over their group-commit transactions in the step, switchboard_db_commits_total)\n")
		for _, v := range verdicts {
			fmt.Fprintln(&b, v.text)
		}
	}
	if _, err := stdout.Write(b.Bytes()); err != nil {
		return err
	}
	if len(failures) > 0 {
		return fmt.Errorf("bench: %s", strings.Join(failures, "; "))
	}
	return nil
}

// nodesVerdict is one of the targets, checked.
type nodesVerdict struct {
	text string
	pass bool
}

// nodesVerdicts compares every step with the one-node step (or the one
// with the fewest nodes) of the same tenant count, setting the results'
// VsOneNode, and checks the targets: N nodes >= nodesScaleTarget of one
// node, one node >= nodesOneNodeTarget of the bare handler.
func nodesVerdicts(results []*nodesResult, nodes []int) []nodesVerdict {
	ref := map[int]*nodesResult{}
	refNodes := slices.Min(nodes)
	for _, r := range results {
		if r.Nodes == refNodes {
			ref[r.Tenants] = r
		}
	}
	var verdicts []nodesVerdict
	for _, r := range results {
		b := ref[r.Tenants]
		if b != nil && r.Nodes != refNodes {
			v, raw := benchFloat(float64(r.MedianRatio)/float64(b.MedianRatio)), benchFloat(float64(r.SendsPerS)/float64(b.SendsPerS))
			r.VsOneNode, r.RawVsOneNode = &v, &raw
			ok := float64(v) >= nodesScaleTarget
			verdicts = append(verdicts, nodesVerdict{fmt.Sprintf("%d nodes vs %d, %d tenant(s): %.2fx (sends/s %.2fx); target >= %.2f: %s",
				r.Nodes, refNodes, r.Tenants, float64(v), float64(raw), nodesScaleTarget, passFail(ok)), ok})
		}
		if r.Nodes == 1 {
			ok := float64(r.MedianRatio) >= nodesOneNodeTarget
			verdicts = append(verdicts, nodesVerdict{fmt.Sprintf("1 node, %d tenant(s): %.2fx the bare handler; target >= %.2f: %s",
				r.Tenants, float64(r.MedianRatio), nodesOneNodeTarget, passFail(ok)), ok})
		}
	}
	return verdicts
}

// nodesStep measures n nodes on a fresh schema, one result per tenant
// count, and returns the reasons its figures cannot be trusted.
func nodesStep(ctx context.Context, env *benchEnv, c Config, o benchOptions, n int) ([]*nodesResult, []string, error) {
	url, drop, err := nodesSchema(ctx, c.Database)
	if err != nil {
		return nil, nil, err
	}
	defer drop()
	// The bench's own handle migrates the schema before any node starts,
	// and creates the tenants.
	maxT := 0
	for _, t := range c.Tenants {
		maxT = max(maxT, t)
	}
	store, err := sqlstore.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	defer store.Close()
	var keys []string
	for i := range maxT {
		t, err := env.createTenantOn(ctx, store, fmt.Sprintf("bench nodes %d", i+1), "scale")
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, t.LiveKey)
	}

	nodes := make([]*benchChild, n)
	var startErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"--addr", "127.0.0.1:0", "--database", url, "--plans", env.plans, "--log-level", "info",
				"--shutdown-timeout", "5s"}, c.NodeArgs...)
			ch, err := benchStartChild(ctx, env.binary, args, env.stderr, fmt.Sprintf("node %d: ", i+1))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				startErr = errors.Join(startErr, fmt.Errorf("node %d: %w", i+1, err))
				return
			}
			nodes[i] = ch
		}()
	}
	wg.Wait()
	defer func() {
		for _, ch := range nodes {
			if ch != nil {
				wg.Add(1)
				go func() { defer wg.Done(); ch.stop() }()
			}
		}
		wg.Wait()
	}()
	if startErr != nil {
		return nil, nil, startErr
	}
	urls := make([]string, n)
	for i, ch := range nodes {
		urls[i] = ch.url
	}

	p, err := startBenchSendPipeline(ctx, store, time.Second, nodes)
	if err != nil {
		return nil, nil, err
	}
	defer p.stop()

	bodies := benchSendBodies()
	type variant struct {
		tenants int
		hdrs    []http.Header
		perNode []atomic.Int64
	}
	variants := make([]*variant, len(c.Tenants))
	for i, t := range c.Tenants {
		v := &variant{tenants: t, perNode: make([]atomic.Int64, n)}
		for _, k := range keys[:t] {
			v.hdrs = append(v.hdrs, http.Header{"Authorization": {"Bearer " + k}, "Content-Type": {"application/json"}})
		}
		variants[i] = v
	}
	// A worker's requests rotate over the variant's tenants and the two
	// recipients.
	req := func(v *variant, base string, w int, seq uint64) loadgen.Request {
		t := (uint64(w) + seq) % uint64(v.tenants)
		return loadgen.Request{Method: http.MethodPost, URL: base + "/v1/messages", Header: v.hdrs[t],
			Body: bodies[(uint64(w)+seq/uint64(v.tenants))%uint64(len(bodies))]}
	}
	// Every node answers every tenant before the rounds.
	for _, v := range variants {
		for node, u := range urls {
			for t := range v.tenants {
				bv := benchVariant{name: fmt.Sprintf("node %d", node+1), status: http.StatusAccepted,
					request: func(base string, _ int, _ uint64) loadgen.Request { return req(v, base, t, 0) }}
				if err := probeVariant(ctx, u, bv); err != nil {
					return nil, nil, fmt.Errorf("node %d, tenant %d: %w", node+1, t+1, err)
				}
			}
		}
	}

	bareURL, stopBare, err := loadgen.Serve(loadgen.BareHandler())
	if err != nil {
		return nil, nil, err
	}
	defer stopBare()
	baseline := loadgen.Target{
		Name:   "bare net/http",
		Next:   func(w int, seq uint64) loadgen.Request { return req(variants[0], bareURL, w, seq) },
		Expect: func(status int) bool { return status == http.StatusOK },
	}
	targets := make([]loadgen.Target, len(variants))
	for i, v := range variants {
		targets[i] = loadgen.Target{
			Name: fmt.Sprintf("send, %d node(s), %d tenant(s)", n, v.tenants),
			Next: func(w int, seq uint64) loadgen.Request {
				node := w % n
				v.perNode[node].Add(1)
				p.issued.Add(1)
				return req(v, urls[node], w, seq)
			},
			Expect: func(status int) bool { return status == http.StatusAccepted },
		}
	}
	progress := func(round int, so rounds.Outcome) {
		var b strings.Builder
		fmt.Fprintf(&b, "%d node(s), round %d/%d: %s %.0f req/s", n, round, o.rounds, so.Baseline.Name, so.Baseline.Runs[round-1].RPS)
		for i, s := range so.Targets {
			fmt.Fprintf(&b, "; %d tenant(s) %.0f sends/s", variants[i].tenants, s.Runs[round-1].RPS)
			if len(s.Ratios) > 0 {
				fmt.Fprintf(&b, " (%.3fx)", s.Ratios[len(s.Ratios)-1])
			}
		}
		fmt.Fprintln(env.stderr, b.String())
	}
	pids := make([]int, n)
	for i, ch := range nodes {
		pids[i] = ch.pid
	}
	groups := func() map[string]time.Duration {
		g := map[string]time.Duration{}
		if c, ok := rounds.ProcessesCPU(pids); ok {
			g["nodes"] = c
		}
		if c, ok := rounds.CommandCPU("postgres"); ok {
			g["postgres"] = c
		}
		return g
	}
	commits0, err := nodesCommits(ctx, nodes)
	if err != nil {
		return nil, nil, err
	}
	issued0 := p.issued.Load()
	out, runErr := rounds.Run(ctx, baseline, targets, rounds.Options{Rounds: o.rounds, Duration: o.duration, Warmup: o.warmup,
		Connections: o.connections, Groups: groups}, progress)
	// A node that cannot answer now leaves the figure out (NaN), not the
	// step's others.
	commits1, _ := nodesCommits(context.WithoutCancel(ctx), nodes)
	commits1.sub(commits0)
	sendsPerCommit, writesPerCommit := commits1.per(float64(p.issued.Load()-issued0)), commits1.per(commits1.writes)
	if out.Rounds == 0 {
		if runErr == nil {
			runErr = errors.New("no round completed")
		}
		return nil, nil, runErr
	}
	if runErr != nil {
		return nil, nil, fmt.Errorf("stopped after %d rounds: %w", out.Rounds, runErr)
	}
	f, err := p.figures(ctx, out)
	if err != nil {
		return nil, nil, err
	}
	failures := benchFailures(out)
	if f.Failed > 0 {
		failures = append(failures, fmt.Sprintf("%d nodes: %d messages failed delivery (the magic numbers used are always delivered)", n, f.Failed))
	}
	var results []*nodesResult
	for i, v := range variants {
		s := out.Targets[i]
		r := &nodesResult{Scenario: "send", Nodes: n, Tenants: v.tenants, Requests: s.Total.Requests, Errors: s.Total.Errors,
			SendsPerS: benchFloat(s.Total.RPS), BarePerS: benchFloat(out.Baseline.Total.RPS), MedianRatio: benchFloat(s.Median()),
			RoundRatios: benchFloats(s.Ratios), P99Ms: benchFloat(micros(s.Total.P99) / 1000),
			DeliveredPerS: f.LoadedDeliveredPerS, KeepsUp: f.KeepsUp, DrainS: f.DrainS, Failed: f.Failed,
			BareCPUUs: machineMicros(out.Baseline), CPUUs: machineMicros(s),
			BareIdlePct: benchFloat(100 * out.Baseline.MedianIdle()), IdlePct: benchFloat(100 * s.MedianIdle()),
			NodeCPUUs: perSend(s.GroupCPUPerRequest("nodes")), PostgresCPUUs: perSend(s.GroupCPUPerRequest("postgres")),
			BenchCPUUs: perSend(s.CPUPerRequest()), SendsPerCommit: sendsPerCommit, WritesPerCommit: writesPerCommit}
		if math.IsNaN(float64(r.DeliveredPerS)) {
			r.DeliveredPerS = f.DeliveredPerS
		}
		for node := range v.perNode {
			c := v.perNode[node].Load()
			r.PerNode = append(r.PerNode, c)
			if c == 0 {
				failures = append(failures, fmt.Sprintf("%d nodes, %d tenant(s): node %d received no request", n, v.tenants, node+1))
			}
		}
		results = append(results, r)
	}
	return results, failures, nil
}

// nodeCommits is what the nodes' group-commit writers did.
type nodeCommits struct{ commits, writes float64 }

// nodesCommits sums the group-commit counters of the nodes' /metrics.
func nodesCommits(ctx context.Context, nodes []*benchChild) (nodeCommits, error) {
	var sum nodeCommits
	for _, ch := range nodes {
		m, err := ch.metrics(ctx, "switchboard_db_commits_total", "switchboard_db_commit_writes_total")
		if err != nil {
			return nodeCommits{}, err
		}
		sum.commits += m["switchboard_db_commits_total"]
		sum.writes += m["switchboard_db_commit_writes_total"]
	}
	return sum, nil
}

// sub makes c the counts since before (none, when c is zero: read failed).
func (c *nodeCommits) sub(before nodeCommits) {
	if c.commits == 0 {
		return
	}
	c.commits -= before.commits
	c.writes -= before.writes
}

// per is x per commit, NaN without a commit.
func (c nodeCommits) per(x float64) benchFloat {
	if c.commits <= 0 {
		return benchFloat(math.NaN())
	}
	return benchFloat(x / c.commits)
}

// machineMicros is s's machine CPU per request in microseconds, NaN when
// not measured.
func machineMicros(s rounds.Series) benchFloat {
	d := s.MachineCPUPerRequest()
	if d == 0 {
		return benchFloat(math.NaN())
	}
	return benchFloat(float64(d) / float64(time.Microsecond))
}

// perSend is d in microseconds, NaN when not measured (0).
func perSend(d time.Duration) benchFloat {
	if d == 0 {
		return benchFloat(math.NaN())
	}
	return benchFloat(float64(d) / float64(time.Microsecond))
}

// slashed formats figures as "a/b/...", "-" for one not measured.
func slashed(format string, xs ...benchFloat) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = "-"
		if !math.IsNaN(float64(x)) {
			s[i] = fmt.Sprintf(format, float64(x))
		}
	}
	return strings.Join(s, "/")
}

// nodesSchema creates a fresh schema in the PostgreSQL database of base
// and returns a URL whose search_path points at it, and a function that
// drops it with everything in it.
func nodesSchema(ctx context.Context, base string) (string, func(), error) {
	if strings.Contains(base, "search_path=") {
		return "", nil, errors.New("--nodes makes a schema of its own for every node count: give --database without search_path")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "sbbench_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, err
	}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("postgres: create schema: %w", err)
	}
	drop := func() {
		admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		admin.Close()
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema, drop, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}
