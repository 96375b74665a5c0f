package bench

// The devices scenario of `switchboard bench`: many reference Android
// devices (provider/android/agent) connected at once to one node, under a
// steady send load spread over them. It reports the messages handed to
// devices per second, the p99 from a send's 202 to the device's
// MessageEnqueued and to the device holding the message, the server's
// memory per connected device, and the same load through the simulator
// for comparison. The server runs as a child process (this binary's
// `serve`), so that its memory is its own. See docs/benchmarks.md.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/android-sms-gateway/client-go/smsgateway"

	"github.com/switchboard/switchboard/provider/android/agent"
)

// Figures and targets of the devices scenario.
const (
	benchDevices          = 1000
	benchDevicesRate      = 1000.0 // sends per second
	benchDevicesP99Target = 250 * time.Millisecond
	benchDevicesMemTarget = 100 << 10 // bytes of server memory per connected device
	// benchDevicesSenders is how many sends may be in flight: enough that
	// the pacer, not the answers, sets the rate.
	benchDevicesSenders = 128
)

func benchDevicesRun(ctx context.Context, env *benchEnv, o benchOptions, stdout io.Writer) error {
	n, rate := benchDevices, benchDevicesRate
	if v := env.getenv("SWITCHBOARD_BENCH_DEVICES"); v != "" { // smaller runs, e.g. in the tests
		n, _ = strconv.Atoi(v)
	}
	if v := env.getenv("SWITCHBOARD_BENCH_DEVICES_RATE"); v != "" {
		rate, _ = strconv.ParseFloat(v, 64)
	}
	if n < 1 || rate <= 0 {
		return errors.New("bench: devices: SWITCHBOARD_BENCH_DEVICES and _RATE must be positive")
	}
	b, cleanup, err := benchDeviceServer(ctx, env, "devices")
	if err != nil {
		return fmt.Errorf("bench: devices: %w", err)
	}
	defer cleanup()
	child, db := b.child, b.db
	phones, err := env.createTenantIn(ctx, db, "bench devices", "scale")
	if err != nil {
		return err
	}
	sim, err := env.createTenantIn(ctx, db, "bench devices simulator", "scale")
	if err != nil {
		return err
	}
	b.key, b.simKey = phones.LiveKey, sim.LiveKey
	if err := b.deleteSimulatedPhone(ctx); err != nil {
		return err
	}
	report := benchDevicesReport{Scenario: "devices", Database: env.dbLabel, Devices: n, Rate: rate, Seconds: o.duration.Seconds(),
		LoadGenerator: "in-process Go senders (128 workers, paced) and reference devices (agent) on one shared transport"}

	// Phones, then the server's memory before and after their devices
	// connect.
	codes, err := b.createPhones(ctx, n)
	if err != nil {
		return err
	}
	b.events = make([][]time.Time, n)
	b.taken = map[string]time.Time{}
	before, after, err := b.connectMeasured(ctx, codes, 2*time.Second, func(i int) agent.Options {
		return agent.Options{
			OnEvent: func(name string, at time.Time) {
				if name == "MessageEnqueued" {
					b.mu.Lock()
					b.events[i] = append(b.events[i], at)
					b.mu.Unlock()
				}
			},
			OnTake: func(m smsgateway.MobileMessage, at time.Time) {
				b.mu.Lock()
				b.taken[m.ID] = at
				b.mu.Unlock()
			}}
	})
	if err != nil {
		return err
	}
	report.RSSBeforeMiB, report.RSSAfterMiB = benchMiB(before.rss), benchMiB(after.rss)
	report.LiveBeforeMiB, report.LiveAfterMiB = benchMiB(before.live), benchMiB(after.live)
	report.KiBPerDevice, report.RSSKiBPerDevice = benchKiBEach(after.live-before.live, n), benchKiBEach(after.rss-before.rss, n)

	// The steady load, through the devices and then through the simulator.
	// SWITCHBOARD_BENCH_DEVICES_PROFILE=FILE saves a CPU profile of the
	// server during the devices' load (go tool pprof FILE).
	profiled := make(chan error, 1)
	if path := env.getenv("SWITCHBOARD_BENCH_DEVICES_PROFILE"); path != "" {
		go func() { profiled <- child.profile(ctx, path, o.duration) }()
	} else {
		profiled <- nil
	}
	dev, err := b.load(ctx, b.key, rate, o.duration, true)
	if err != nil {
		return err
	}
	if err := <-profiled; err != nil {
		return fmt.Errorf("bench: devices: profile: %w", err)
	}
	simr, err := b.load(ctx, b.simKey, rate, o.duration, false)
	if err != nil {
		return err
	}
	report.ThroughDevices, report.ThroughSimulator = dev, simr
	report.verdicts()
	if o.json {
		return json.NewEncoder(stdout).Encode(report)
	}
	fmt.Fprint(stdout, report.text())
	if !report.Pass {
		return errors.New("bench: devices: a target was missed")
	}
	return nil
}

