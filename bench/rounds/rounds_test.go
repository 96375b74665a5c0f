package rounds

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/internal/testenv"
)

func TestMedian(t *testing.T) {
	cases := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.7, 0.6, 0.9, 0.65, 1.1}, 0.7},
	}
	for _, c := range cases {
		in := append([]float64(nil), c.in...)
		if got := Median(in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Fatalf("Median modified its input: %v", in)
			}
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func TestAggregate(t *testing.T) {
	ms := time.Millisecond
	runs := []loadgen.Result{
		{Requests: 100, Errors: 1, Unexpected: map[int]uint64{500: 1}, Elapsed: time.Second, P50: 1 * ms, P90: 2 * ms, P99: 9 * ms, Max: 20 * ms},
		{Requests: 300, Elapsed: time.Second, P50: 3 * ms, P90: 4 * ms, P99: 5 * ms, Max: 6 * ms},
		{Requests: 200, Errors: 2, Unexpected: map[int]uint64{500: 1, 401: 1}, Elapsed: 2 * time.Second, P50: 2 * ms, P90: 3 * ms, P99: 7 * ms, Max: 8 * ms},
	}
	got := Aggregate("x", runs)
	if got.Name != "x" || got.Requests != 600 || got.Errors != 3 || got.Elapsed != 4*time.Second {
		t.Fatalf("counts: %+v", got)
	}
	if got.Unexpected[500] != 2 || got.Unexpected[401] != 1 {
		t.Errorf("Unexpected = %v", got.Unexpected)
	}
	if got.RPS != 150 {
		t.Errorf("RPS = %v, want 600 requests / 4s = 150", got.RPS)
	}
	if got.P50 != 2*ms || got.P90 != 3*ms || got.P99 != 7*ms || got.Max != 20*ms {
		t.Errorf("latencies: p50 %v p90 %v p99 %v max %v", got.P50, got.P90, got.P99, got.Max)
	}
	if empty := Aggregate("e", nil); empty.RPS != 0 || empty.P99 != 0 || empty.Unexpected == nil {
		t.Errorf("empty aggregate = %+v", empty)
	}
}

func TestSeriesAndTable(t *testing.T) {
	o := Outcome{
		Rounds:   3,
		Baseline: Series{Name: "bare", Total: loadgen.Result{Requests: 3000, RPS: 1000, P50: time.Millisecond, P99: 2 * time.Millisecond}},
		Targets: []Series{{
			Name:      "server",
			Total:     loadgen.Result{Requests: 2100, Errors: 1, RPS: 700, P50: 2 * time.Millisecond, P99: 4 * time.Millisecond},
			Ratios:    []float64{0.8, 0.6, 0.7},
			P99Ratios: []float64{2, 3, 1},
		}},
	}
	s := o.Targets[0]
	if s.Median() != 0.7 || s.Min() != 0.6 || s.Max() != 0.8 {
		t.Errorf("median %v min %v max %v", s.Median(), s.Min(), s.Max())
	}
	var buf bytes.Buffer
	o.Table(&buf)
	t.Logf("\n%s", buf.String())
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3", len(lines))
	}
	for _, l := range lines[1:] {
		if len(l) != len(lines[0]) {
			t.Errorf("row %q not aligned with header %q", l, lines[0])
		}
	}
	if !strings.Contains(lines[2], "0.700x") || !strings.Contains(lines[2], "2.000x") || !strings.Contains(lines[1], "1.000x") {
		t.Errorf("ratios missing:\n%s", buf.String())
	}
}

// TestRun checks the round structure with two identical handlers; it makes
// no assertion about timing.
func TestRun(t *testing.T) {
	testenv.Timing(t)
	url, stop, err := loadgen.Serve(loadgen.BareHandler())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	failing := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	badURL, stopBad, err := loadgen.Serve(failing)
	if err != nil {
		t.Fatal(err)
	}
	defer stopBad()
	target := func(name, u string) loadgen.Target {
		return loadgen.Target{Name: name, Next: func(int, uint64) loadgen.Request { return loadgen.Request{URL: u} }}
	}
	var seen []int
	o, err := Run(context.Background(), target("base", url), []loadgen.Target{target("same", url), target("teapot", badURL)},
		Options{Rounds: 3, Duration: 300 * time.Millisecond, Warmup: 20 * time.Millisecond, Connections: 4},
		func(round int, so Outcome) {
			seen = append(seen, round)
			if so.Rounds != round || len(so.Baseline.Runs) != round || len(so.Targets[0].Runs) != round {
				t.Errorf("progress after round %d: %d rounds, %d baseline runs", round, so.Rounds, len(so.Baseline.Runs))
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || o.Rounds != 3 || o.Slice != 100*time.Millisecond {
		t.Fatalf("progress rounds %v, Rounds %d, Slice %v", seen, o.Rounds, o.Slice)
	}
	same, teapot := o.Targets[0], o.Targets[1]
	if len(o.Baseline.Runs) != 3 || len(same.Runs) != 3 || len(same.Ratios) != 3 || o.Baseline.Ratios != nil {
		t.Fatalf("runs: baseline %d, same %d, ratios %v", len(o.Baseline.Runs), len(same.Runs), same.Ratios)
	}
	if _, ok := processCPU(); ok && (len(o.Baseline.CPU) != 3 || len(same.CPU) != 3 || len(same.CPURatios) != 3 || same.CPUPerRequest() <= 0) {
		t.Errorf("CPU not recorded: baseline %v, same %v, ratios %v", o.Baseline.CPU, same.CPU, same.CPURatios)
	}
	if _, _, ok := machineCPU(); ok {
		if len(o.Baseline.Machine) != 3 || len(same.Machine) != 3 || len(same.Idle) != 3 || same.MachineCPUPerRequest() <= 0 {
			t.Errorf("machine CPU not recorded: baseline %v, same %v, idle %v", o.Baseline.Machine, same.Machine, same.Idle)
		}
		if idle := same.MedianIdle(); !(idle >= 0 && idle <= 1) {
			t.Errorf("median idle share %v, want within [0, 1]", idle)
		}
	}
	if o.Baseline.Total.Requests == 0 || same.Total.Errors != 0 || math.IsNaN(same.Median()) {
		t.Errorf("baseline %+v, same %+v", o.Baseline.Total, same.Total)
	}
	if teapot.Total.Errors == 0 || teapot.Total.Errors != teapot.Total.Unexpected[http.StatusTeapot] {
		t.Errorf("teapot errors %d, unexpected %v", teapot.Total.Errors, teapot.Total.Unexpected)
	}

	if _, err := Run(context.Background(), target("base", url), nil, Options{}, nil); err == nil {
		t.Error("Run without a Duration succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, target("base", url), nil, Options{Duration: time.Second}, nil); err == nil {
		t.Error("Run with a cancelled context succeeded")
	}
}

// machineCPU reads the machine's busy time, which a busy loop of this
// process makes grow.
func TestMachineCPU(t *testing.T) {
	busy0, idle0, ok := machineCPU()
	if runtime.GOOS != "linux" {
		if ok {
			t.Fatal("machine CPU measured without /proc/stat")
		}
		return
	}
	if !ok || busy0 <= 0 || idle0 < 0 {
		t.Fatalf("machineCPU = %v, %v, %v", busy0, idle0, ok)
	}
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
		if busy, idle, _ := machineCPU(); busy > busy0 && idle >= idle0 {
			return
		}
	}
	t.Fatalf("the machine's busy time did not grow in 10s of a busy loop (%d)", x)
}
