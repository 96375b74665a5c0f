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
	"net"
	"net/http"
	"os"
	"path/filepath"
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
)

// benchFleetReport is the scenario's report, also its --json line.
type benchFleetReport struct {
	Scenario       string  `json:"scenario"`
	Database       string  `json:"database"`
	Phones         int     `json:"phones"`
	PingSeconds    float64 `json:"ping_interval_s"`
	RestSeconds    float64 `json:"rest_seconds"`
	LoadSeconds    float64 `json:"load_seconds"`
	Rate           float64 `json:"send_rate_per_s"`
	LiveBeforeMiB  float64 `json:"server_live_before_mib"`
	LiveAfterMiB   float64 `json:"server_live_connected_mib"`
	RSSBeforeMiB   float64 `json:"server_rss_before_mib"`
	RSSAfterMiB    float64 `json:"server_rss_connected_mib"`
	KiBPerPhone    float64 `json:"server_kib_per_phone"`
	RSSKiBPerPhone float64 `json:"server_rss_kib_per_phone"`
	// CPU is the server process's CPU time over the window, as a percent of
	// one core, per 100 phones.
	RestCPUPer100 float64  `json:"rest_cpu_percent_per_100_phones"`
	LoadCPUPer100 float64  `json:"load_cpu_percent_per_100_phones"`
	Pings         float64  `json:"pings_stored"`
	Sent          int      `json:"sent"`
	Errors        int      `json:"send_errors"`
	Delivered     int      `json:"sent_by_devices"`
	Verdicts      []string `json:"verdicts"`
	Pass          bool     `json:"pass"`
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
	dir, err := os.MkdirTemp("", "switchboard-bench-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db := env.database
	if strings.HasPrefix(db, "sqlite:") {
		db = "sqlite:" + filepath.Join(dir, "fleet.db")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	debug := ln.Addr().String()
	ln.Close()
	child, err := benchStartChild(ctx, env.binary, []string{"--addr", "127.0.0.1:0", "--database", db, "--plans", env.plans,
		"--log-level", "info", "--phone-offline-after", "2m", "--phone-ping-interval", ping.String(), "--debug-addr", debug,
		"--max-conns-per-addr", "0",
	}, env.stderr, "server: ")
	if err != nil {
		return fmt.Errorf("bench: fleet: %w", err)
	}
	defer child.stop()
	child.debug = debug
	b := &benchDevicesState{url: child.url, client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	tn, err := env.createTenantIn(ctx, db, "bench fleet", "scale")
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
	liveBefore, rssBefore, err := child.memory(ctx)
	if err != nil {
		return err
	}
	var sentMu sync.Mutex
	sentBy := 0
	transport := &http.Transport{MaxIdleConnsPerHost: 2 * n, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}
	hc := &http.Client{Transport: transport}
	agents := make([]*agent.Agent, n)
	for i, code := range codes {
		a, err := agent.Pair(ctx, agent.Options{URL: b.url + "/api/mobile/v1", HTTP: hc, FinalOnly: true, PingEvery: ping,
			Battery: 20 + i%80, OnMessage: func(smsgateway.MobileMessage) { sentMu.Lock(); sentBy++; sentMu.Unlock() }}, code)
		if err != nil {
			return fmt.Errorf("bench: fleet: pair device %d: %w", i, err)
		}
		agents[i] = a
		go a.Run(ctx)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		connected := 0
		for _, a := range agents {
			if a.Connected() {
				connected++
			}
		}
		if connected == n {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: fleet: only %d of %d devices connected within 2 minutes", connected, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(benchFleetSettleWindow)
	liveAfter, rssAfter, err := child.memory(ctx)
	if err != nil {
		return err
	}
	report.LiveBeforeMiB, report.LiveAfterMiB = float64(liveBefore)/(1<<20), float64(liveAfter)/(1<<20)
	report.RSSBeforeMiB, report.RSSAfterMiB = float64(rssBefore)/(1<<20), float64(rssAfter)/(1<<20)
	report.KiBPerPhone = float64(liveAfter-liveBefore) / float64(n) / 1024
	report.RSSKiBPerPhone = float64(rssAfter-rssBefore) / float64(n) / 1024

	// At rest: the devices hold their streams and ping.
	cpu := func() (float64, error) {
		m, err := child.metrics(ctx, "process_cpu_seconds_total")
		return m["process_cpu_seconds_total"], err
	}
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
	} else {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rest):
		}
	}
	c1, err := cpu()
	if err != nil {
		return err
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
	fmt.Fprintf(&b, "server memory, live (heap in use + stacks, after a GC): %.1f MiB before the phones connected, %.1f MiB with them: %.1f KiB per phone\n",
		r.LiveBeforeMiB, r.LiveAfterMiB, r.KiBPerPhone)
	fmt.Fprintf(&b, "server memory, resident: %.1f MiB before, %.1f MiB with them: %.1f KiB per phone\n", r.RSSBeforeMiB, r.RSSAfterMiB, r.RSSKiBPerPhone)
	fmt.Fprintf(&b, "server CPU at rest (%.0fs): %.2f%% of a core per 100 phones\n", r.RestSeconds, r.RestCPUPer100)
	fmt.Fprintf(&b, "server CPU sending %.0f/s (%.0fs): %.2f%% of a core per 100 phones; %d sent, %d went out from devices, %d errors\n",
		r.Rate, r.LoadSeconds, r.LoadCPUPer100, r.Sent, r.Delivered, r.Errors)
	fmt.Fprintf(&b, "pings stored: %.0f\n", r.Pings)
	for _, v := range r.Verdicts {
		fmt.Fprintln(&b, v)
	}
	return b.String()
}