type benchDevicesState struct {
	child       *benchChild
	db          string // the server's database
	url         string
	key, simKey string
	client      *http.Client
	agents      []*agent.Agent
	byNumber    map[string]int // phone number -> agent
	numbers     []string

	mu     sync.Mutex
	events [][]time.Time            // per agent, MessageEnqueued arrivals
	taken  map[string]time.Time     // message id -> when its device took it
	sent   map[string]benchSentInfo // message id -> the send
}

type benchSentInfo struct {
	start, accepted time.Time
	device          int
}

// benchDeviceServer starts the server of a device scenario as a child
// process (its memory its own) with its pprof on a debug address, on a
// fresh SQLite file of its own (or env's PostgreSQL), the phone-offline
// window at 2 minutes and no cap of connections per address (every device
// connects from 127.0.0.1), with args added; cleanup stops it and removes
// its files.
func benchDeviceServer(ctx context.Context, env *benchEnv, name string, args ...string) (_ *benchDevicesState, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "switchboard-bench-"+name+"-")
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	db := env.database
	if strings.HasPrefix(db, "sqlite:") { // a file of its own: the in-process server has the other
		db = "sqlite:" + filepath.Join(dir, name+".db")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	debug := ln.Addr().String()
	ln.Close()
	child, err := benchStartChild(ctx, env.binary, append([]string{"--addr", "127.0.0.1:0", "--database", db, "--plans", env.plans,
		"--log-level", "info", "--phone-offline-after", "2m", "--debug-addr", debug, "--max-conns-per-addr", "0"}, args...),
		env.stderr, "server: ")
	if err != nil {
		return nil, nil, err
	}
	child.debug = debug
	b := &benchDevicesState{child: child, db: db, url: child.url, client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	return b, func() { child.stop(); os.RemoveAll(dir) }, nil
}

// call makes one API request and decodes data into out.
func (b *benchDevicesState) call(ctx context.Context, method, path, key string, body, out any, want int) error {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	if out != nil {
		var env struct{ Data json.RawMessage }
		if err := json.Unmarshal(raw, &env); err != nil {
			return err
		}
		return json.Unmarshal(env.Data, out)
	}
	return nil
}

// deleteSimulatedPhone leaves the devices' tenant with its android phones
// only.
func (b *benchDevicesState) deleteSimulatedPhone(ctx context.Context) error {
	var phones []struct{ ID string }
	if err := b.call(ctx, "GET", "/v1/phones", b.key, nil, &phones, http.StatusOK); err != nil {
		return err
	}
	for _, p := range phones {
		if err := b.call(ctx, "DELETE", "/v1/phones/"+p.ID, b.key, nil, nil, http.StatusOK); err != nil {
			return err
		}
	}
	return nil
}

// createPhones adds n android phones without a daily limit and returns
// their pairing codes.
func (b *benchDevicesState) createPhones(ctx context.Context, n int) ([]string, error) {
	codes := make([]string, n)
	b.numbers = make([]string, n)
	b.byNumber = make(map[string]int, n)
	for i := range n {
		var p struct {
			Number  string
			Pairing struct{ Code string }
		}
		number := fmt.Sprintf("+1555%07d", 1_000_000+i)
		if err := b.call(ctx, "POST", "/v1/phones", b.key, map[string]any{"number": number, "daily_limit": nil}, &p, http.StatusCreated); err != nil {
			return nil, err
		}
		codes[i], b.numbers[i], b.byNumber[number] = p.Pairing.Code, number, i
	}
	return codes, nil
}

// connect pairs a device with every code, its options those of opts(i)
// on one shared transport, runs them all, waits until the server holds
// every event stream, and lets the server settle (goroutines, buffers)
// for settle before its memory is read.
func (b *benchDevicesState) connect(ctx context.Context, codes []string, settle time.Duration, opts func(i int) agent.Options) error {
	transport := &http.Transport{MaxIdleConnsPerHost: 2 * len(codes), IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}
	hc := &http.Client{Transport: transport}
	b.agents = make([]*agent.Agent, len(codes))
	for i, code := range codes {
		o := opts(i)
		o.URL, o.HTTP, o.FinalOnly = b.url+"/api/mobile/v1", hc, true
		a, err := agent.Pair(ctx, o, code)
		if err != nil {
			return fmt.Errorf("pair device %d: %w", i, err)
		}
		b.agents[i] = a
		go a.Run(ctx)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		connected := 0
		for _, a := range b.agents {
			if a.Connected() {
				connected++
			}
		}
		if connected == len(b.agents) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d devices connected within 2 minutes", connected, len(b.agents))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(settle)
	return nil
}

// connectMeasured is connect between two readings of the server's memory.
func (b *benchDevicesState) connectMeasured(ctx context.Context, codes []string, settle time.Duration, opts func(i int) agent.Options) (before, after benchMemory, err error) {
	if before, err = b.child.memory(ctx); err != nil {
		return before, after, err
	}
	if err = b.connect(ctx, codes, settle, opts); err != nil {
		return before, after, err
	}
	after, err = b.child.memory(ctx)
	return before, after, err
}

func benchMiB(n int64) float64             { return float64(n) / (1 << 20) }
func benchKiBEach(n int64, of int) float64 { return float64(n) / float64(of) / 1024 }

// benchDevicesLoad are the figures of one steady load.
type benchDevicesLoad struct {
	Sent          int     `json:"sent"`
	Errors        int     `json:"errors"`
	SendP99Millis float64 `json:"send_p99_ms"`
	HandedPerS    float64 `json:"handed_per_s"`
	// WakeP99 is the p99 from a send's 202 to its device's next
	// MessageEnqueued (devices); HandP99 from the 202 to the device holding
	// the message (devices), or to the provider's hand-off, sent_at
	// (simulator).
	WakeP99Millis float64 `json:"wake_p99_ms,omitempty"`
	HandP99Millis float64 `json:"handoff_p99_ms"`
	Missing       int     `json:"missing"`
}

// load sends at rate for d with key, then waits for every message to be
// handed over, and measures.
func (b *benchDevicesState) load(ctx context.Context, key string, rate float64, d time.Duration, devices bool) (benchDevicesLoad, error) {
	var out benchDevicesLoad
	b.mu.Lock()
	b.sent = map[string]benchSentInfo{}
	b.mu.Unlock()
	tokens := make(chan struct{}, 1024)
	lctx, stop := context.WithTimeout(ctx, d)
	defer stop()
	go func() { // the pacer: one token every 1/rate, caught up in bursts
		defer close(tokens)
		interval := time.Duration(float64(time.Second) / rate)
		next := time.Now()
		for lctx.Err() == nil {
			for !time.Now().Before(next) {
				select {
				case tokens <- struct{}{}:
				case <-lctx.Done():
					return
				}
				next = next.Add(interval)
			}
			time.Sleep(time.Until(next))
		}
	}()
	var errs atomic.Int64
	var lat []time.Duration
	var latMu sync.Mutex
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range benchDevicesSenders {
		wg.Go(func() {
			for range tokens {
				n := seq.Add(1)
				start := time.Now()
				var sent struct {
					MessageID string `json:"message_id"`
					From      string `json:"from"`
				}
				to := fmt.Sprintf("+1212%07d", n%10_000_000)
				if err := b.call(ctx, "POST", "/v1/messages", key, map[string]any{"to": to, "body": "bench"}, &sent, http.StatusAccepted); err != nil {
					errs.Add(1)
					continue
				}
				accepted := time.Now()
				latMu.Lock()
				lat = append(lat, accepted.Sub(start))
				latMu.Unlock()
				b.mu.Lock()
				b.sent[sent.MessageID] = benchSentInfo{start: start, accepted: accepted, device: b.byNumber[sent.From]}
				b.mu.Unlock()
			}
		})
	}
	wg.Wait()
	out.Sent, out.Errors = len(lat), int(errs.Load())
	slices.Sort(lat)
	out.SendP99Millis = benchMs(benchQuantile(lat, 0.99))
	var hands, wakes []time.Duration
	var first, last time.Time
	if devices {
		deadline := time.Now().Add(time.Minute)
		for {
			b.mu.Lock()
			missing := 0
			for id := range b.sent {
				if _, ok := b.taken[id]; !ok {
					missing++
				}
			}
			b.mu.Unlock()
			if out.Missing = missing; missing == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.mu.Lock()
		for id, s := range b.sent {
			at, ok := b.taken[id]
			if !ok {
				continue
			}
			hands = append(hands, max(0, at.Sub(s.accepted)))
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
			// The device's first wake-up once the send was made.
			ev := b.events[s.device]
			if i, _ := slices.BinarySearchFunc(ev, s.start, func(e, t time.Time) int { return e.Compare(t) }); i < len(ev) {
				wakes = append(wakes, max(0, ev[i].Sub(s.accepted)))
			}
		}
		b.mu.Unlock()
	} else {
		ids := make([]string, 0, len(b.sent))
		for id := range b.sent {
			ids = append(ids, id)
		}
		for _, id := range ids {
			var m struct {
				Status    string    `json:"status"`
				CreatedAt time.Time `json:"created_at"`
				SentAt    time.Time `json:"sent_at"`
			}
			for tries := 0; ; tries++ {
				if err := b.call(ctx, "GET", "/v1/messages/"+id, key, nil, &m, http.StatusOK); err != nil {
					return out, err
				}
				if m.Status == "delivered" || m.Status == "failed" || tries == 600 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if m.SentAt.IsZero() {
				out.Missing++
				continue
			}
			hands = append(hands, m.SentAt.Sub(m.CreatedAt))
			if first.IsZero() || m.SentAt.Before(first) {
				first = m.SentAt
			}
			if m.SentAt.After(last) {
				last = m.SentAt
			}
		}
	}
	slices.Sort(hands)
	slices.Sort(wakes)
	out.HandP99Millis = benchMs(benchQuantile(hands, 0.99))
	out.WakeP99Millis = benchMs(benchQuantile(wakes, 0.99))
	if span := last.Sub(first).Seconds(); span > 0 {
		out.HandedPerS = float64(len(hands)-1) / span
	}
	return out, nil
}

func benchQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*q))]
}

