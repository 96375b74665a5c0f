// This file implements `switchboard bench`, the benchmark harness.
//
// It starts the real server in-process (the `serve` command itself, with its
// defaults, on 127.0.0.1:0 against a fresh temporary SQLite database unless
// --database says otherwise), creates its tenants through the same code as `switchboard
// tenant create`, starts a bare net/http JSON handler (loadgen.BareHandler)
// beside it, and drives both with the same closed-loop load (64 keep-alive
// connections by default). Because the machines it runs on are shared and
// noisy, it measures in alternating short rounds (package bench/rounds) and
// reports, per server variant, the median of the per-round ratios of its
// requests per second to the bare handler's. Any response other than the
// expected status is an error, and more than 0.1% errors fails the command,
// so a broken server cannot produce a good-looking figure.
//
// Scenarios are named (--scenario); each one prepares what it needs against
// the running server and returns the request streams (variants) to measure.
// docs/benchmarks.md explains how to run it and read the output.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/bench/rounds"
)

// benchScenario is one named benchmark.
type benchScenario struct {
	name  string
	about string
	// target is the smallest median req/s ratio to the bare handler that
	// every variant should reach; 0 means the scenario sets none.
	target float64
	// setup prepares the scenario against the running server, typically by
	// creating tenants with the operator commands, and returns the variants
	// to measure, in order.
	setup func(ctx context.Context, env *benchEnv) ([]benchVariant, error)
	// serverArgs are added to the server's command line.
	serverArgs []string
	// run, if not nil, replaces the alternating rounds against the bare
	// handler: it measures the scenario against the server at env.serverURL
	// (setup is not called) and writes its own report. Its error is the
	// command's.
	run func(ctx context.Context, env *benchEnv, o benchOptions, stdout io.Writer) error
	// prepare, if not nil, runs before the server starts (to start what
	// the server connects to) and returns more server arguments.
	prepare func(ctx context.Context, env *benchEnv) ([]string, error)
}

// benchOptions are the measurement flags, resolved.
type benchOptions struct {
	duration, warmup    time.Duration
	rounds, connections int
	json                bool
}

// benchVariant is one stream of requests measured against the server.
type benchVariant struct {
	name string
	// status is the one expected status; any other counts as an error.
	status int
	// request returns the request a worker sends to the server at base
	// ("http://host:port"). The bare handler gets the first variant's
	// requests with base pointing at it. seq restarts at zero for every
	// measured slice, so a request that must be unique (an Idempotency-Key)
	// has to draw on something else as well.
	request func(base string, worker int, seq uint64) loadgen.Request
	// check, if not nil, inspects one response before the measurement
	// starts, to make sure the variant exercises the path it claims to.
	check func(resp *http.Response, body []byte) error
}

// benchEnv is what a scenario's setup may use.
type benchEnv struct {
	database string // URL of the server's database
	plans    string // the --plans file the server runs with
	getenv   func(string) string
	stderr   io.Writer

	serverURL string // base URL of the running server
	dbLabel   string // the database as the report names it
	// report, if setup sets it, runs once the rounds are over and returns the
	// scenario's own figures for the report (see benchReport).
	report func(ctx context.Context, o rounds.Outcome) (benchReport, error)
	// closers run, last first, when the command ends.
	closers []func()
	// state is what a scenario's prepare leaves for its run.
	state any
}

