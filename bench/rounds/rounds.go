// Package rounds compares targets against a baseline in alternating short
// rounds, on top of package loadgen.
//
// On a shared, noisy machine the throughput available to a process drifts by
// tens of percent within seconds, so measuring all of the baseline and then
// all of the server under test yields ratios anywhere between 0.3 and 1.1 for
// identical handlers. Run therefore splits the measurement into rounds: in
// each round it measures the baseline and every other target for a short
// slice of time, back to back (in an order that rotates from round to
// round), and computes each target's ratio to the baseline of the same
// round. Drift that is slow compared with a round
// affects both sides of a ratio alike; the median of the per-round ratios is
// robust against the odd round that was disturbed on one side only.
//
// Run also records the CPU time the whole process used during each measured
// slice (on Unix) and reports requests per CPU-second as a second,
// CPU-normalized ratio. When the load generator and the servers share one
// process, as in `switchboard bench`, it compares the CPU cost per request
// of the two sides independently of how much CPU time the machine happened
// to grant the process, which on a busy machine is far steadier than
// throughput.
package rounds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/bench/loadgen"
)

// Options controls a Run.
type Options struct {
	// Rounds is the number of rounds; zero means 5.
	Rounds int
	// Duration is the total measured time per target, split evenly over the
	// rounds. It must be positive.
	Duration time.Duration
	// Warmup is applied before every measurement slice, so that each slice
	// starts with open keep-alive connections and a warm server. Negative
	// means none.
	Warmup time.Duration
	// Connections is the number of concurrent connections of every slice;
	// zero means loadgen.DefaultConnections.
	Connections int
	// Groups, when set, returns the CPU time that each group of processes
	// (the servers under test, a database) has used so far; it is sampled
	// with the machine's at both ends of every slice (see Series.Groups).
	Groups func() map[string]time.Duration
}

// Series is what Run measured for one target.
type Series struct {
	// Name is the target's name.
	Name string
	// Runs holds the result of every round, in order.
	Runs []loadgen.Result
	// Total aggregates Runs (see Aggregate).
	Total loadgen.Result
	// CPU holds, per round, the CPU time the whole process used during the
	// measured slice; it is empty where that cannot be measured.
	CPU []time.Duration
	// Machine holds, per round, the CPU time the whole machine spent busy
	// during the slice, and Idle the share of its processors' time they
	// were idle (Linux; empty elsewhere).
	Machine []time.Duration
	Idle    []float64
	// Groups holds, per group of Options.Groups and per round, the CPU
	// time that group used during the slice; a group missing from a
	// sample is left out of that round.
	Groups map[string][]time.Duration
	// Ratios holds, per round, the target's requests per second divided by
	// the baseline's in the same round, P99Ratios the same for p99 latency
	// and CPURatios the same for requests per CPU-second. Rounds in which
	// the baseline figure was zero are left out. All are nil for the
	// baseline itself.
	Ratios, P99Ratios, CPURatios []float64
}

// Outcome is the result of a Run.
type Outcome struct {
	Rounds      int
	Slice       time.Duration // measured time per target per round
	Warmup      time.Duration
	Connections int
	Baseline    Series
	Targets     []Series
}