// benchDevicesReport is the scenario's report, also its --json line.
type benchDevicesReport struct {
	Scenario      string  `json:"scenario"`
	Database      string  `json:"database"`
	LoadGenerator string  `json:"load_generator"`
	Devices       int     `json:"devices"`
	Rate          float64 `json:"send_rate_per_s"`
	Seconds       float64 `json:"seconds"`
	RSSBeforeMiB  float64 `json:"server_rss_before_mib"`
	RSSAfterMiB   float64 `json:"server_rss_connected_mib"`
	LiveBeforeMiB float64 `json:"server_live_before_mib"`
	LiveAfterMiB  float64 `json:"server_live_connected_mib"`
	// KiBPerDevice is from the server's live memory (heap in use and
	// goroutine stacks, after a garbage collection); RSSKiBPerDevice from
	// its resident memory, which the runtime returns to the system lazily.
	KiBPerDevice     float64          `json:"server_kib_per_device"`
	RSSKiBPerDevice  float64          `json:"server_rss_kib_per_device"`
	ThroughDevices   benchDevicesLoad `json:"through_devices"`
	ThroughSimulator benchDevicesLoad `json:"through_simulator"`
	Verdicts         []string         `json:"verdicts"`
	Pass             bool             `json:"pass"`
}

func (r *benchDevicesReport) verdicts() {
	r.Pass = true
	check := func(ok bool, format string, args ...any) {
		v := "PASS"
		if !ok {
			v, r.Pass = "FAIL", false
		}
		r.Verdicts = append(r.Verdicts, fmt.Sprintf(format, args...)+": "+v)
	}
	check(r.KiBPerDevice < benchDevicesMemTarget/1024 && r.RSSKiBPerDevice < benchDevicesMemTarget/1024,
		"server memory per connected device %.1f KiB live, %.1f KiB resident; target < %d KiB", r.KiBPerDevice, r.RSSKiBPerDevice, benchDevicesMemTarget>>10)
	check(r.ThroughDevices.WakeP99Millis < benchMs(benchDevicesP99Target), "p99 from 202 to MessageEnqueued %.1f ms at %.0f sends/s; target < %v",
		r.ThroughDevices.WakeP99Millis, r.Rate, benchDevicesP99Target)
	check(r.ThroughDevices.Missing == 0 && r.ThroughDevices.Errors == 0, "every accepted send reached its device (%d missing, %d send errors)",
		r.ThroughDevices.Missing, r.ThroughDevices.Errors)
}