var benchScenarios = []benchScenario{
	{
		name: "keys",
		about: "authenticated GET /v1/api-keys with a live key; the tenant has 2 keys. Variants: a Scale tenant " +
			"(no rate limit, no quota: the limiter is skipped) and a Growth tenant whose rate limit is raised " +
			"to " + fmt.Sprint(benchGrowthRateLimit) + "/min (the limiter runs but never refuses)",
		target: 0.6,
		setup:  benchKeysSetup,
	},
	{
		name: "send",
		about: "POST /v1/messages with a live key of a Scale tenant to simulator numbers, durable before the 202; " +
			"also samples the delivery backlog every second and reports delivered/s and the drain time (bench_send.go)",
		target: 0.35,
		setup:  benchSendSetup,
	},
	{
		name: "webhooks",
		about: "deliveries/s to local receivers that answer 200 at once (signed, attempts recorded), and the p99 delay " +
			"from an event's state change to the receiver at 1,000 events/s; no bare-handler rounds (bench_webhooks.go)",
		serverArgs: []string{"--allow-private-webhooks"},
		run:        benchWebhooksRun,
	},
	{
		name: "devices",
		about: "1,000 reference Android devices connected at once to one node (a child process), 1,000 sends/s spread over " +
			"them: messages/s handed to devices, p99 from 202 to MessageEnqueued and to the device holding the message, " +
			"server memory per device, and the same load through the simulator; no bare-handler rounds (bench_devices.go)",
		run: benchDevicesRun,
	},
	{
		name: "campaign",
		about: "a 100,000-contact campaign (CSV import, launch, expansion, delivery) beside 100/s direct sends of two tenants: " +
			"launch latency, messages created/s against the direct-send rate, direct-send p99 and delivery delay with and " +
			"without the campaign; no bare-handler rounds (bench_campaign.go)",
		run: benchCampaignRun,
	},
	{
		name: "smpp",
		about: "sends from a phone on an SMPP link to an in-process SMSC (one bind each, window 10 and 100, no tps cap, DELIVRD receipts): " +
			"submit_sm accepted/s through the bind, p99 from the 202 to the SMSC's submit_sm_resp; no bare-handler rounds (bench_smpp.go)",
		prepare: benchSMPPPrepare,
		run:     benchSMPPRun,
	},
}

// benchGrowthRateLimit is the per-minute rate limit the bench's plans file
// gives the Growth plan: high enough never to trigger, so that the limiter
// path is measured and not the 429 path. The limiter works in whole
// microseconds per request, so it cannot exceed 60,000,000 per minute.
const benchGrowthRateLimit = 10_000_000

// benchPlans is the --plans file of the bench server. Scale tenants have no
// daily new-contact limit, so that a campaign's 100,000 first-time
// recipients are all due at once.
var benchPlans = fmt.Sprintf(`{"growth": {"rate_limit": %d, "monthly_calls": 0}, "scale": {"new_contacts_per_day": 0}}`, benchGrowthRateLimit)

func benchKeysSetup(ctx context.Context, env *benchEnv) ([]benchVariant, error) {
	scale, err := env.createTenant(ctx, "bench scale", "scale")
	if err != nil {
		return nil, err
	}
	limited, err := env.createTenant(ctx, "bench limited", "growth")
	if err != nil {
		return nil, err
	}
	listKeys := func(name, key, wantLimit string) benchVariant {
		hdr := http.Header{"Authorization": {"Bearer " + key}}
		return benchVariant{
			name:   name,
			status: http.StatusOK,
			request: func(base string, _ int, _ uint64) loadgen.Request {
				return loadgen.Request{Method: http.MethodGet, URL: base + "/v1/api-keys", Header: hdr}
			},
			check: func(resp *http.Response, body []byte) error {
				var list struct {
					Data []struct{ ID string } `json:"data"`
				}
				if err := json.Unmarshal(body, &list); err != nil || len(list.Data) != 2 {
					return fmt.Errorf("want a list of 2 keys, got %s", body)
				}
				if got := resp.Header.Get("X-RateLimit-Limit"); got != wantLimit {
					return fmt.Errorf("X-RateLimit-Limit is %q, want %q", got, wantLimit)
				}
				return nil
			},
		}
	}
	return []benchVariant{
		listKeys("keys (scale, no limiter)", scale.LiveKey, ""),
		listKeys("keys (limited key)", limited.LiveKey, fmt.Sprint(benchGrowthRateLimit)),
	}, nil
}

// benchTenant is what `switchboard tenant create` prints.
type benchTenant struct {
	TenantID string `json:"tenant_id"`
	LiveKey  string `json:"live_key"`
	TestKey  string `json:"test_key"`
	Phone    struct {
		ID string `json:"id"`
	} `json:"phone"`
}

// createTenant runs `switchboard tenant create` against the bench database.
func (e *benchEnv) createTenant(ctx context.Context, name, plan string) (benchTenant, error) {
	var out, errOut bytes.Buffer
	args := []string{"create", "--database", e.database, "--plans", e.plans, "--name", name, "--plan", plan}
	if err := tenantCmd(ctx, args, e.getenv, &out, &errOut); err != nil {
		return benchTenant{}, fmt.Errorf("tenant create --plan %s: %w %s", plan, err, strings.TrimSpace(errOut.String()))
	}
	var t benchTenant
	if err := json.Unmarshal(out.Bytes(), &t); err != nil || t.LiveKey == "" {
		return benchTenant{}, fmt.Errorf("tenant create printed %q", out.String())
	}
	return t, nil
}