// Run measures baseline and targets in o.Rounds alternating rounds: each
// round measures the baseline and each target for o.Duration/o.Rounds, one
// after the other, each with its own warmup. The first round runs the
// baseline and then the targets in order; every further round rotates that
// order by one, so that no target always follows the same one or always
// runs first. progress, if not
// nil, is called after every round with the round number (from 1) and the
// outcome so far.
//
// If ctx is cancelled, Run returns the rounds completed so far together with
// ctx's error.
func Run(ctx context.Context, baseline loadgen.Target, targets []loadgen.Target, o Options, progress func(round int, so Outcome)) (Outcome, error) {
	if o.Rounds == 0 {
		o.Rounds = 5
	}
	if o.Connections == 0 {
		o.Connections = loadgen.DefaultConnections
	}
	o.Warmup = max(o.Warmup, 0)
	switch {
	case o.Rounds < 0:
		return Outcome{}, fmt.Errorf("rounds: Rounds is negative (%d)", o.Rounds)
	case o.Duration <= 0:
		return Outcome{}, errors.New("rounds: Duration must be positive")
	case o.Duration/time.Duration(o.Rounds) < time.Millisecond:
		return Outcome{}, fmt.Errorf("rounds: %v split over %d rounds leaves less than 1ms per round", o.Duration, o.Rounds)
	}
	out := Outcome{
		Rounds:      o.Rounds,
		Slice:       o.Duration / time.Duration(o.Rounds),
		Warmup:      o.Warmup,
		Connections: o.Connections,
		Baseline:    Series{Name: baseline.Name},
		Targets:     make([]Series, len(targets)),
	}
	for i, t := range targets {
		out.Targets[i].Name = t.Name
	}
	lo := loadgen.Options{Connections: o.Connections, Duration: out.Slice, Warmup: o.Warmup}
	completed := 0
	for round := 1; round <= o.Rounds; round++ {
		// Slot 0 is the baseline, slot i+1 is targets[i]. The order rotates
		// from round to round so that no target always runs first or last.
		n := len(targets) + 1
		results := make([]loadgen.Result, n)
		cpus := make([]time.Duration, n)
		machines := make([]machineUse, n)
		groups := make([]map[string]time.Duration, n)
		for k := range n {
			slot := (k + round - 1) % n
			t := baseline
			if slot > 0 {
				t = targets[slot-1]
			}
			var err error
			results[slot], cpus[slot], machines[slot], groups[slot], err = measure(ctx, t, lo, o.Groups)
			if err != nil {
				return out.finish(completed), err
			}
		}
		base, baseCPU := results[0], cpus[0]
		runs, cpus := results[1:], cpus[1:]
		// A round counts only once all of its slices are measured, so every
		// series always holds the same rounds.
		out.Baseline.Runs = append(out.Baseline.Runs, base)
		if baseCPU > 0 {
			out.Baseline.CPU = append(out.Baseline.CPU, baseCPU)
		}
		machines[0].add(&out.Baseline)
		addGroups(&out.Baseline, groups[0])
		baseEff := perCPUSecond(base, baseCPU)
		for i, r := range runs {
			s := &out.Targets[i]
			s.Runs = append(s.Runs, r)
			if cpus[i] > 0 {
				s.CPU = append(s.CPU, cpus[i])
			}
			machines[i+1].add(s)
			addGroups(s, groups[i+1])
			if base.RPS > 0 {
				s.Ratios = append(s.Ratios, r.RPS/base.RPS)
			}
			if base.P99 > 0 {
				s.P99Ratios = append(s.P99Ratios, float64(r.P99)/float64(base.P99))
			}
			if eff := perCPUSecond(r, cpus[i]); baseEff > 0 && eff > 0 {
				s.CPURatios = append(s.CPURatios, eff/baseEff)
			}
		}
		completed = round
		if progress != nil {
			progress(round, out.finish(completed))
		}
	}
	return out.finish(completed), nil
}

