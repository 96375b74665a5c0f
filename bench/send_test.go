package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/internal/testenv"
)

// These tests run the send and webhooks scenarios briefly and check the
// shape of the report and that nothing failed; they make no assertion about
// the figures, which depend on the machine.

func runBench(t *testing.T, c Config) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := Run(context.Background(), c, &out, &errOut)
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errOut.String(), `"level":"ERROR"`) {
		t.Errorf("the server logged errors")
	}
	return out.String(), errOut.String()
}

// jsonLines decodes the bench's --json output, one object a line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

func mustMatch(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)` + p).MatchString(out) {
			t.Errorf("no line matching %q", p)
		}
	}
}

func TestBenchSend(t *testing.T) {
	testenv.Timing(t)
	out, _ := runBench(t, Config{Scenario: "send", Duration: time.Second, Rounds: 1, Connections: 8})
	num := `[0-9]+(\.[0-9]+)?`
	mustMatch(t, out,
		`^scenario send: 8 connections, 1 rounds of 1s per target`,
		`^bare net/http +[1-9][0-9]* +0 +`+num,
		`^send \(scale, durable\) +[1-9][0-9]* +0 +`+num,
		`^send \(scale, durable\): median ratio `+num+` \(min `+num+`, max `+num+`\) over 1 rounds; target >= 0\.35: (PASS|FAIL)$`,
		`^send \(scale, durable\): p99 `+num+` ms \(median of the rounds' p99\); target < 25ms: (PASS|FAIL)$`,
		`^  accepted [1-9][0-9]* \(`+num+`/s\), delivered [0-9]+ \(`+num+`/s\) during the run; 0 failed$`,
		`^  backlog \(queued \+ sent\), sampled every 1s: max [0-9]+, [0-9]+ at the end of the run; drained to 0 in `+num+`s after the load stopped$`,
		`^  group commit: [1-9][0-9]* transactions, `+num+` writes .* per commit$`,
		`^  pipeline keeps up .*: (PASS|FAIL)$`,
	)
	// The group commit's counters are the server's (its /metrics), not
	// those of the bench's own handle on the database: its transactions
	// ran at least one write for every accepted send.
	accepted := regexp.MustCompile(`(?m)^  accepted ([0-9]+) `).FindStringSubmatch(out)
	gc := regexp.MustCompile(`(?m)^  group commit: ([0-9]+) transactions, ([0-9.]+) writes`).FindStringSubmatch(out)
	if accepted == nil || gc == nil {
		t.Fatalf("no accepted or group commit figures in:\n%s", out)
	}
	n, _ := strconv.ParseFloat(accepted[1], 64)
	commits, _ := strconv.ParseFloat(gc[1], 64)
	per, _ := strconv.ParseFloat(gc[2], 64)
	if most := commits * (per + 0.05); most < n { // per is rounded to 0.1
		t.Errorf("group commit: %v transactions of %v writes each, fewer writes than the %v sends accepted", commits, per, n)
	}
}

func TestBenchSendJSON(t *testing.T) {
	testenv.Timing(t)
	out, _ := runBench(t, Config{Scenario: "send", Duration: 400 * time.Millisecond, Rounds: 2, Connections: 4, JSON: true})
	lines := jsonLines(t, out)
	if len(lines) != 4 {
		t.Fatalf("got %d JSON lines, want the baseline, the server, the pipeline and the summary", len(lines))
	}
	if lines[0]["role"] != "baseline" || lines[1]["role"] != "server" || lines[1]["errors"] != 0.0 {
		t.Errorf("target lines: %v\n%v", lines[0], lines[1])
	}
	p := lines[2]
	for _, k := range []string{"accepted", "accepted_per_s", "delivered", "delivered_per_s", "backlog_max", "backlog_end", "drain_s", "p99_ms", "commits"} {
		if _, ok := p[k]; !ok {
			t.Errorf("pipeline line has no %q: %v", k, p)
		}
	}
	if p["pipeline"] != true || p["failed"] != 0.0 || p["drained"] != true || p["accepted"].(float64) == 0 {
		t.Errorf("pipeline line: %v", p)
	}
	if sum := lines[3]; sum["summary"] != true || sum["errors_ok"] != true || sum["scenario"] != "send" {
		t.Errorf("summary: %v", sum)
	}
}

