// Package bench is `switchboard bench`, the benchmark harness; the command
// (cmd/switchboard) only parses its flags into a Config and calls Run.
//
// It starts the real server in-process (server.Run, with the defaults of
// `serve`, on 127.0.0.1:0 against a fresh temporary SQLite database unless
// Config.Database says otherwise), creates its tenants through the same code
// as `switchboard tenant create` (package ops), starts a bare net/http JSON handler (loadgen.BareHandler)
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
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/bench/rounds"
	"github.com/switchboard/switchboard/ops"
	"github.com/switchboard/switchboard/server"
	"github.com/switchboard/switchboard/sqlstore"
)

// benchScenario is one named benchmark.
type benchScenario struct {
	name  string
	about string
	// target is the smallest median req/s ratio to the bare handler that
	// every variant should reach; 0 means the scenario sets none.
	target float64
	// setup prepares the scenario against the running server, typically by
	// creating tenants through package ops, and returns the variants
	// to measure, in order.
	setup func(ctx context.Context, env *benchEnv) ([]benchVariant, error)
	// configure, if not nil, changes the in-process server's configuration.
	configure func(c *server.Config)
	// run, if not nil, replaces the alternating rounds against the bare
	// handler: it measures the scenario against the server at env.serverURL
	// (setup is not called) and writes its own report. Its error is the
	// command's.
	run func(ctx context.Context, env *benchEnv, o benchOptions, stdout io.Writer) error
	// prepare, if not nil, runs before the server starts (to start what
	// the server connects to) and may change the server's configuration.
	prepare func(ctx context.Context, env *benchEnv, c *server.Config) error
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
	binary   string // the switchboard binary child processes run (Config.Binary)
	// stores are the handles the bench opened on its databases, by URL.
	stores map[string]*sqlstore.DB

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
			"also samples the delivery backlog every second and reports delivered/s and the drain time (bench/send.go)",
		target: 0.35,
		setup:  benchSendSetup,
	},
	{
		name: "webhooks",
		about: "deliveries/s to local receivers that answer 200 at once (signed, attempts recorded), and the p99 delay " +
			"from an event's state change to the receiver at 1,000 events/s; no bare-handler rounds (bench/webhooks.go)",
		configure: func(c *server.Config) { c.AllowPrivateWebhooks = true },
		run:       benchWebhooksRun,
	},
	{
		name: "devices",
		about: "1,000 reference Android devices connected at once to one node (a child process), 1,000 sends/s spread over " +
			"them: messages/s handed to devices, p99 from 202 to MessageEnqueued and to the device holding the message, " +
			"server memory per device, and the same load through the simulator; no bare-handler rounds (bench/devices.go)",
		run: benchDevicesRun,
	},
	{
		name: "fleet",
		about: "200 reference Android devices on one node (a child process), each pinging its health every 10 s: server memory per " +
			"phone, CPU per 100 phones at rest and while sending 20/s over them; targets < 50 KiB and < 1% of a core per 100 phones " +
			"at rest; no bare-handler rounds (bench/fleet.go)",
		run: benchFleetRun,
	},
	{
		name: "campaign",
		about: "a 100,000-contact campaign (CSV import, launch, expansion, delivery) beside 100/s direct sends of two tenants: " +
			"launch latency, messages created/s against the direct-send rate, direct-send p99 and delivery delay with and " +
			"without the campaign; no bare-handler rounds (bench/campaign.go)",
		run: benchCampaignRun,
	},
	{
		name: "smpp",
		about: "sends from a phone on an SMPP link to an in-process SMSC (one bind each, window 10 and 100, no tps cap, DELIVRD receipts): " +
			"submit_sm accepted/s through the bind, p99 from the 202 to the SMSC's submit_sm_resp; no bare-handler rounds (bench/smpp.go)",
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
type benchTenant = ops.NewTenant

// store returns the bench's own handle on the database at url, opened once.
func (e *benchEnv) store(ctx context.Context, url string) (*sqlstore.DB, error) {
	if db := e.stores[url]; db != nil {
		return db, nil
	}
	db, err := sqlstore.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if e.stores == nil {
		e.stores = map[string]*sqlstore.DB{}
	}
	e.stores[url] = db
	e.closers = append(e.closers, func() { db.Close() })
	return db, nil
}

// createTenant creates a tenant in the bench database as `switchboard
// tenant create` does.
func (e *benchEnv) createTenant(ctx context.Context, name, plan string) (benchTenant, error) {
	return e.createTenantIn(ctx, e.database, name, plan)
}

// createTenantIn creates a tenant in the database at url.
func (e *benchEnv) createTenantIn(ctx context.Context, url, name, plan string) (benchTenant, error) {
	db, err := e.store(ctx, url)
	if err != nil {
		return benchTenant{}, err
	}
	return e.createTenantOn(ctx, db, name, plan)
}

// createTenantOn creates a tenant in db, on a plan of the bench's plans.
func (e *benchEnv) createTenantOn(ctx context.Context, db *sqlstore.DB, name, plan string) (benchTenant, error) {
	table, err := sb.LoadPlans(e.plans)
	if err != nil {
		return benchTenant{}, err
	}
	if _, ok := table[plan]; !ok {
		return benchTenant{}, fmt.Errorf("tenant create: unknown plan %q", plan)
	}
	t, err := ops.CreateTenant(ctx, db, name, plan)
	if err != nil {
		return benchTenant{}, fmt.Errorf("tenant create --plan %s: %w", plan, err)
	}
	return *t, nil
}

// addPhone adds a sending phone to the bench database as `switchboard
// phone add` does.
func (e *benchEnv) addPhone(ctx context.Context, spec ops.PhoneSpec) error {
	p, err := ops.NewPhoneFromSpec(spec)
	if err != nil {
		return err
	}
	db, err := e.store(ctx, e.database)
	if err != nil {
		return err
	}
	return ops.AddPhone(ctx, db, p)
}

func benchScenarioNames() []string {
	names := make([]string, len(benchScenarios))
	for i, s := range benchScenarios {
		names[i] = s.name
	}
	return names
}

// Scenario names a scenario and says what it measures, for usage text.
type Scenario struct{ Name, About string }

// Scenarios lists the scenarios Run knows, in the order usage text shows
// them.
func Scenarios() []Scenario {
	out := make([]Scenario, len(benchScenarios))
	for i, s := range benchScenarios {
		out[i] = Scenario{s.name, s.about}
	}
	return out
}

// Config is one run of the harness; `switchboard bench` fills it from its
// flags.
type Config struct {
	// Scenario names the scenario (Scenarios); empty means keys.
	Scenario string
	// Duration is the measured time per target, split evenly over Rounds.
	Duration time.Duration
	// Rounds is the number of alternating rounds.
	Rounds int
	// Connections is the number of concurrent keep-alive connections.
	Connections int
	// Warmup is the warmup before every measured slice: 0 means a quarter
	// of the slice, at most 500ms; negative means none.
	Warmup time.Duration
	// Database is the server's database: sqlite:PATH or postgres://...;
	// empty means a fresh SQLite file in a temporary directory. A
	// PostgreSQL URL without a search_path gets a schema of its own, dropped
	// afterwards.
	Database string
	// JSON prints one JSON object per target and a summary instead of the
	// table.
	JSON bool
	// CPUProfile, MemProfile and Trace, when set, are files that receive a
	// CPU profile, an allocation profile and an execution trace of the
	// whole run.
	CPUProfile, MemProfile, Trace string

	// Nodes, when set (send scenario, PostgreSQL only), runs the send
	// scenario once per entry on that many nodes: child processes of
	// Binary running `serve` on one fresh database (nodes.go).
	Nodes []int
	// Tenants are the tenant counts measured with Nodes (default 1 and 3):
	// each variant spreads its sends over that many tenants.
	Tenants []int
	// NodeArgs are added to every node's `serve` command line (for
	// example --db-max-conns 16).
	NodeArgs []string
	// Loadgen is "go" (default: bench/loadgen) or "wrk" (send scenario:
	// the rounds run wrk with bench/wrk/send.lua, wrk.go).
	Loadgen string
	// Binary is the switchboard binary that child processes run (the
	// devices scenario's server, the nodes); empty means this program
	// (os.Executable), or SWITCHBOARD_BENCH_BINARY when Getenv has it.
	Binary string
	// Getenv reads the SWITCHBOARD_BENCH_* variables that tune some
	// scenarios (docs/benchmarks.md); nil reads none.
	Getenv func(string) string
}

// options checks c and resolves its defaults.
func (c *Config) check() (*benchScenario, error) {
	if c.Scenario == "" {
		c.Scenario = "keys"
	}
	if c.Getenv == nil {
		c.Getenv = func(string) string { return "" }
	}
	if c.Binary == "" {
		c.Binary = c.Getenv("SWITCHBOARD_BENCH_BINARY")
	}
	if c.Loadgen == "" {
		c.Loadgen = "go"
	}
	var sc *benchScenario
	for i := range benchScenarios {
		if benchScenarios[i].name == c.Scenario {
			sc = &benchScenarios[i]
		}
	}
	switch {
	case sc == nil:
		return nil, fmt.Errorf("bench: unknown scenario %q (known: %s)", c.Scenario, strings.Join(benchScenarioNames(), ", "))
	case c.Rounds < 1:
		return nil, fmt.Errorf("bench: --rounds must be at least 1")
	case c.Connections < 1:
		return nil, fmt.Errorf("bench: --connections must be at least 1")
	case c.Duration/time.Duration(c.Rounds) < 10*time.Millisecond:
		return nil, fmt.Errorf("bench: --duration %v over %d rounds leaves less than 10ms per round", c.Duration, c.Rounds)
	case c.Loadgen != "go" && c.Loadgen != "wrk":
		return nil, fmt.Errorf("bench: --loadgen %q: want go or wrk", c.Loadgen)
	case c.Loadgen == "wrk" && sc.name != "send":
		return nil, fmt.Errorf("bench: --loadgen wrk measures the send scenario only")
	case c.Loadgen == "wrk" && len(c.Nodes) > 0:
		return nil, fmt.Errorf("bench: --loadgen wrk and --nodes do not go together (wrk loads one address)")
	case c.Loadgen == "wrk" && c.Duration/time.Duration(c.Rounds) < time.Second:
		return nil, fmt.Errorf("bench: --loadgen wrk needs at least 1s per round (wrk -d takes whole seconds)")
	}
	if len(c.Nodes) > 0 || len(c.Tenants) > 0 {
		if sc.name != "send" {
			return nil, fmt.Errorf("bench: --nodes and --tenants go with --scenario send")
		}
		if len(c.Nodes) == 0 {
			return nil, fmt.Errorf("bench: --tenants goes with --nodes")
		}
		if !isPostgres(c.Database) {
			return nil, fmt.Errorf("bench: --nodes needs --database postgres://... (nodes share one PostgreSQL database)")
		}
		for _, n := range c.Nodes {
			if n < 1 || n > maxNodes {
				return nil, fmt.Errorf("bench: --nodes: %d is not between 1 and %d", n, maxNodes)
			}
		}
		if len(c.Tenants) == 0 {
			c.Tenants = []int{1, 3}
		}
		for _, n := range c.Tenants {
			if n < 1 || n > maxTenants {
				return nil, fmt.Errorf("bench: --tenants: %d is not between 1 and %d", n, maxTenants)
			}
		}
	}
	return sc, nil
}

func isPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// Run runs the benchmark c describes, writing its report to stdout and its
// progress to stderr. It fails when the measurements cannot be trusted
// (more than 0.1% errors, a target that completed nothing), not when a
// figure misses its target: the report says PASS or FAIL.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	sc, err := c.check()
	if err != nil {
		return err
	}
	slice := c.Duration / time.Duration(c.Rounds)
	switch {
	case c.Warmup == 0:
		c.Warmup = min(slice/4, 500*time.Millisecond)
	case c.Warmup < 0:
		c.Warmup = 0
	}

	if c.CPUProfile != "" {
		pf, err := os.Create(c.CPUProfile)
		if err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	if c.MemProfile != "" {
		// Created now, so that a bad path fails before the run, not after.
		pf, err := os.Create(c.MemProfile)
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

	if c.Trace != "" {
		tf, err := os.Create(c.Trace)
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
	// Child processes' lines and the progress lines meet on stderr.
	stderr = &lockedWriter{w: stderr}
	env := &benchEnv{database: c.Database, plans: filepath.Join(tmp, "plans.json"), getenv: c.Getenv, stderr: stderr, binary: c.Binary}
	defer env.close()
	if len(c.Nodes) > 0 { // a schema of its own for every node count
		if err := os.WriteFile(env.plans, []byte(benchPlans), 0o600); err != nil {
			return err
		}
		return runNodes(ctx, env, c, benchOptions{duration: c.Duration, warmup: c.Warmup, rounds: c.Rounds, connections: c.Connections, json: c.JSON}, stdout)
	}
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
		if err := sqlstore.CheckURL(env.database); err != nil {
			return fmt.Errorf("bench: --database: %w", err)
		}
		dbLabel = env.database
	}
	if err := os.WriteFile(env.plans, []byte(benchPlans), 0o600); err != nil {
		return err
	}

	env.dbLabel = dbLabel
	o := benchOptions{duration: c.Duration, warmup: c.Warmup, rounds: c.Rounds, connections: c.Connections, json: c.JSON}
	cfg := server.Config{Addr: "127.0.0.1:0", Database: env.database, PlansFile: env.plans, LogLevel: "info", ShutdownTimeout: 5 * time.Second}
	if sc.configure != nil {
		sc.configure(&cfg)
	}
	if sc.prepare != nil {
		if err := sc.prepare(ctx, env, &cfg); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	serverURL, stopServer, err := startBenchServer(ctx, cfg, stderr)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer stopServer()
	env.serverURL = serverURL
	if sc.run != nil {
		return sc.run(ctx, env, o, stdout)
	}
	if c.Loadgen == "wrk" {
		return runWrk(ctx, env, sc, o, stdout)
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
		sc.name, c.Connections, c.Rounds, slice, c.Warmup, dbLabel)
	fmt.Fprintln(stderr, header)
	progress := func(round int, so rounds.Outcome) {
		var b strings.Builder
		fmt.Fprintf(&b, "round %d/%d: %s %.0f req/s", round, c.Rounds, so.Baseline.Name, so.Baseline.Runs[round-1].RPS)
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
		Rounds: c.Rounds, Duration: c.Duration, Warmup: c.Warmup, Connections: c.Connections,
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
	if c.JSON {
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

// startBenchServer runs the server in-process (server.Run with c, whose
// zero fields take the defaults of `serve`, whatever SWITCHBOARD_* variables
// are set, so runs are comparable) and returns its base URL once it listens,
// and a function that shuts it down and returns the server's error. c must
// keep the log level at info, for the "listening" line. The server installs
// its logger as the process's default; stop puts the previous one back.
func startBenchServer(ctx context.Context, c server.Config, stderr io.Writer) (url string, stop func() error, err error) {
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
	c.Log = sink
	c.Getenv = func(string) string { return "" }
	// The label marks every goroutine of the server (they inherit it), so
	// that a --cpuprofile can be cut to the server alone:
	// go tool pprof -tagfocus target=server.
	go pprof.Do(sctx, pprof.Labels("target", "server"), func(sctx context.Context) {
		done <- server.Run(sctx, c)
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

// lockedWriter serialises writes to w, which several goroutines share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
