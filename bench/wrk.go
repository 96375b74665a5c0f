package bench

// The wrk cross-check of the send scenario (--loadgen wrk): the same
// alternating rounds as the Go load generator, each slice one run of
// `wrk -t2 -cCONNECTIONS -dSLICE --latency -s send.lua URL` (bench/wrk/send.lua,
// embedded and written to a temporary file) against the bare handler and
// against the server, so that a figure that holds with one load generator
// can be checked with another written in C. wrk is a Debian package
// (apt-get install wrk); it is looked up on the PATH.

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/bench/rounds"
)

//go:embed wrk/send.lua
var wrkSendLua []byte

// A request wrk has no answer to within 30s (--timeout; its default is 2s,
// which a loaded machine can exceed without anything being wrong) counts as
// an error.

// wrkThreads is wrk's -t: two, as the cross-check (`wrk -t2 -c64`)
// and the two cores of the machines this runs on have it.
const wrkThreads = 2

func runWrk(ctx context.Context, env *benchEnv, sc *benchScenario, o benchOptions, stdout io.Writer) error {
	exe, err := exec.LookPath("wrk")
	if err != nil {
		return errors.New("bench: --loadgen wrk: wrk is not installed (Debian: apt-get install wrk)")
	}
	variants, err := sc.setup(ctx, env)
	if err != nil {
		return fmt.Errorf("bench: scenario %s: %w", sc.name, err)
	}
	v := variants[0]
	if err := probeVariant(ctx, env.serverURL, v); err != nil {
		return fmt.Errorf("bench: %s: the server does not answer as the scenario expects: %w", v.name, err)
	}
	key := strings.TrimPrefix(v.request(env.serverURL, 0, 0).Header.Get("Authorization"), "Bearer ")
	script := filepath.Join(filepath.Dir(env.plans), "send.lua")
	if err := os.WriteFile(script, wrkSendLua, 0o600); err != nil {
		return err
	}
	bareURL, stopBare, err := loadgen.Serve(loadgen.BareHandler())
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer stopBare()

	slice := (o.duration / time.Duration(o.rounds)).Truncate(time.Second)
	header := fmt.Sprintf("scenario %s: wrk -t%d -c%d -d%v --latency -s bench/wrk/send.lua, %d rounds per target, no warmup, database %s",
		sc.name, wrkThreads, o.connections, slice, o.rounds, env.dbLabel)
	fmt.Fprintln(env.stderr, header)
	type target struct {
		name, url string
		runs      []loadgen.Result
	}
	targets := []*target{{name: "bare net/http (wrk)", url: bareURL}, {name: v.name + " (wrk)", url: env.serverURL}}
	for round := range o.rounds {
		// The order alternates, as rounds.Run rotates it.
		order := []*target{targets[round%2], targets[(round+1)%2]}
		for _, t := range order {
			r, err := runWrkOnce(ctx, exe, script, key, t.url, o.connections, slice)
			if err != nil {
				return fmt.Errorf("bench: wrk against %s: %w", t.name, err)
			}
			r.Name = t.name
			t.runs = append(t.runs, r)
		}
		fmt.Fprintf(env.stderr, "round %d/%d: %s %.0f req/s; %s %.0f req/s (%.3fx)\n", round+1, o.rounds,
			targets[0].name, targets[0].runs[round].RPS, targets[1].name, targets[1].runs[round].RPS,
			targets[1].runs[round].RPS/targets[0].runs[round].RPS)
	}
	out := rounds.Outcome{Rounds: o.rounds, Slice: slice, Connections: o.connections}
	for i, t := range targets {
		s := rounds.Series{Name: t.name, Runs: t.runs, Total: rounds.Aggregate(t.name, t.runs)}
		if i > 0 {
			for r, run := range t.runs {
				if b := targets[0].runs[r]; b.RPS > 0 {
					s.Ratios = append(s.Ratios, run.RPS/b.RPS)
				}
				if b := targets[0].runs[r]; b.P99 > 0 {
					s.P99Ratios = append(s.P99Ratios, float64(run.P99)/float64(b.P99))
				}
			}
			out.Targets = append(out.Targets, s)
		} else {
			out.Baseline = s
		}
	}
	failures := benchFailures(out)
	var extra benchReport
	if env.report != nil {
		if extra, err = env.report(ctx, out); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		failures = append(failures, extra.failures...)
	}
	wsc := *sc
	wsc.name += " (wrk)"
	if o.json {
		err = writeBenchJSON(stdout, &wsc, out, env.dbLabel, failures, extra.json)
	} else {
		err = writeBenchText(stdout, header, &wsc, out)
		if err == nil {
			_, err = io.WriteString(stdout, extra.text)
		}
	}
	if err != nil {
		return err
	}
	if len(failures) > 0 {
		return fmt.Errorf("bench: %s", strings.Join(failures, "; "))
	}
	return nil
}

// runWrkOnce runs wrk once against url and reads the line send.lua prints.
func runWrkOnce(ctx context.Context, exe, script, key, url string, conns int, d time.Duration) (loadgen.Result, error) {
	cmd := exec.CommandContext(ctx, exe, fmt.Sprintf("-t%d", min(wrkThreads, conns)), fmt.Sprintf("-c%d", conns),
		fmt.Sprintf("-d%ds", int(d.Seconds())), "--timeout", "30s", "--latency", "-s", script, url)
	cmd.Env = append(os.Environ(), "SWITCHBOARD_BENCH_KEY="+key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		return loadgen.Result{}, fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return parseWrk(raw)
}

// parseWrk reads the SWITCHBOARD_WRK line of wrk's output.
func parseWrk(raw []byte) (loadgen.Result, error) {
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "SWITCHBOARD_WRK ")
		if !ok {
			continue
		}
		f := map[string]int64{}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			var n int64
			if _, err := fmt.Sscan(v, &n); err != nil {
				return loadgen.Result{}, fmt.Errorf("wrk printed %q", sc.Text())
			}
			f[k] = n
		}
		r := loadgen.Result{Requests: uint64(f["requests"]), Errors: uint64(f["errors"]), Unexpected: map[int]uint64{},
			Elapsed: time.Duration(f["duration_us"]) * time.Microsecond,
			P50:     time.Duration(f["p50_us"]) * time.Microsecond, P90: time.Duration(f["p90_us"]) * time.Microsecond, P99: time.Duration(f["p99_us"]) * time.Microsecond,
			Max: time.Duration(f["max_us"]) * time.Microsecond}
		if f["status_errors"] > 0 {
			r.Unexpected[400] = uint64(f["status_errors"]) // wrk counts statuses >= 400 without telling them apart
		}
		if r.Elapsed > 0 {
			r.RPS = float64(r.Requests) / r.Elapsed.Seconds()
		}
		return r, nil
	}
	return loadgen.Result{}, fmt.Errorf("no SWITCHBOARD_WRK line in wrk's output:\n%s", raw)
}