func (r *benchDevicesReport) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario devices: %d devices on one node, %.0f sends/s for %.0fs, database %s\n", r.Devices, r.Rate, r.Seconds, r.Database)
	fmt.Fprintf(&b, "load generator: %s\n", r.LoadGenerator)
	fmt.Fprintf(&b, "server memory, live (heap in use + stacks, after a GC): %.1f MiB before the devices connected, %.1f MiB with them: %.1f KiB per device\n",
		r.LiveBeforeMiB, r.LiveAfterMiB, r.KiBPerDevice)
	fmt.Fprintf(&b, "server memory, resident: %.1f MiB before, %.1f MiB with them: %.1f KiB per device\n",
		r.RSSBeforeMiB, r.RSSAfterMiB, r.RSSKiBPerDevice)
	fmt.Fprintf(&b, "%-12s %8s %7s %10s %12s %14s %14s\n", "through", "sent", "errors", "send p99", "handed/s", "202->wake p99", "202->hand p99")
	for _, l := range []struct {
		name string
		v    benchDevicesLoad
	}{{"devices", r.ThroughDevices}, {"simulator", r.ThroughSimulator}} {
		wake := "-"
		if l.name == "devices" {
			wake = fmt.Sprintf("%.1f ms", l.v.WakeP99Millis)
		}
		fmt.Fprintf(&b, "%-12s %8d %7d %8.1f ms %12.0f %14s %11.1f ms\n", l.name, l.v.Sent, l.v.Errors, l.v.SendP99Millis, l.v.HandedPerS, wake, l.v.HandP99Millis)
	}
	fmt.Fprintf(&b, "(simulator: hand-off is the message's sent_at, from its created_at)\n")
	for _, v := range r.Verdicts {
		fmt.Fprintln(&b, v)
	}
	return b.String()
}

