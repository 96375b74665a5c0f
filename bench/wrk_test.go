package bench

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestParseWrk(t *testing.T) {
	out := "Running 1s test @ http://127.0.0.1:1\n  2 threads and 64 connections\n" +
		"SWITCHBOARD_WRK requests=2500 duration_us=1000000 errors=3 status_errors=2 p50_us=900 p90_us=1500 p99_us=4000 max_us=9000\n"
	r, err := parseWrk([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 2500 || r.Errors != 3 || r.Unexpected[400] != 2 || r.RPS != 2500 || r.Elapsed != time.Second ||
		r.P50 != 900*time.Microsecond || r.P90 != 1500*time.Microsecond || r.P99 != 4*time.Millisecond || r.Max != 9*time.Millisecond {
		t.Errorf("parsed %+v", r)
	}
	for _, bad := range []string{"Running 1s test\n", "SWITCHBOARD_WRK requests=x\n"} {
		if _, err := parseWrk([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestBenchSendWrk runs the send scenario's cross-check with wrk briefly:
// both targets complete requests without errors, every request reached the
// store, and the report has the ratio. It asserts nothing about the
// figures.
func TestBenchSendWrk(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("wrk is not installed (.ci/run installs it)")
		}
		t.Skip("wrk is not installed (apt-get install wrk): skipping the wrk cross-check")
	}
	out, _ := runBench(t, Config{Scenario: "send", Loadgen: "wrk", Duration: 2 * time.Second, Rounds: 2, Connections: 8, JSON: true})
	lines := jsonLines(t, out)
	if len(lines) != 4 {
		t.Fatalf("got %d JSON lines, want the baseline, the server, the pipeline and the summary", len(lines))
	}
	for i, role := range []string{"baseline", "server"} {
		l := lines[i]
		if l["role"] != role || l["errors"] != 0.0 || l["requests"].(float64) == 0 || !strings.HasSuffix(l["name"].(string), "(wrk)") {
			t.Errorf("target line %d: %v", i, l)
		}
	}
	if r, _ := lines[1]["round_ratios"].([]any); len(r) != 2 {
		t.Errorf("server line: round ratios %v", lines[1]["round_ratios"])
	}
	p := lines[2]
	// The store accepted at least every 202 wrk counted (it also has the
	// probe and the requests still in flight when a run ended).
	if p["pipeline"] != true || p["failed"] != 0.0 || p["drained"] != true || p["accepted"].(float64) < lines[1]["requests"].(float64) {
		t.Errorf("pipeline line: %v", p)
	}
	if sum := lines[3]; sum["summary"] != true || sum["errors_ok"] != true || sum["scenario"] != "send (wrk)" {
		t.Errorf("summary: %v", sum)
	}
}
