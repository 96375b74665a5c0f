package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/bench/rounds"
	"github.com/switchboard/switchboard/internal/testenv"
)

// These tests check that the harness works; they make no assertion about
// the figures, which depend on the machine.

func TestBenchKeys(t *testing.T) {
	testenv.Timing(t)
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), Config{Scenario: "keys", Duration: time.Second, Rounds: 2, Connections: 8}, &stdout, &stderr)
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

// TestBenchSMPP: the smpp scenario runs through both windows, every send
// reaches the SMSC, and it reports its figures (whatever they are here).
func TestBenchSMPP(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), Config{Scenario: "smpp", Duration: time.Second, Rounds: 1, Connections: 4, JSON: true}, &stdout, &stderr)
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