func benchScenarioNames() []string {
	names := make([]string, len(benchScenarios))
	for i, s := range benchScenarios {
		names[i] = s.name
	}
	return names
}

// benchHiddenFlags are accepted but left out of --help.
var benchHiddenFlags = map[string]bool{"cpuprofile": true, "memprofile": true, "trace": true}

func benchCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	// The flags deliberately have no SWITCHBOARD_* defaults: in particular
	// SWITCHBOARD_DATABASE is not read, so that a benchmark never creates
	// tenants in the configured database unless told to with --database.
	f := newFlags("bench", getenv, stderr)
	scenarioName := f.String("scenario", "keys", "scenario: "+strings.Join(benchScenarioNames(), ", "))
	duration := f.Duration("duration", 10*time.Second, "measured time per target (the bare handler and each server variant), split evenly over the rounds")
	conns := f.Int("connections", loadgen.DefaultConnections, "concurrent keep-alive connections")
	nRounds := f.Int("rounds", 5, "alternating rounds: each measures the bare handler and each server variant once, in an order that rotates from round to round")
	warmup := f.Duration("warmup", 0, "warmup before every measured slice; 0 means a quarter of the slice, at most 500ms; negative means none")
	dbURL := f.String("database", "", "database of the server: sqlite:PATH or postgres://... (default: a fresh SQLite file in a temporary directory, removed afterwards; SWITCHBOARD_DATABASE is not read)")
	jsonOut := f.Bool("json", false, "print one JSON object per target and one summary object instead of the table")
	cpuprofile := f.String("cpuprofile", "", "write a CPU profile of the whole run (server and load generator) to this file")
	memprofile := f.String("memprofile", "", "write an allocation profile of the whole run to this file (go tool pprof -sample_index=alloc_space)")
	traceFile := f.String("trace", "", "write an execution trace of the whole run to this file (go tool trace)")
	f.Usage = func() {
		out := f.Output()
		fmt.Fprintf(out, "Usage: switchboard bench [flags]\n\nCompares the server with a bare net/http JSON handler under the same load.\nScenarios:\n")
		for _, s := range benchScenarios {
			fmt.Fprintf(out, "  %s: %s\n", s.name, s.about)
		}
		fmt.Fprintf(out, "\nFlags:\n")
		visible := flag.NewFlagSet("bench", flag.ContinueOnError)
		visible.SetOutput(out)
		f.VisitAll(func(fl *flag.Flag) {
			if !benchHiddenFlags[fl.Name] {
				visible.Var(fl.Value, fl.Name, fl.Usage)
				visible.Lookup(fl.Name).DefValue = fl.DefValue
			}
		})
		visible.PrintDefaults()
	}
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("bench: unexpected argument %q", pos[0])
	}
	var sc *benchScenario
	for i := range benchScenarios {
		if benchScenarios[i].name == *scenarioName {
			sc = &benchScenarios[i]
		}
	}
	switch {
	case sc == nil:
		return fmt.Errorf("bench: unknown scenario %q (known: %s)", *scenarioName, strings.Join(benchScenarioNames(), ", "))
	case *nRounds < 1:
		return fmt.Errorf("bench: --rounds must be at least 1")
	case *conns < 1:
		return fmt.Errorf("bench: --connections must be at least 1")
	case *duration/time.Duration(*nRounds) < 10*time.Millisecond:
		return fmt.Errorf("bench: --duration %v over %d rounds leaves less than 10ms per round", *duration, *nRounds)
	}
	slice := *duration / time.Duration(*nRounds)
	switch {
	case *warmup == 0:
		*warmup = min(slice/4, 500*time.Millisecond)
	case *warmup < 0:
		*warmup = 0
	}

	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	if *memprofile != "" {
		// Created now, so that a bad path fails before the run, not after.
		pf, err := os.Create(*memprofile)
		if err != nil {
			return fmt.Errorf("bench: --memprofile: %w", err)
		}
		defer func() {
			err := pprof.Lookup("allocs").WriteTo(pf, 0)
			if cerr := pf.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				fmt.Fprintf(stderr, "bench: --memprofile: %v\n", err)
			}
		}()
	}

	if *traceFile != "" {
		tf, err := os.Create(*traceFile)
		if err != nil {
			return fmt.Errorf("bench: --trace: %w", err)
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			return fmt.Errorf("bench: --trace: %w", err)
		}
		defer trace.Stop()
	}

	tmp, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	env := &benchEnv{database: *dbURL, plans: filepath.Join(tmp, "plans.json"), getenv: getenv, stderr: stderr}
	defer env.close()
	dbLabel := "sqlite (temporary)"
	switch {
	case env.database == "":
		env.database = "sqlite:" + filepath.Join(tmp, "bench.db")
	case strings.HasPrefix(env.database, "postgres://"), strings.HasPrefix(env.database, "postgresql://"):
		dbLabel = "postgres" // the URL may hold a password
		if !strings.Contains(env.database, "search_path=") {
			// A schema of its own, dropped after the server has stopped.
			if env.database, err = benchPostgresSchema(ctx, env); err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			dbLabel = "postgres (temporary schema)"
		}
	default:
		if err := checkDatabase(env.database); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		dbLabel = env.database
	}
	if err := os.WriteFile(env.plans, []byte(benchPlans), 0o600); err != nil {
		return err
	}

	env.dbLabel = dbLabel
	serverArgs := sc.serverArgs
	if sc.prepare != nil {
		more, err := sc.prepare(ctx, env)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		serverArgs = append(append([]string(nil), serverArgs...), more...)
	}
	serverURL, stopServer, err := startBenchServer(ctx, append([]string{
		"--addr", "127.0.0.1:0", "--database", env.database, "--plans", env.plans, "--log-level", "info", "--shutdown-timeout", "5s",
	}, serverArgs...), stderr)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer stopServer()
	env.serverURL = serverURL
	if sc.run != nil {
		return sc.run(ctx, env, benchOptions{duration: *duration, warmup: *warmup, rounds: *nRounds, connections: *conns, json: *jsonOut}, stdout)
	}
	variants, err := sc.setup(ctx, env)
	if err != nil {
		return fmt.Errorf("bench: scenario %s: %w", sc.name, err)
	}
	if len(variants) == 0 {
		return fmt.Errorf("bench: scenario %s has nothing to measure", sc.name)
	}
	for _, v := range variants {
		if err := probeVariant(ctx, serverURL, v); err != nil {
			return fmt.Errorf("bench: %s: the server does not answer as the scenario expects: %w", v.name, err)
		}
	}
	var bareURL string
	var stopBare func()
	pprof.Do(ctx, pprof.Labels("target", "bare"), func(context.Context) {
		bareURL, stopBare, err = loadgen.Serve(loadgen.BareHandler())
	})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer stopBare()

	first := variants[0]
	baseline := loadgen.Target{
		Name:   "bare net/http",
		Next:   func(w int, seq uint64) loadgen.Request { return first.request(bareURL, w, seq) },
		Expect: func(status int) bool { return status == http.StatusOK },
	}
	targets := make([]loadgen.Target, len(variants))
	for i, v := range variants {
		targets[i] = loadgen.Target{
			Name:   v.name,
			Next:   func(w int, seq uint64) loadgen.Request { return v.request(serverURL, w, seq) },
			Expect: func(status int) bool { return status == v.status },
		}
	}

	header := fmt.Sprintf("scenario %s: %d connections, %d rounds of %v per target (warmup %v), database %s",
		sc.name, *conns, *nRounds, slice, *warmup, dbLabel)
	fmt.Fprintln(stderr, header)
	progress := func(round int, so rounds.Outcome) {
		var b strings.Builder
		fmt.Fprintf(&b, "round %d/%d: %s %.0f req/s", round, *nRounds, so.Baseline.Name, so.Baseline.Runs[round-1].RPS)
		for _, s := range so.Targets {
			fmt.Fprintf(&b, "; %s %.0f req/s", s.Name, s.Runs[round-1].RPS)
			if len(s.Ratios) > 0 {
				fmt.Fprintf(&b, " (%.3fx", s.Ratios[len(s.Ratios)-1])
				if len(s.CPURatios) == round {
					fmt.Fprintf(&b, ", cpu %.3fx", s.CPURatios[round-1])
				}
				b.WriteByte(')')
			}
		}
		fmt.Fprintln(stderr, b.String())
	}
	out, runErr := rounds.Run(ctx, baseline, targets, rounds.Options{
		Rounds: *nRounds, Duration: *duration, Warmup: *warmup, Connections: *conns,
	}, progress)
	if out.Rounds == 0 {
		if runErr == nil {
			runErr = errors.New("no round completed")
		}
		return fmt.Errorf("bench: %w", runErr)
	}

	failures := benchFailures(out)
	var extra benchReport
	if env.report != nil {
		if extra, err = env.report(ctx, out); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		failures = append(failures, extra.failures...)
	}
	if *jsonOut {
		err = writeBenchJSON(stdout, sc, out, dbLabel, failures, extra.json)
	} else {
		err = writeBenchText(stdout, header, sc, out)
		if err == nil {
			_, err = io.WriteString(stdout, extra.text)
		}
	}
	if err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("bench: stopped after %d rounds: %w", out.Rounds, runErr)
	}
	if len(failures) > 0 {
		return fmt.Errorf("bench: %s", strings.Join(failures, "; "))
	}
	return nil
}

