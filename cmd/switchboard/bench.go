package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/bench"
	"github.com/switchboard/switchboard/bench/loadgen"
)

// benchHiddenFlags are accepted but left out of --help.
var benchHiddenFlags = map[string]bool{"cpuprofile": true, "memprofile": true, "trace": true}

// benchCmd is `switchboard bench`: its flags, resolved into a bench.Config
// (package bench is the harness).
func benchCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	// The flags deliberately have no SWITCHBOARD_* defaults: in particular
	// SWITCHBOARD_DATABASE is not read, so that a benchmark never creates
	// tenants in the configured database unless told to with --database.
	f := newFlags("bench", getenv, stdout)
	names := make([]string, 0, len(bench.Scenarios()))
	for _, s := range bench.Scenarios() {
		names = append(names, s.Name)
	}
	scenario := f.String("scenario", "keys", "scenario: "+strings.Join(names, ", "))
	duration := f.Duration("duration", 10*time.Second, "measured time per target (the bare handler and each server variant), split evenly over the rounds")
	conns := f.Int("connections", loadgen.DefaultConnections, "concurrent keep-alive connections")
	nRounds := f.Int("rounds", 5, "alternating rounds: each measures the bare handler and each server variant once, in an order that rotates from round to round")
	warmup := f.Duration("warmup", 0, "warmup before every measured slice; 0 means a quarter of the slice, at most 500ms; negative means none")
	dbURL := f.String("database", "", "database of the server: sqlite:PATH or postgres://... (default: a fresh SQLite file in a temporary directory, removed afterwards; SWITCHBOARD_DATABASE is not read)")
	jsonOut := f.Bool("json", false, "print one JSON object per target and one summary object instead of the table")
	nodes := f.String("nodes", "", "send scenario on PostgreSQL: node counts to measure, e.g. 1,2,3; each count runs that many serve child processes on one fresh database, the connections dealt to them in turn")
	tenants := f.String("tenants", "", "with --nodes: tenant counts, each a variant whose sends are spread over that many tenants (default 1,3)")
	dbMaxConns := f.Int("db-max-conns", 0, "with --nodes: passed to every node as serve's --db-max-conns (0: the node's default)")
	dbWriters := f.Int("db-writers", 0, "with --nodes: passed to every node as serve's --db-writers (0: the node's default, adapted to the live nodes)")
	loadgenName := f.String("loadgen", "go", "load generator of the send scenario: go (bench/loadgen) or wrk (runs wrk -t2 with bench/wrk/send.lua against the bare handler and the server; needs wrk installed)")
	binary := f.String("binary", "", "the switchboard binary child processes run (the devices scenario, --nodes); default: this program (env SWITCHBOARD_BENCH_BINARY)")
	cpuprofile := f.String("cpuprofile", "", "write a CPU profile of the whole run (server and load generator) to this file")
	memprofile := f.String("memprofile", "", "write an allocation profile of the whole run to this file (go tool pprof -sample_index=alloc_space)")
	traceFile := f.String("trace", "", "write an execution trace of the whole run to this file (go tool trace)")
	f.Usage = func() {
		out := f.Output()
		fmt.Fprintf(out, "Usage: switchboard bench [flags]\n\nCompares the server with a bare net/http JSON handler under the same load.\nScenarios:\n")
		for _, s := range bench.Scenarios() {
			fmt.Fprintf(out, "  %s: %s\n", s.Name, s.About)
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
	c := bench.Config{Scenario: *scenario, Duration: *duration, Rounds: *nRounds, Connections: *conns, Warmup: *warmup,
		Database: *dbURL, JSON: *jsonOut, CPUProfile: *cpuprofile, MemProfile: *memprofile, Trace: *traceFile,
		Loadgen: *loadgenName, Binary: *binary, Getenv: getenv}
	if c.Nodes, err = intList("--nodes", *nodes); err != nil {
		return err
	}
	if c.Tenants, err = intList("--tenants", *tenants); err != nil {
		return err
	}
	if *dbMaxConns != 0 {
		c.NodeArgs = append(c.NodeArgs, "--db-max-conns", strconv.Itoa(*dbMaxConns))
	}
	if *dbWriters != 0 {
		c.NodeArgs = append(c.NodeArgs, "--db-writers", strconv.Itoa(*dbWriters))
	}
	return bench.Run(ctx, c, stdout, stderr)
}

// intList parses a comma-separated list of whole numbers such as 1,2,3.
func intList(flagName, s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("bench: %s %q: want whole numbers separated by commas, e.g. 1,2,3", flagName, s)
		}
		out = append(out, n)
	}
	return out, nil
}
