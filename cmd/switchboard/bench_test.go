package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/bench/rounds"
	"github.com/switchboard/switchboard/internal/testenv"
)

// These tests check that the harness works; they make no assertion about
// the figures, which depend on the machine.

func benchNoEnv(string) string { return "" }

func TestBenchKeys(t *testing.T) {
	testenv.Timing(t)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench", "--scenario", "keys", "--duration", "1s", "--rounds", "2", "--connections", "8"},
		benchNoEnv, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	header := regexp.MustCompile(`(?m)^name +requests +errors +req/s +p50 ms +p99 ms +req/s ratio +p99 ratio +cpu us/req +cpu ratio$`)
	if !header.MatchString(out) {
		t.Fatalf("no table header in output")
	}
	for _, name := range []string{"bare net/http", "keys (scale, no limiter)", "keys (limited key)"} {
		// name, requests, errors = 0, then the figures.
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` +[1-9][0-9]* +0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+x +[0-9.]+x +([0-9.]+ +[0-9.]+x|- +-)$`)
		if !row.MatchString(out) {
			t.Errorf("no row with requests and no errors for %q", name)
		}
	}
	for _, name := range []string{"keys (scale, no limiter)", "keys (limited key)"} {
		ratio := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) +
			`: median ratio [0-9.]+ \(min [0-9.]+, max [0-9.]+\) over 2 rounds; target >= 0\.60: (PASS|FAIL)$`)
		if !ratio.MatchString(out) {
			t.Errorf("no ratio line for %q", name)
		}
	}
	if strings.Contains(stderr.String(), `"level":"ERROR"`) {
		t.Errorf("the server logged errors")
	}
}

func TestBenchFailures(t *testing.T) {
	res := func(name string, requests, errs uint64) rounds.Series {
		return rounds.Series{Name: name, Total: loadgen.Result{Name: name, Requests: requests, Errors: errs,
			Unexpected: map[int]uint64{401: errs}}}
	}
	ok := rounds.Outcome{Baseline: res("bare", 10000, 0), Targets: []rounds.Series{res("a", 10000, 10), res("b", 5000, 0)}}
	if f := benchFailures(ok); len(f) != 0 {
		t.Errorf("0.1%% errors: failures %v", f)
	}
	bad := rounds.Outcome{Baseline: res("bare", 0, 0), Targets: []rounds.Series{res("a", 10000, 11), res("b", 5000, 0)}}
	f := benchFailures(bad)
	if len(f) != 2 || !strings.Contains(f[0], "bare: no request completed") || !strings.Contains(f[1], "a: 11 of 10000 requests failed") ||
		!strings.Contains(f[1], "401") {
		t.Errorf("failures %q", f)
	}
}

func TestBenchKeysJSON(t *testing.T) {
	testenv.Timing(t)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench", "--duration", "200ms", "--rounds", "2", "--connections", "2", "--json"},
		benchNoEnv, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var lines []map[string]any
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 {
		t.Fatalf("got %d JSON lines, want 3 targets and a summary:\n%s", len(lines), stdout.String())
	}
	for i, role := range []string{"baseline", "server", "server"} {
		l := lines[i]
		if l["role"] != role || l["scenario"] != "keys" || l["errors"] != 0.0 || l["requests"].(float64) == 0 {
			t.Errorf("target line %d: %v", i, l)
		}
		if _, ok := l["median_ratio"]; ok != (role == "server") {
			t.Errorf("target line %d: median_ratio present = %v", i, ok)
		}
	}
	sum := lines[3]
	if sum["summary"] != true || sum["errors_ok"] != true || sum["rounds"] != 2.0 || len(sum["variants"].([]any)) != 2 {
		t.Errorf("summary: %v", sum)
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--scenario", "nope"},
		{"bench", "--rounds", "0"},
		{"bench", "--connections", "0"},
		{"bench", "--duration", "1ms"},
		{"bench", "extra"},
		{"bench", "--no-such-flag"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, benchNoEnv, &stdout, &stderr)
		if err == nil {
			t.Errorf("%v: succeeded", args)
		}
		if errors.Is(err, errUsage) && !strings.Contains(stderr.String(), "Usage: switchboard bench") {
			t.Errorf("%v: usage not printed: %s", args, stderr.String())
		}
	}
	// --help lists the flags but not the hidden profiling one.
	var stderr bytes.Buffer
	run(context.Background(), []string{"bench", "--help"}, benchNoEnv, &bytes.Buffer{}, &stderr)
	if help := stderr.String(); !strings.Contains(help, "-connections") || strings.Contains(help, "cpuprofile") {
		t.Errorf("help:\n%s", help)
	}
}

// TestBenchSMPP: the smpp scenario runs through both windows, every send
// reaches the SMSC, and it reports its figures (whatever they are here).
func TestBenchSMPP(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench", "--scenario", "smpp", "--duration", "1s", "--rounds", "1", "--connections", "4", "--json"},
		benchNoEnv, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	var windows []float64
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		if l["summary"] == true {
			if f, _ := l["failures"].([]any); len(f) != 0 {
				t.Errorf("failures: %v", f)
			}
			continue
		}
		if l["scenario"] != "smpp" || l["errors"] != 0.0 || l["submits_accepted"].(float64) == 0 || l["sends_accepted"].(float64) == 0 ||
			l["latencies_measured"] != l["sends_accepted"] {
			t.Errorf("window line: %v", l)
		}
		windows = append(windows, l["window"].(float64))
	}
	if len(windows) != 2 || windows[0] != 10 || windows[1] != 100 {
		t.Fatalf("windows %v", windows)
	}
}
