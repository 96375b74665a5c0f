package bench

// The fleet scenario of `switchboard bench`: N reference Android devices
// (provider/android/agent), each pinging its health every 10 seconds as
// the app does at that ping setting, connected to one node (a child
// process); first at rest, then under a steady send load spread over
// them. It reports what a phone costs the server: memory per phone, and
// CPU per 100 phones at rest and under the load. See docs/benchmarks.md.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/android-sms-gateway/client-go/smsgateway"

	"github.com/switchboard/switchboard/provider/android/agent"
)

// Figures and targets of the fleet scenario.
const (
	benchFleetPhones       = 200
	benchFleetPing         = 10 * time.Second
	benchFleetRate         = 20.0     // sends per second, under load
	benchFleetMemTarget    = 50 << 10 // bytes of server memory per phone
	benchFleetCPUTarget    = 1.0      // percent of a core per 100 phones at rest
	benchFleetRestMinimum  = 30 * time.Second
	benchFleetSettleWindow = 5 * time.Second
	benchFleetIdleWindow   = 15 * time.Second
)

// benchSleep waits d, or until ctx ends.
func benchSleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// benchFleetReport is the scenario's report, also its --json line.
type benchFleetReport struct {
	Scenario      string  `json:"scenario"`
	Database      string  `json:"database"`
	Phones        int     `json:"phones"`
	PingSeconds   float64 `json:"ping_interval_s"`
	RestSeconds   float64 `json:"rest_seconds"`
	LoadSeconds   float64 `json:"load_seconds"`
	Rate          float64 `json:"send_rate_per_s"`
	LiveBeforeMiB float64 `json:"server_live_before_mib"`
	LiveAfterMiB  float64 `json:"server_live_connected_mib"`
	// LiveRestedMiB is the live memory again at the end of the rest.
	LiveRestedMiB  float64 `json:"server_live_rested_mib"`
	RSSBeforeMiB   float64 `json:"server_rss_before_mib"`
	RSSAfterMiB    float64 `json:"server_rss_connected_mib"`
	KiBPerPhone    float64 `json:"server_kib_per_phone"`
	RSSKiBPerPhone float64 `json:"server_rss_kib_per_phone"`
	// StackKiBPerPhone is the goroutine stacks' part of KiBPerPhone.
	StackKiBPerPhone float64 `json:"server_stack_kib_per_phone"`
	// CPU is the server process's CPU time over the window, as a percent of
	// one core, per 100 phones.
	RestCPUPer100 float64 `json:"rest_cpu_percent_per_100_phones"`
	// IdleCPUPercent is the server's CPU before the phones connected, in
	// percent of one core (not per phone).
	IdleCPUPercent float64  `json:"idle_cpu_percent"`
	LoadCPUPer100  float64  `json:"load_cpu_percent_per_100_phones"`
	Pings          float64  `json:"pings_stored"`
	Sent           int      `json:"sent"`
	Errors         int      `json:"send_errors"`
	Delivered      int      `json:"sent_by_devices"`
	Verdicts       []string `json:"verdicts"`
	Pass           bool     `json:"pass"`
}