func TestBenchWebhooks(t *testing.T) {
	testenv.Timing(t)
	out, _ := runBench(t, Config{Scenario: "webhooks", Duration: time.Second, Rounds: 1, Connections: 8})
	num := `[0-9]+(\.[0-9]+)?`
	mustMatch(t, out,
		`^scenario webhooks: database sqlite \(temporary\)`,
		`^throughput: 10 webhooks of a Scale tenant on message\.delivered; sends on 8 connections`,
		`^  sends +[1-9][0-9]* accepted in the window \(`+num+`/s\), 0 errors`,
		`^  deliveries +[1-9][0-9]* received in the window: `+num+`/s$`,
		`^  deliveries/s target >= 5000: (PASS|FAIL)$`,
		`^latency: 1 webhook of another Scale tenant; open loop, 1000 sends/s`,
		`^  event-to-receiver delay over [1-9][0-9]* deliveries: p50 `+num+` ms, p90 `+num+` ms, p99 `+num+` ms, max `+num+` ms$`,
		`^  p99 target < 250ms: (PASS|FAIL)$`,
		`^signatures: [1-9][0-9]* verified, 0 wrong$`,
	)
	// Every delivery succeeded at once and its attempt is on record.
	after := regexp.MustCompile(`(?m)^  after drain +([0-9]+) received in all, ([0-9]+) succeeded, ([0-9]+) attempts recorded, 0 pending, 0 failed`)
	m := after.FindAllStringSubmatch(out, -1)
	if len(m) != 2 {
		t.Fatalf("want 2 'after drain' lines, got %d", len(m))
	}
	for _, g := range m {
		if g[1] != g[2] || g[2] != g[3] || g[1] == "0" {
			t.Errorf("received, succeeded and attempts differ: %s", g[0])
		}
	}
}

func TestBenchWebhooksJSON(t *testing.T) {
	testenv.Timing(t)
	out, _ := runBench(t, Config{Scenario: "webhooks", Duration: 300 * time.Millisecond, Rounds: 5, Connections: 4, JSON: true})
	lines := jsonLines(t, out)
	if len(lines) != 3 {
		t.Fatalf("got %d JSON lines, want the two phases and the summary", len(lines))
	}
	if lines[0]["phase"] != "throughput" || lines[0]["deliveries_per_s"] == nil || lines[0]["failed"] != 0.0 {
		t.Errorf("throughput line: %v", lines[0])
	}
	if lines[1]["phase"] != "latency" || lines[1]["p99_ms"] == nil || lines[1]["failed"] != 0.0 {
		t.Errorf("latency line: %v", lines[1])
	}
	if sum := lines[2]; sum["summary"] != true || sum["errors_ok"] != true || sum["signatures_bad"] != 0.0 {
		t.Errorf("summary: %v", sum)
	}
}

// TestBenchSendPostgres runs the send scenario against PostgreSQL given as
// a plain URL: the bench makes a schema of its own and drops it.
func TestBenchSendPostgres(t *testing.T) {
	testenv.Timing(t)
	base := os.Getenv(dbtest.PostgresEnv)
	if base == "" {
		t.Skipf("%s is not set: skipping the PostgreSQL run", dbtest.PostgresEnv)
	}
	out, _ := runBench(t, Config{Scenario: "send", Duration: time.Second, Rounds: 1, Connections: 8, Database: base})
	mustMatch(t, out,
		`database postgres \(temporary schema\)$`,
		`^send \(scale, durable\) +[1-9][0-9]* +0 +`,
		`^  accepted [1-9][0-9]* .*; 0 failed$`,
		`drained to 0 in`,
	)
	if strings.Contains(out, base) {
		t.Errorf("the report shows the database URL")
	}
}
