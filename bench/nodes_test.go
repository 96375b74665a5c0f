package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/dbtest"
)

// switchboardBinary builds cmd/switchboard once per test run: the nodes of
// --nodes are child processes running its `serve`.
var switchboardBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "switchboard-bench-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "switchboard")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/switchboard/switchboard/cmd/switchboard").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// TestBenchNodes runs the send scenario on one node and then on two, on
// PostgreSQL, briefly: every node receives requests, no request fails, and
// the report has a line for every node count and tenant count with the
// ratios and the verdicts. It asserts nothing about the figures.
func TestBenchNodes(t *testing.T) {
	base := os.Getenv(dbtest.PostgresEnv)
	if base == "" {
		t.Skipf("%s is not set: skipping --nodes, which needs PostgreSQL", dbtest.PostgresEnv)
	}
	bin, err := switchboardBinary()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = Run(context.Background(), Config{Scenario: "send", Duration: 2 * time.Second, Rounds: 1, Connections: 8, Database: base,
		Nodes: []int{1, 2}, Binary: bin, JSON: true}, &stdout, &stderr)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		Nodes, Tenants int
		Requests       float64
		Errors         float64
		SendsPerS      float64  `json:"sends_per_s"`
		MedianRatio    *float64 `json:"median_ratio"`
		VsOneNode      *float64 `json:"vs_one_node"`
		PerNode        []int64  `json:"requests_per_node"`
		Failed         float64
		BareCPUUs      *float64 `json:"bare_cpu_us_per_request"`
		CPUUs          *float64 `json:"cpu_us_per_send"`
		IdlePct        *float64 `json:"idle_pct"`
		NodeCPUUs      *float64 `json:"node_cpu_us_per_send"`
		PostgresCPUUs  *float64 `json:"postgres_cpu_us_per_send"`
		BenchCPUUs     *float64 `json:"bench_cpu_us_per_send"`
		SendsPerCommit *float64 `json:"sends_per_commit"`
		WritesPerCom   *float64 `json:"writes_per_commit"`
	}
	var sum struct {
		Summary  bool
		Verdicts []string
		Failures []string
		ErrorsOK bool `json:"errors_ok"`
	}
	var lines []line
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(`"summary":true`)) {
			if err := json.Unmarshal(sc.Bytes(), &sum); err != nil {
				t.Fatalf("summary: %v", err)
			}
			continue
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		lines = append(lines, l)
	}
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want one per node count and tenant count (2 x 2)", len(lines))
	}
	want := [][2]int{{1, 1}, {1, 3}, {2, 1}, {2, 3}}
	// PostgreSQL's CPU is the sum over its processes at both ends of a
	// slice: a backend of another client (another package's tests) that
	// ends within the slice takes its CPU out of the sum, and the figure is
	// left out (null). With the database on this machine it is counted on
	// at least one line.
	postgresCounted := 0
	for i, l := range lines {
		if l.Nodes != want[i][0] || l.Tenants != want[i][1] {
			t.Errorf("line %d is %d nodes, %d tenants; want %v", i, l.Nodes, l.Tenants, want[i])
		}
		if l.Requests == 0 || l.Errors != 0 || l.Failed != 0 || l.SendsPerS <= 0 || l.MedianRatio == nil {
			t.Errorf("line %d: %+v", i, l)
		}
		if runtime.GOOS == "linux" && (l.BareCPUUs == nil || *l.BareCPUUs <= 0 || l.CPUUs == nil || *l.CPUUs <= 0 ||
			l.IdlePct == nil || *l.IdlePct < 0 || *l.IdlePct > 100) {
			t.Errorf("line %d: machine CPU per request %v (bare %v), idle %v%%", i, l.CPUUs, l.BareCPUUs, l.IdlePct)
		}
		// The processes' shares: the nodes and the load generator always
		// work; PostgreSQL's processes are counted when they run here.
		// Together they are part of the machine's busy time (a tolerance
		// for the clock ticks both are counted in).
		if runtime.GOOS == "linux" {
			if l.NodeCPUUs == nil || *l.NodeCPUUs <= 0 || l.BenchCPUUs == nil || *l.BenchCPUUs <= 0 {
				t.Errorf("line %d: CPU per send of the nodes %v, of the bench %v", i, l.NodeCPUUs, l.BenchCPUUs)
			} else if l.CPUUs != nil {
				sum := *l.NodeCPUUs + *l.BenchCPUUs
				if l.PostgresCPUUs != nil {
					sum += *l.PostgresCPUUs
				}
				if sum > 1.15**l.CPUUs {
					t.Errorf("line %d: the processes' CPU per send (%.0f us) is more than the machine's (%.0f us)", i, sum, *l.CPUUs)
				}
			}
			if l.PostgresCPUUs != nil && *l.PostgresCPUUs <= 0 {
				t.Errorf("line %d: PostgreSQL's CPU per send %v", i, *l.PostgresCPUUs)
			}
			if l.PostgresCPUUs != nil {
				postgresCounted++
			}
		}
		// A commit holds at least one write, and at most the sends of the
		// 8 connections, which wait for it.
		if l.SendsPerCommit == nil || *l.SendsPerCommit <= 0 || *l.SendsPerCommit > 8 || l.WritesPerCom == nil || *l.WritesPerCom < 1 {
			t.Errorf("line %d: sends per commit %v, writes per commit %v", i, l.SendsPerCommit, l.WritesPerCom)
		}
		if len(l.PerNode) != l.Nodes {
			t.Errorf("line %d: requests per node %v for %d nodes", i, l.PerNode, l.Nodes)
		}
		for node, n := range l.PerNode {
			if n == 0 {
				t.Errorf("line %d: node %d received no request", i, node+1)
			}
		}
		if (l.VsOneNode != nil) != (l.Nodes == 2) {
			t.Errorf("line %d: vs_one_node %v", i, l.VsOneNode)
		}
	}
	if local := strings.Contains(base, "127.0.0.1") || strings.Contains(base, "localhost"); runtime.GOOS == "linux" && local && postgresCounted == 0 {
		t.Errorf("PostgreSQL's CPU per send counted on no line with the database on this machine")
	}
	if !sum.Summary || !sum.ErrorsOK || len(sum.Failures) != 0 {
		t.Errorf("summary: %+v", sum)
	}
	// Two comparisons with one node and two one-node ratios, each with its
	// verdict.
	if len(sum.Verdicts) != 4 {
		t.Errorf("verdicts: %q", sum.Verdicts)
	}
	for _, v := range sum.Verdicts {
		if !strings.HasSuffix(v, ": PASS") && !strings.HasSuffix(v, ": FAIL") {
			t.Errorf("verdict %q", v)
		}
	}
}