// measure runs one slice and also returns the CPU time the process used from
// the end of the warmup until the slice has finished, or 0 if unknown, the
// machine's use over the same time, and that of each group of processes
// (nil without groups).
func measure(ctx context.Context, t loadgen.Target, o loadgen.Options, groups func() map[string]time.Duration) (loadgen.Result, time.Duration, machineUse, map[string]time.Duration, error) {
	var cpu0, busy0, idle0 time.Duration
	var ok0, mok0 bool
	var g0 map[string]time.Duration
	sampled := make(chan struct{})
	timer := time.AfterFunc(o.Warmup, func() {
		cpu0, ok0 = processCPU()
		busy0, idle0, mok0 = machineCPU()
		if groups != nil {
			g0 = groups()
		}
		close(sampled)
	})
	res, err := loadgen.Run(ctx, t, o)
	if timer.Stop() {
		return res, 0, machineUse{}, nil, err // ended before the warmup did
	}
	<-sampled
	cpu1, ok1 := processCPU()
	var m machineUse
	if busy1, idle1, mok1 := machineCPU(); mok0 && mok1 && busy1+idle1 > busy0+idle0 {
		m = machineUse{busy: busy1 - busy0, idle: idle1 - idle0, ok: true}
	}
	var used map[string]time.Duration
	if groups != nil {
		used = map[string]time.Duration{}
		for name, c1 := range groups() {
			if c0, ok := g0[name]; ok && c1 >= c0 {
				used[name] = c1 - c0
			}
		}
	}
	if !ok0 || !ok1 || cpu1 <= cpu0 {
		return res, 0, m, used, err
	}
	return res, cpu1 - cpu0, m, used, err
}

// addGroups records the groups' CPU time of one round in s.
func addGroups(s *Series, used map[string]time.Duration) {
	for name, d := range used {
		if s.Groups == nil {
			s.Groups = map[string][]time.Duration{}
		}
		s.Groups[name] = append(s.Groups[name], d)
	}
}

// machineUse is the machine's busy and idle time during a slice.
type machineUse struct {
	busy, idle time.Duration
	ok         bool
}

// add records u in s, if it was measured.
func (u machineUse) add(s *Series) {
	if !u.ok {
		return
	}
	s.Machine = append(s.Machine, u.busy)
	s.Idle = append(s.Idle, float64(u.idle)/float64(u.busy+u.idle))
}

// perCPUSecond returns r's requests per second of process CPU time, or 0.
func perCPUSecond(r loadgen.Result, cpu time.Duration) float64 {
	if cpu <= 0 {
		return 0
	}
	return float64(r.Requests) / cpu.Seconds()
}

// CPUPerRequest returns the process CPU time per measured request over all
// rounds, or 0 if it was not measured.
func (s Series) CPUPerRequest() time.Duration { return perRequest(s.CPU, s.Runs) }

// MachineCPUPerRequest returns the machine's busy CPU time per measured
// request over all rounds, or 0 if it was not measured.
func (s Series) MachineCPUPerRequest() time.Duration { return perRequest(s.Machine, s.Runs) }

// perRequest is the CPU time of the rounds over their requests, 0 unless
// every round's CPU time was measured.
func perRequest(cpu []time.Duration, runs []loadgen.Result) time.Duration {
	if len(cpu) != len(runs) || len(cpu) == 0 {
		return 0
	}
	var sum time.Duration
	var n uint64
	for i, r := range runs {
		sum += cpu[i]
		n += r.Requests
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

// GroupCPUPerRequest returns the CPU time per measured request that the
// group of processes name (Options.Groups) used over all rounds, or 0 unless
// it was measured in every round.
func (s Series) GroupCPUPerRequest(name string) time.Duration {
	return perRequest(s.Groups[name], s.Runs)
}

// MedianIdle returns the median over the rounds of the machine's idle
// share, or NaN if it was not measured.
func (s Series) MedianIdle() float64 { return Median(s.Idle) }

// finish returns a copy of o with the totals computed and Rounds set to the
// number of completed rounds.
func (o Outcome) finish(completed int) Outcome {
	o.Rounds = completed
	o.Baseline.Total = Aggregate(o.Baseline.Name, o.Baseline.Runs)
	o.Targets = slices.Clone(o.Targets)
	for i := range o.Targets {
		o.Targets[i].Total = Aggregate(o.Targets[i].Name, o.Targets[i].Runs)
	}
	return o
}

// Aggregate combines the results of several rounds of one target: counts and
// elapsed times are summed, RPS is the summed requests over the summed
// elapsed time, the latency quantiles are the medians of the per-round
// quantiles and Max is the largest per-round maximum.
func Aggregate(name string, runs []loadgen.Result) loadgen.Result {
	total := loadgen.Result{Name: name, Unexpected: map[int]uint64{}}
	var p50, p90, p99 []time.Duration
	for _, r := range runs {
		total.Requests += r.Requests
		total.Errors += r.Errors
		for status, n := range r.Unexpected {
			total.Unexpected[status] += n
		}
		total.Elapsed += r.Elapsed
		total.Max = max(total.Max, r.Max)
		p50 = append(p50, r.P50)
		p90 = append(p90, r.P90)
		p99 = append(p99, r.P99)
	}
	if total.Elapsed > 0 {
		total.RPS = float64(total.Requests) / total.Elapsed.Seconds()
	}
	total.P50 = medianDuration(p50)
	total.P90 = medianDuration(p90)
	total.P99 = medianDuration(p99)
	return total
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), or NaN if xs is empty. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1] + (s[n/2]-s[n/2-1])/2
}