func benchFleetRun(ctx context.Context, env *benchEnv, o benchOptions, stdout io.Writer) error {
	n, rate := benchFleetPhones, benchFleetRate
	if v := env.getenv("SWITCHBOARD_BENCH_FLEET_PHONES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	if v := env.getenv("SWITCHBOARD_BENCH_FLEET_RATE"); v != "" {
		rate, _ = strconv.ParseFloat(v, 64)
	}
	ping := benchFleetPing
	if v := env.getenv("SWITCHBOARD_BENCH_FLEET_PING"); v != "" { // shorter in the tests
		ping, _ = time.ParseDuration(v)
	}
	if n < 1 || rate <= 0 || ping < time.Second {
		return errors.New("bench: fleet: SWITCHBOARD_BENCH_FLEET_PHONES and _RATE must be positive, _PING at least 1s")
	}
	rest := max(o.duration, benchFleetRestMinimum)
	if v := env.getenv("SWITCHBOARD_BENCH_FLEET_REST"); v != "" {
		rest, _ = time.ParseDuration(v)
	}
	b, cleanup, err := benchDeviceServer(ctx, env, "fleet", "--phone-ping-interval", ping.String())
	if err != nil {
		return fmt.Errorf("bench: fleet: %w", err)
	}
	defer cleanup()
	child := b.child
	tn, err := env.createTenantIn(ctx, b.db, "bench fleet", "scale")
	if err != nil {
		return err
	}
	b.key = tn.LiveKey
	if err := b.deleteSimulatedPhone(ctx); err != nil {
		return err
	}
	report := benchFleetReport{Scenario: "fleet", Database: env.dbLabel, Phones: n, PingSeconds: ping.Seconds(), Rate: rate,
		RestSeconds: rest.Seconds(), LoadSeconds: o.duration.Seconds()}
	codes, err := b.createPhones(ctx, n)
	if err != nil {
		return err
	}
	cpu := func() (float64, error) {
		m, err := child.metrics(ctx, "process_cpu_seconds_total")
		return m["process_cpu_seconds_total"], err
	}
	// The server without phones, for comparison: its own background work
	// (sweepers, the delivery and campaign runners) is part of what the
	// phones' figure at rest counts.
	idle := min(rest/4, benchFleetIdleWindow)
	c, err := cpu()
	if err != nil {
		return err
	}
	t := time.Now()
	if err := benchSleep(ctx, idle); err != nil {
		return err
	}
	cIdle, err := cpu()
	if err != nil {
		return err
	}
	report.IdleCPUPercent = (cIdle - c) / time.Since(t).Seconds() * 100

	var sentMu sync.Mutex
	sentBy := 0
	before, after, err := b.connectMeasured(ctx, codes, benchFleetSettleWindow, func(i int) agent.Options {
		return agent.Options{PingEvery: ping, Battery: 20 + i%80,
			OnMessage: func(smsgateway.MobileMessage) { sentMu.Lock(); sentBy++; sentMu.Unlock() }}
	})
	if err != nil {
		return fmt.Errorf("bench: fleet: %w", err)
	}
	report.LiveBeforeMiB, report.LiveAfterMiB = benchMiB(before.live), benchMiB(after.live)
	report.RSSBeforeMiB, report.RSSAfterMiB = benchMiB(before.rss), benchMiB(after.rss)
	report.KiBPerPhone, report.RSSKiBPerPhone = benchKiBEach(after.live-before.live, n), benchKiBEach(after.rss-before.rss, n)
	report.StackKiBPerPhone = benchKiBEach(after.stacks-before.stacks, n)

	// At rest: the devices hold their streams and ping.
	c0, err := cpu()
	if err != nil {
		return err
	}
	t0 := time.Now()
	// SWITCHBOARD_BENCH_FLEET_PROFILE=FILE saves a CPU profile of the
	// server at rest (go tool pprof FILE).
	if path := env.getenv("SWITCHBOARD_BENCH_FLEET_PROFILE"); path != "" {
		if err := child.profile(ctx, path, rest); err != nil {
			return fmt.Errorf("bench: fleet: profile: %w", err)
		}
	} else if err := benchSleep(ctx, rest); err != nil {
		return err
	}
	c1, err := cpu()
	if err != nil {
		return err
	}
	// Memory again after the rest, once the streams have beaten and the
	// phones pinged for a while: the figure is the larger of the two.
	rested, err := child.memory(ctx)
	if err != nil {
		return err
	}
	report.LiveRestedMiB = benchMiB(rested.live)
	if rested.live > after.live {
		report.KiBPerPhone = benchKiBEach(rested.live-before.live, n)
		report.StackKiBPerPhone = benchKiBEach(rested.stacks-before.stacks, n)
	}
	report.RestCPUPer100 = (c1 - c0) / time.Since(t0).Seconds() * 100 / (float64(n) / 100)

	// Under load: sends spread over the phones, through their devices.
	t1 := time.Now()
	load, err := b.load(ctx, b.key, rate, o.duration, false)
	if err != nil {
		return err
	}
	c2, err := cpu()
	if err != nil {
		return err
	}
	report.LoadCPUPer100 = (c2 - c1) / time.Since(t1).Seconds() * 100 / (float64(n) / 100)
	report.Sent, report.Errors = load.Sent, load.Errors
	wait := time.Now().Add(time.Minute)
	for {
		sentMu.Lock()
		got := sentBy
		sentMu.Unlock()
		if got >= report.Sent || time.Now().After(wait) {
			report.Delivered = got
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m, err := child.metrics(ctx, `switchboard_device_pings_total{result="stored"}`); err == nil {
		report.Pings = m[`switchboard_device_pings_total{result="stored"}`]
	}
	report.verdicts()
	if o.json {
		return json.NewEncoder(stdout).Encode(report)
	}
	fmt.Fprint(stdout, report.text())
	if !report.Pass {
		return errors.New("bench: fleet: a target was missed")
	}
	return nil
}

func (r *benchFleetReport) verdicts() {
	r.Pass = true
	check := func(ok bool, format string, args ...any) {
		v := "PASS"
		if !ok {
			v, r.Pass = "FAIL", false
		}
		r.Verdicts = append(r.Verdicts, fmt.Sprintf(format, args...)+": "+v)
	}
	check(r.KiBPerPhone < benchFleetMemTarget/1024, "server memory per phone %.1f KiB live (%.1f KiB resident); target < %d KiB",
		r.KiBPerPhone, r.RSSKiBPerPhone, benchFleetMemTarget>>10)
	check(r.RestCPUPer100 < benchFleetCPUTarget, "server CPU at rest %.2f%% of a core per 100 phones pinging every %.0fs; target < %.0f%%",
		r.RestCPUPer100, r.PingSeconds, benchFleetCPUTarget)
	check(r.Errors == 0 && r.Delivered >= r.Sent, "every accepted send went out from a device (%d of %d, %d send errors)", r.Delivered, r.Sent, r.Errors)
}

func (r *benchFleetReport) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario fleet: %d phones (reference devices) on one node, each pinging every %.0fs, database %s\n", r.Phones, r.PingSeconds, r.Database)
	fmt.Fprintf(&b, "server memory, live (heap in use + stacks, after a GC): %.1f MiB before the phones connected, %.1f MiB with them, %.1f MiB after the rest: %.1f KiB per phone (%.1f KiB of it stacks)\n",
		r.LiveBeforeMiB, r.LiveAfterMiB, r.LiveRestedMiB, r.KiBPerPhone, r.StackKiBPerPhone)
	fmt.Fprintf(&b, "server memory, resident: %.1f MiB before, %.1f MiB with them: %.1f KiB per phone\n", r.RSSBeforeMiB, r.RSSAfterMiB, r.RSSKiBPerPhone)
	fmt.Fprintf(&b, "server CPU at rest (%.0fs): %.2f%% of a core per 100 phones, the whole server's (the server without phones: %.2f%% of a core; net of it, the phones cost %.2f%% per 100)\n",
		r.RestSeconds, r.RestCPUPer100, r.IdleCPUPercent, r.RestCPUPer100-r.IdleCPUPercent/(float64(r.Phones)/100))
	fmt.Fprintf(&b, "server CPU sending %.0f/s (%.0fs): %.2f%% of a core per 100 phones; %d sent, %d went out from devices, %d errors\n",
		r.Rate, r.LoadSeconds, r.LoadCPUPer100, r.Sent, r.Delivered, r.Errors)
	fmt.Fprintf(&b, "pings stored: %.0f\n", r.Pings)
	for _, v := range r.Verdicts {
		fmt.Fprintln(&b, v)
	}
	return b.String()
}