// TestBenchNodesChecks: --nodes refuses what it cannot measure before it
// starts anything.
func TestBenchNodesChecks(t *testing.T) {
	for _, c := range []Config{
		{Scenario: "send", Nodes: []int{1, 2}},                                    // SQLite
		{Scenario: "keys", Nodes: []int{1}, Database: "postgres://127.0.0.1:1/x"}, // not send
		{Scenario: "send", Nodes: []int{0}, Database: "postgres://127.0.0.1:1/x"}, // no node
		{Scenario: "send", Nodes: []int{1}, Tenants: []int{0}, Database: "postgres://127.0.0.1:1/x"},
		{Scenario: "send", Tenants: []int{2}, Database: "postgres://127.0.0.1:1/x"}, // tenants without nodes
		{Scenario: "send", Nodes: []int{1}, Loadgen: "wrk", Database: "postgres://127.0.0.1:1/x"},
	} {
		c.Duration, c.Rounds, c.Connections = time.Second, 1, 1
		var stdout, stderr bytes.Buffer
		if err := Run(context.Background(), c, &stdout, &stderr); err == nil {
			t.Errorf("%+v: no error", c)
		} else if !strings.Contains(err.Error(), "--") {
			t.Errorf("%+v: %v (names no flag)", c, err)
		}
	}
}

// TestNodesVerdicts: each node count against one node of the same tenant
// count, on the ratios to the bare handler, and one node against the bare
// handler, each at its threshold.
func TestNodesVerdicts(t *testing.T) {
	res := func(nodes, tenants int, ratio, sends float64) *nodesResult {
		return &nodesResult{Nodes: nodes, Tenants: tenants, MedianRatio: benchFloat(ratio), SendsPerS: benchFloat(sends)}
	}
	results := []*nodesResult{
		res(1, 1, 0.25, 1000), res(1, 3, 0.24, 1000),
		res(3, 1, 0.225, 1200), // 0.90x of one node: passes
		res(3, 3, 0.2159, 800), // 0.8996x: fails
	}
	got := nodesVerdicts(results, []int{1, 3})
	want := []struct {
		prefix string
		pass   bool
	}{
		{"1 node, 1 tenant(s): 0.25x the bare handler; target >= 0.25: PASS", true},
		{"1 node, 3 tenant(s): 0.24x the bare handler; target >= 0.25: FAIL", false},
		{"3 nodes vs 1, 1 tenant(s): 0.90x (sends/s 1.20x); target >= 0.90: PASS", true},
		{"3 nodes vs 1, 3 tenant(s): 0.90x (sends/s 0.80x); target >= 0.90: FAIL", false},
	}
	if len(got) != len(want) {
		t.Fatalf("verdicts %+v", got)
	}
	for i, w := range want {
		if got[i].text != w.prefix || got[i].pass != w.pass {
			t.Errorf("verdict %d: %q %v, want %q %v", i, got[i].text, got[i].pass, w.prefix, w.pass)
		}
	}
	if results[0].VsOneNode != nil || results[2].VsOneNode == nil || float64(*results[2].RawVsOneNode) != 1.2 {
		t.Errorf("vs one node: %v, %v", results[0].VsOneNode, results[2].VsOneNode)
	}
	// Without a one-node step, the fewest nodes are the reference and no
	// one-node target is checked.
	got = nodesVerdicts([]*nodesResult{res(2, 1, 0.2, 1000), res(3, 1, 0.1, 600)}, []int{2, 3})
	if len(got) != 1 || got[0].text != "3 nodes vs 2, 1 tenant(s): 0.50x (sends/s 0.60x); target >= 0.90: FAIL" {
		t.Errorf("verdicts without one node: %+v", got)
	}
}