// benchChild is `switchboard serve` running as a child process.
type benchChild struct {
	cmd   *exec.Cmd
	pid   int
	url   string
	debug string // its pprof address
	done  chan struct{}
	// problems counts its log lines above INFO; the first benchLogShown
	// go to stderr.
	problems atomic.Int64
	prefix   string
	stderr   io.Writer
}

// profile saves a CPU profile of the child over d to path.
func (c *benchChild) profile(ctx context.Context, path string, d time.Duration) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", c.debug, max(1, int(d.Seconds()))), nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// benchMemory is a reading of a child's memory: live is its heap in use
// and goroutine stacks right after a garbage collection (which pprof's
// heap profile with gc=1 makes), stacks the stacks' part of it, rss its
// resident memory; in bytes.
type benchMemory struct {
	live, stacks, rss int64
}

// memory reads the child's memory.
func (c *benchChild) memory(ctx context.Context) (benchMemory, error) {
	var m benchMemory
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+c.debug+"/debug/pprof/heap?gc=1", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	v, err := c.metrics(ctx, "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes")
	if err != nil {
		return m, err
	}
	m.stacks = int64(v["go_memstats_stack_inuse_bytes"])
	m.live = int64(v["go_memstats_heap_inuse_bytes"]) + m.stacks
	m.rss, err = benchRSS(c.pid)
	return m, err
}

// metrics reads the values of the series names (without labels) from the
// child's /metrics; a name it does not show is an error.
func (c *benchChild) metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", c.url+"/metrics", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if ok && slices.Contains(names, name) {
			if m[name], err = strconv.ParseFloat(value, 64); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", c.url, name, err)
			}
		}
	}
	for _, name := range names {
		if _, ok := m[name]; !ok {
			return nil, fmt.Errorf("%s/metrics shows no %s", c.url, name)
		}
	}
	return m, nil
}

// benchStartChild starts `exe serve args...` (exe: this program when
// empty) and returns once it listens. args must keep the log level at info,
// for the "listening" line; the child's other lines above INFO go to stderr
// after prefix.
func benchStartChild(ctx context.Context, exe string, args []string, stderr io.Writer, prefix string) (*benchChild, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{"serve"}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &benchChild{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{}), prefix: prefix, stderr: stderr}
	addr := make(chan string, 1)
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, `"msg":"listening"`) {
				var l struct{ Addr string }
				json.Unmarshal([]byte(line), &l)
				select {
				case addr <- l.Addr:
				default:
				}
				continue
			}
			if !strings.Contains(line, `"level":"INFO"`) {
				if n := c.problems.Add(1); n <= benchLogShown {
					fmt.Fprintln(stderr, prefix+line)
				}
			}
		}
	}()
	select {
	case a := <-addr:
		c.url = "http://" + a
		return c, nil
	case <-c.done:
		cmd.Wait()
		return nil, errors.New("the server exited before it listened")
	case <-time.After(time.Minute):
		c.stop()
		return nil, errors.New("the server did not listen within a minute")
	}
}

func (c *benchChild) stop() {
	c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		c.cmd.Process.Kill()
	}
	c.cmd.Wait()
	if n := c.problems.Load(); n > benchLogShown {
		fmt.Fprintf(c.stderr, "%slogged %d warnings and errors in all\n", c.prefix, n)
	}
}

// benchRSS returns the resident memory of process pid, in bytes (Linux).
func benchRSS(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the server's memory: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}