// benchMaxErrorRate is the share of failed requests above which a run fails.
const benchMaxErrorRate = 0.001

// benchFailures returns why the measurements cannot be trusted: a target
// that completed no request, or one with more than 0.1% errors.
func benchFailures(o rounds.Outcome) []string {
	var out []string
	for _, s := range append([]rounds.Series{o.Baseline}, o.Targets...) {
		t := s.Total
		switch {
		case t.Requests == 0:
			out = append(out, fmt.Sprintf("%s: no request completed", s.Name))
		case float64(t.Errors) > benchMaxErrorRate*float64(t.Requests):
			msg := fmt.Sprintf("%s: %d of %d requests failed (%.2f%%, more than %.1f%%)",
				s.Name, t.Errors, t.Requests, 100*float64(t.Errors)/float64(t.Requests), 100*benchMaxErrorRate)
			if len(t.Unexpected) > 0 {
				msg += fmt.Sprintf("; unexpected statuses %v", t.Unexpected)
			}
			out = append(out, msg)
		}
	}
	return out
}

func writeBenchText(w io.Writer, header string, sc *benchScenario, o rounds.Outcome) error {
	var b bytes.Buffer
	fmt.Fprintln(&b, header)
	o.Table(&b)
	for _, s := range o.Targets {
		fmt.Fprintf(&b, "%s: median ratio %s (min %s, max %s) over %d rounds", s.Name,
			fmtBenchRatio(s.Median()), fmtBenchRatio(s.Min()), fmtBenchRatio(s.Max()), o.Rounds)
		if sc.target > 0 {
			verdict := "FAIL"
			if s.Median() >= sc.target {
				verdict = "PASS"
			}
			fmt.Fprintf(&b, "; target >= %.2f: %s", sc.target, verdict)
		}
		b.WriteByte('\n')
		if len(s.CPURatios) > 0 {
			fmt.Fprintf(&b, "  cpu-normalized: median ratio %s (min %s, max %s); process CPU %.1f us/req vs %.1f us/req for the bare handler\n",
				fmtBenchRatio(rounds.Median(s.CPURatios)), fmtBenchRatio(slices.Min(s.CPURatios)), fmtBenchRatio(slices.Max(s.CPURatios)),
				micros(s.CPUPerRequest()), micros(o.Baseline.CPUPerRequest()))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fmtBenchRatio(r float64) string {
	if math.IsNaN(r) {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

// benchFloat is a float64 that encodes NaN as null.
type benchFloat float64

func (f benchFloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(math.Round(float64(f)*1e4) / 1e4)
}

func benchFloats(xs []float64) []benchFloat {
	out := make([]benchFloat, len(xs))
	for i, x := range xs {
		out[i] = benchFloat(x)
	}
	return out
}

// writeBenchJSON writes one line per target, loadgen's Result.JSON with the
// per-round figures added, then the scenario's extra lines, then one summary
// line.
func writeBenchJSON(w io.Writer, sc *benchScenario, o rounds.Outcome, dbLabel string, failures []string, extraLines [][]byte) error {
	type extra struct {
		Scenario    string       `json:"scenario"`
		Role        string       `json:"role"`
		Rounds      int          `json:"rounds"`
		RoundRPS    []benchFloat `json:"round_rps"`
		MedianRatio *benchFloat  `json:"median_ratio,omitempty"`
		MinRatio    *benchFloat  `json:"min_ratio,omitempty"`
		MaxRatio    *benchFloat  `json:"max_ratio,omitempty"`
		RoundRatios []benchFloat `json:"round_ratios,omitempty"`
		P99Ratio    *benchFloat  `json:"p99_ratio,omitempty"`
		CPUPerReqUs *benchFloat  `json:"cpu_us_per_req,omitempty"`
		CPURatio    *benchFloat  `json:"cpu_ratio,omitempty"`
		CPURatios   []benchFloat `json:"round_cpu_ratios,omitempty"`
	}
	type variant struct {
		Name        string     `json:"name"`
		MedianRatio benchFloat `json:"median_ratio"`
		MinRatio    benchFloat `json:"min_ratio"`
		MaxRatio    benchFloat `json:"max_ratio"`
		CPURatio    benchFloat `json:"cpu_ratio"`
		Pass        *bool      `json:"pass,omitempty"`
	}
	type summary struct {
		Scenario    string    `json:"scenario"`
		Summary     bool      `json:"summary"`
		Rounds      int       `json:"rounds"`
		Connections int       `json:"connections"`
		SliceS      float64   `json:"slice_s"`
		WarmupS     float64   `json:"warmup_s"`
		Database    string    `json:"database"`
		Target      *float64  `json:"target_ratio,omitempty"`
		Variants    []variant `json:"variants"`
		ErrorsOK    bool      `json:"errors_ok"`
		Failures    []string  `json:"failures"`
		Pass        *bool     `json:"pass,omitempty"`
	}
	ptr := func(f float64) *benchFloat { v := benchFloat(f); return &v }
	var b bytes.Buffer
	line := func(s rounds.Series, role string, isTarget bool) error {
		e := extra{Scenario: sc.name, Role: role, Rounds: o.Rounds}
		for _, r := range s.Runs {
			e.RoundRPS = append(e.RoundRPS, benchFloat(r.RPS))
		}
		if c := s.CPUPerRequest(); c > 0 {
			e.CPUPerReqUs = ptr(micros(c))
		}
		if isTarget {
			e.MedianRatio, e.MinRatio, e.MaxRatio = ptr(s.Median()), ptr(s.Min()), ptr(s.Max())
			e.RoundRatios = benchFloats(s.Ratios)
			e.P99Ratio = ptr(rounds.Median(s.P99Ratios))
			if len(s.CPURatios) > 0 {
				e.CPURatio = ptr(rounds.Median(s.CPURatios))
				e.CPURatios = benchFloats(s.CPURatios)
			}
		}
		ex, err := json.Marshal(e)
		if err != nil {
			return err
		}
		// Both are single-line JSON objects: splice them into one.
		res := s.Total.JSON()
		b.Write(res[:len(res)-1])
		b.WriteByte(',')
		b.Write(ex[1:])
		b.WriteByte('\n')
		return nil
	}
	if err := line(o.Baseline, "baseline", false); err != nil {
		return err
	}
	sum := summary{
		Scenario: sc.name, Summary: true, Rounds: o.Rounds, Connections: o.Connections,
		SliceS: o.Slice.Seconds(), WarmupS: o.Warmup.Seconds(), Database: dbLabel,
		ErrorsOK: len(failures) == 0, Failures: failures,
	}
	if sum.Failures == nil {
		sum.Failures = []string{}
	}
	allPass := len(failures) == 0
	if sc.target > 0 {
		sum.Target = &sc.target
	}
	for _, s := range o.Targets {
		if err := line(s, "server", true); err != nil {
			return err
		}
		v := variant{Name: s.Name, MedianRatio: benchFloat(s.Median()), MinRatio: benchFloat(s.Min()), MaxRatio: benchFloat(s.Max()),
			CPURatio: benchFloat(rounds.Median(s.CPURatios))}
		if sc.target > 0 {
			pass := s.Median() >= sc.target
			v.Pass = &pass
			allPass = allPass && pass
		}
		sum.Variants = append(sum.Variants, v)
	}
	if sc.target > 0 {
		sum.Pass = &allPass
	}
	for _, l := range extraLines {
		b.Write(l)
		b.WriteByte('\n')
	}
	sl, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	b.Write(sl)
	b.WriteByte('\n')
	_, err = w.Write(b.Bytes())
	return err
}

// probeVariant sends one request of v to the server and checks the answer.
func probeVariant(ctx context.Context, base string, v benchVariant) error {
	r := v.request(base, 0, 0)
	var body io.Reader
	if len(r.Body) > 0 {
		body = bytes.NewReader(r.Body)
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, r.URL, body)
	if err != nil {
		return err
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != v.status {
		return fmt.Errorf("%s %s answered %d, want %d: %s", method, req.URL.Path, resp.StatusCode, v.status, bytes.TrimSpace(raw))
	}
	if v.check != nil {
		return v.check(resp, raw)
	}
	return nil
}

// startBenchServer runs `switchboard serve` in-process with args and returns
// its base URL once it listens, and a function that shuts it down and
// returns the server's error. Every setting args does not give takes the
// default of `serve`, whatever SWITCHBOARD_* variables are set, so runs are
// comparable. args must keep the log level at info, for the "listening"
// line. The server installs its logger as the process's default; stop puts
// the previous one back.
func startBenchServer(ctx context.Context, args []string, stderr io.Writer) (url string, stop func() error, err error) {
	prevSlog, prevOut, prevFlags, prevPrefix := slog.Default(), log.Writer(), log.Flags(), log.Prefix()
	restore := func() {
		slog.SetDefault(prevSlog)
		log.SetOutput(prevOut)
		log.SetFlags(prevFlags)
		log.SetPrefix(prevPrefix)
	}
	sink := &benchLog{addr: make(chan string, 1), stderr: stderr}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	noEnv := func(string) string { return "" }
	// The label marks every goroutine of the server (they inherit it), so
	// that a --cpuprofile can be cut to the server alone:
	// go tool pprof -tagfocus target=server.
	go pprof.Do(sctx, pprof.Labels("target", "server"), func(sctx context.Context) {
		done <- serve(sctx, args, noEnv, io.Discard, sink)
	})
	fail := func(err error) (string, func() error, error) {
		cancel()
		restore()
		return "", nil, err
	}
	select {
	case addr := <-sink.addr:
		url = "http://" + addr
	case err := <-done:
		if err == nil {
			err = errors.New("it exited")
		}
		return fail(fmt.Errorf("server did not start: %w", err))
	case <-time.After(60 * time.Second):
		cancel()
		<-done
		return fail(errors.New("server did not start within 60s"))
	}
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
			restore()
			if n := sink.problemCount(); n > benchLogShown {
				fmt.Fprintf(stderr, "bench: the server logged %d warnings and errors in all\n", n)
			}
		})
		return stopErr
	}
	return url, stop, nil
}

// benchLogShown is how many warning and error lines of the server's log the
// bench passes on to stderr.
const benchLogShown = 5

// benchLog receives the server's JSON log: it picks up the listening
// address, passes the first few warnings and errors on and drops the rest.
type benchLog struct {
	addr   chan string
	stderr io.Writer

	mu       sync.Mutex
	partial  []byte
	sent     bool
	problems int
}

func (l *benchLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	rest := l.partial
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		l.line(rest[:i])
		rest = rest[i+1:]
	}
	l.partial = append(l.partial[:0], rest...)
	return len(p), nil
}

func (l *benchLog) line(b []byte) {
	var e struct {
		Level, Msg, Addr string
	}
	if err := json.Unmarshal(b, &e); err != nil {
		e.Level = "ERROR" // not the server's JSON: show it
	}
	if e.Msg == "listening" && !l.sent {
		l.sent = true
		l.addr <- e.Addr
		return
	}
	if e.Level == "WARN" || e.Level == "ERROR" {
		l.problems++
		if l.problems <= benchLogShown {
			fmt.Fprintf(l.stderr, "bench: server log: %s\n", b)
		}
	}
}

func (l *benchLog) problemCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.problems
}