// Median returns the median per-round req/s ratio, or NaN if there is none.
func (s Series) Median() float64 { return Median(s.Ratios) }

// Min returns the smallest per-round req/s ratio, or NaN if there is none.
func (s Series) Min() float64 {
	if len(s.Ratios) == 0 {
		return math.NaN()
	}
	return slices.Min(s.Ratios)
}

// Max returns the largest per-round req/s ratio, or NaN if there is none.
func (s Series) Max() float64 {
	if len(s.Ratios) == 0 {
		return math.NaN()
	}
	return slices.Max(s.Ratios)
}

// Table writes an aligned table in the style of loadgen.Report: one row for
// the baseline and one per target with the aggregated requests, errors,
// req/s, p50 and p99, and the MEDIAN per-round req/s and p99 ratios to the
// baseline (a req/s ratio below 1 and a p99 ratio above 1 mean slower than
// the baseline); then the process CPU time per request and the median
// per-round ratio of requests per CPU-second ("-" where CPU time was not
// measured). The baseline's ratios are 1 by definition.
func (o Outcome) Table(w io.Writer) {
	header := []string{"name", "requests", "errors", "req/s", "p50 ms", "p99 ms", "req/s ratio", "p99 ratio", "cpu us/req", "cpu ratio"}
	rows := [][]string{header}
	row := func(s Series, ratio, p99Ratio, cpuRatio string) {
		t := s.Total
		cpu := "-"
		if c := s.CPUPerRequest(); c > 0 {
			cpu = strconv.FormatFloat(float64(c)/float64(time.Microsecond), 'f', 1, 64)
		}
		rows = append(rows, []string{
			s.Name,
			strconv.FormatUint(t.Requests, 10),
			strconv.FormatUint(t.Errors, 10),
			strconv.FormatFloat(t.RPS, 'f', 1, 64),
			fmtMillis(t.P50),
			fmtMillis(t.P99),
			ratio,
			p99Ratio,
			cpu,
			cpuRatio,
		})
	}
	baseCPU := "-"
	if o.Baseline.CPUPerRequest() > 0 {
		baseCPU = "1.000x"
	}
	row(o.Baseline, "1.000x", "1.000x", baseCPU)
	for _, s := range o.Targets {
		row(s, fmtRatio(Median(s.Ratios)), fmtRatio(Median(s.P99Ratios)), fmtRatio(Median(s.CPURatios)))
	}
	widths := make([]int, len(header))
	for _, r := range rows {
		for i, cell := range r {
			widths[i] = max(widths[i], len(cell))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, cell := range r {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", widths[i], cell)
			} else {
				fmt.Fprintf(&b, "  %*s", widths[i], cell)
			}
		}
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

func fmtMillis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "-"
	}
	return strconv.FormatFloat(r, 'f', 3, 64) + "x"
}

// ProcessCPU returns the CPU time (user and system) this process has used,
// and false where it cannot be read.
func ProcessCPU() (time.Duration, bool) { return processCPU() }
