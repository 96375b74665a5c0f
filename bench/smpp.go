package bench

// The smpp scenario of `switchboard bench`: messages through one SMPP bind
// to an in-process SMSC, with a window of 10 and with one of 100. See
// docs/benchmarks.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard/switchboard/bench/rounds"
	"github.com/switchboard/switchboard/ops"
	"github.com/switchboard/switchboard/provider/smpp/smsc"
	"github.com/switchboard/switchboard/server"
)

// benchSMPPTarget is the target: submits accepted per second on one
// bind with a window of 100.
const benchSMPPTarget = 2000.0

// benchSMPPWindows are the links the scenario measures, in order.
var benchSMPPWindows = []int{10, 100}

// benchSMPP is what prepare leaves for run: the SMSC and its bookkeeping.
type benchSMPP struct {
	smsc      *smsc.Server
	providers string
	seq       atomic.Int64 // makes every slice's texts unique

	mu       sync.Mutex
	answered map[string]time.Time // text -> when its submit_sm_resp went
	accepted atomic.Int64
}

func benchSMPPPrepare(ctx context.Context, env *benchEnv, c *server.Config) error {
	b := &benchSMPP{answered: map[string]time.Time{}}
	b.smsc = &smsc.Server{OnAnswer: func(s *smsc.Submit, at time.Time) {
		b.accepted.Add(1)
		b.mu.Lock()
		b.answered[s.Text] = at
		b.mu.Unlock()
	}}
	if err := b.smsc.Start(); err != nil {
		return err
	}
	env.closers = append(env.closers, b.smsc.Close)
	var links []map[string]any
	for _, w := range benchSMPPWindows {
		links = append(links, map[string]any{"name": fmt.Sprintf("w%d", w), "type": "smpp", "addr": b.smsc.Addr(), "system_id": fmt.Sprintf("bench%d", w), "window": w})
	}
	raw, _ := json.Marshal(map[string]any{"links": links})
	b.providers = filepath.Join(filepath.Dir(env.plans), "providers.json")
	if err := os.WriteFile(b.providers, raw, 0o600); err != nil {
		return err
	}
	env.state = b
	c.ProvidersFile = b.providers
	return nil
}

// benchSMPPResult is one window's figures.
type benchSMPPResult struct {
	Scenario     string    `json:"scenario"`
	Window       int       `json:"window"`
	MedianPerS   float64   `json:"median_submits_per_s"`
	RoundRates   []float64 `json:"round_submits_per_s"`
	Seconds      float64   `json:"seconds"`
	Accepted202  int64     `json:"sends_accepted"`
	SendsPerS    float64   `json:"sends_per_s"`
	Submits      int64     `json:"submits_accepted"`
	SubmitsPerS  float64   `json:"submits_per_s"`
	Measured     int       `json:"latencies_measured"`
	P50Ms        float64   `json:"p50_ms"`
	P99Ms        float64   `json:"p99_ms"`
	MaxMs        float64   `json:"max_ms"`
	BeforeShare  float64   `json:"resp_before_202_share"`
	SendP99Ms    float64   `json:"send_p99_ms"`
	DrainS       float64   `json:"drain_s"`
	SettleS      float64   `json:"settle_s"`
	CPUPerMsg    float64   `json:"cpu_us_per_message"`
	Errors       int64     `json:"errors"`
	TargetPerS   float64   `json:"target_per_s,omitempty"`
	Pass         *bool     `json:"pass,omitempty"`
	ErrorsSample string    `json:"errors_sample,omitempty"`
}

func benchSMPPRun(ctx context.Context, env *benchEnv, o benchOptions, stdout io.Writer) error {
	b := env.state.(*benchSMPP)
	warm := max(o.warmup, time.Second)
	fmt.Fprintf(env.stderr, "scenario smpp: database %s; SMSC on %s; %d connections, closed loop, %v measured per window in %d rounds, %v warmup before each\n",
		env.dbLabel, b.smsc.Addr(), o.connections, o.duration, o.rounds, warm)
	type target struct {
		window      int
		key, number string
		samples     []benchSMPPSample
	}
	var targets []*target
	for _, w := range benchSMPPWindows {
		tn, err := env.createTenant(ctx, fmt.Sprintf("bench smpp w%d", w), "scale")
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		number := fmt.Sprintf("+1555800%04d", w)
		if err := env.addPhone(ctx, ops.PhoneSpec{Tenant: tn.TenantID, Number: number, Link: fmt.Sprintf("w%d", w),
			ProvidersFile: b.providers}); err != nil {
			return fmt.Errorf("bench: phone add: %w", err)
		}
		if err := benchWaitOnline(ctx, env.serverURL, tn.LiveKey, number); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		// The carrier phone is the tenant's only one: sends name no from.
		if err := benchDeletePhone(ctx, env.serverURL, tn.LiveKey, tn.Phone.ID); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		targets = append(targets, &target{window: w, key: tn.LiveKey, number: number})
	}
	// Alternating rounds, the order rotating, as the other scenarios do:
	// a window measured later runs on a larger database and a machine in
	// another mood, and that must not decide the comparison.
	slice := o.duration / time.Duration(o.rounds)
	for round := range o.rounds {
		for i := range targets {
			t := targets[(i+round)%len(targets)]
			s, err := b.phase(ctx, env, o, slice, warm, t.key, t.window)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			t.samples = append(t.samples, s)
			fmt.Fprintf(env.stderr, "round %d, window %d: %.0f submits/s\n", round+1, t.window, float64(s.submits)/s.seconds)
		}
	}
	var results []benchSMPPResult
	var failures []string
	for _, t := range targets {
		r := benchSMPPSummary(t.window, t.samples)
		if r.Errors > 0 {
			failures = append(failures, fmt.Sprintf("window %d: %d sends failed (%s)", t.window, r.Errors, r.ErrorsSample))
		}
		if t.window == 100 {
			pass := r.MedianPerS >= benchSMPPTarget
			r.TargetPerS, r.Pass = benchSMPPTarget, &pass
		}
		results = append(results, r)
	}
	if o.json {
		var buf bytes.Buffer
		for _, r := range results {
			line, _ := json.Marshal(r)
			buf.Write(line)
			buf.WriteByte('\n')
		}
		if failures == nil {
			failures = []string{}
		}
		pass := len(failures) == 0
		for _, r := range results {
			if r.Pass != nil && !*r.Pass {
				pass = false
			}
		}
		sum, _ := json.Marshal(map[string]any{"scenario": "smpp", "summary": true, "database": env.dbLabel, "failures": failures, "pass": pass})
		buf.Write(sum)
		buf.WriteByte('\n')
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return err
		}
	} else {
		var sb strings.Builder
		fmt.Fprintf(&sb, "scenario smpp: database %s; one bind per window to an in-process SMSC (answers at once, DELIVRD receipts); %d connections, closed loop; %v per window in %d alternating rounds, %v warmup before each\n",
			env.dbLabel, o.connections, o.duration, o.rounds, warm)
		fmt.Fprintf(&sb, "%-7s %10s %10s %12s %10s %9s %9s %9s %10s %9s %9s %10s %8s\n", "window", "sends/s", "submits/s", "submits", "p50 ms", "p99 ms", "max ms",
			"<202", "send p99", "drain s", "settle s", "cpu us/msg", "errors")
		for _, r := range results {
			fmt.Fprintf(&sb, "%-7d %10.1f %10.1f %12d %10.2f %9.2f %9.2f %8.1f%% %10.2f %9.2f %9.2f %10.1f %8d\n", r.Window, r.SendsPerS, r.SubmitsPerS, r.Submits,
				r.P50Ms, r.P99Ms, r.MaxMs, 100*r.BeforeShare, r.SendP99Ms, r.DrainS, r.SettleS, r.CPUPerMsg, r.Errors)
		}
		last := results[len(results)-1]
		for _, r := range results {
			if r.Window == 100 {
				last = r
			}
		}
		verdict := "FAIL"
		if last.Pass != nil && *last.Pass {
			verdict = "PASS"
		}
		for _, r := range results {
			fmt.Fprintf(&sb, "window %d: median %.0f submit_sm accepted/s over the rounds %v\n", r.Window, r.MedianPerS, r.RoundRates)
		}
		fmt.Fprintf(&sb, "window 100: median %.0f submit_sm accepted/s on one bind; target >= %.0f: %s\n", last.MedianPerS, benchSMPPTarget, verdict)
		fmt.Fprintf(&sb, "latency: from the client's 202 to the SMSC's submit_sm_resp (a resp written before the 202 reached the client counts 0; \"<202\" is their share)\n")
		if _, err := io.WriteString(stdout, sb.String()); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("bench: %s", strings.Join(failures, "; "))
	}
	return nil
}

// benchSMPPSample is what one measured slice of one window gave.
type benchSMPPSample struct {
	seconds         float64
	accepted        int64
	submits         int64
	cpu             time.Duration
	lat, took       []time.Duration
	before          int
	errors          int64
	errorSample     string
	drainS, settleS float64
}

// phase measures one slice of a window: closed-loop sends from the link's
// phone for slice after warm, then waits until the SMSC answered every send
// accepted in it and every receipt is recorded (the next slice starts on an
// idle pipeline).
func (b *benchSMPP) phase(ctx context.Context, env *benchEnv, o benchOptions, slice, warm time.Duration, key string, window int) (benchSMPPSample, error) {
	var r benchSMPPSample
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.connections, MaxConnsPerHost: o.connections}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	type sent struct {
		at   time.Time
		took time.Duration
	}
	var mu sync.Mutex
	accepted := map[string]sent{} // body -> when its 202 arrived
	var errs atomic.Int64
	var sample atomic.Value
	start := time.Now().Add(warm)
	end := start.Add(slice)
	var submitsAtStart, submitsAtEnd, cpuAtStart, cpuAtEnd atomic.Int64
	marks := make(chan struct{})
	go func() {
		defer close(marks)
		time.Sleep(time.Until(start))
		submitsAtStart.Store(b.accepted.Load())
		if c, ok := rounds.ProcessCPU(); ok {
			cpuAtStart.Store(int64(c))
		}
		time.Sleep(time.Until(end))
		submitsAtEnd.Store(b.accepted.Load())
		if c, ok := rounds.ProcessCPU(); ok {
			cpuAtEnd.Store(int64(c))
		}
	}()
	seq := b.seq.Add(1)
	var wg sync.WaitGroup
	for w := range o.connections {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && time.Now().Before(end); i++ {
				body := fmt.Sprintf("w%d-%d-%d-%d smpp bench", window, seq, w, i)
				payload, _ := json.Marshal(map[string]any{"to": "+15005550000", "body": body, "channel": "sms"})
				req, _ := http.NewRequestWithContext(ctx, "POST", env.serverURL+"/v1/messages", bytes.NewReader(payload))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					errs.Add(1)
					sample.Store(err.Error())
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				now := time.Now()
				if res.StatusCode != http.StatusAccepted {
					errs.Add(1)
					sample.Store(fmt.Sprintf("status %d", res.StatusCode))
					continue
				}
				if t0.After(start) && now.Before(end) {
					mu.Lock()
					accepted[body] = sent{at: now, took: now.Sub(t0)}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	<-marks
	// Drain: every accepted send answered by the SMSC.
	drainStart := time.Now()
	for {
		b.mu.Lock()
		missing := 0
		for body := range accepted {
			if _, ok := b.answered[body]; !ok {
				missing++
			}
		}
		b.mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Since(drainStart) > 120*time.Second {
			return r, fmt.Errorf("window %d: %d accepted sends never reached the SMSC", window, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.drainS = time.Since(drainStart).Seconds()
	for _, status := range []string{"queued", "sent"} {
		for {
			n, err := benchCountMessages(ctx, env.serverURL, key, status)
			if err != nil {
				return r, err
			}
			if n == 0 {
				break
			}
			if time.Since(drainStart) > 120*time.Second {
				return r, fmt.Errorf("window %d: messages still %s 120 s after the slice", window, status)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	r.settleS = time.Since(drainStart).Seconds()
	r.seconds = slice.Seconds()
	r.accepted = int64(len(accepted))
	r.submits = submitsAtEnd.Load() - submitsAtStart.Load()
	r.cpu = time.Duration(cpuAtEnd.Load() - cpuAtStart.Load())
	r.errors = errs.Load()
	if s, ok := sample.Load().(string); ok {
		r.errorSample = s
	}
	b.mu.Lock()
	for body, s := range accepted {
		d := b.answered[body].Sub(s.at)
		if d < 0 {
			r.before++
			d = 0
		}
		r.lat = append(r.lat, d)
		r.took = append(r.took, s.took)
	}
	b.mu.Unlock()
	return r, nil
}

// benchSMPPSummary makes a window's figures from its slices: totals over
// all of them, and the median of the slices' submits/s.
func benchSMPPSummary(window int, samples []benchSMPPSample) benchSMPPResult {
	r := benchSMPPResult{Scenario: "smpp", Window: window}
	var lat, took []time.Duration
	var cpu time.Duration
	before := 0
	for _, s := range samples {
		r.Seconds += s.seconds
		r.Accepted202 += s.accepted
		r.Submits += s.submits
		r.Errors += s.errors
		if s.errorSample != "" {
			r.ErrorsSample = s.errorSample
		}
		r.DrainS = max(r.DrainS, s.drainS)
		r.SettleS = max(r.SettleS, s.settleS)
		cpu += s.cpu
		lat = append(lat, s.lat...)
		took = append(took, s.took...)
		before += s.before
		r.RoundRates = append(r.RoundRates, math.Round(float64(s.submits)/s.seconds))
	}
	if r.Seconds > 0 {
		r.SendsPerS = float64(r.Accepted202) / r.Seconds
		r.SubmitsPerS = float64(r.Submits) / r.Seconds
	}
	rates := slices.Clone(r.RoundRates)
	slices.Sort(rates)
	if len(rates) > 0 {
		r.MedianPerS = rates[len(rates)/2]
	}
	if cpu > 0 && r.Submits > 0 {
		r.CPUPerMsg = float64(cpu) / float64(time.Microsecond) / float64(r.Submits)
	}
	slices.Sort(lat)
	slices.Sort(took)
	q := func(xs []time.Duration, p float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		return benchMs(xs[min(len(xs)-1, int(p*float64(len(xs))))])
	}
	r.Measured = len(lat)
	r.P50Ms, r.P99Ms, r.SendP99Ms = q(lat, 0.5), q(lat, 0.99), q(took, 0.99)
	if len(lat) > 0 {
		r.MaxMs = benchMs(lat[len(lat)-1])
		r.BeforeShare = float64(before) / float64(len(lat))
	}
	return r
}

// benchWaitOnline waits until the tenant's phone number is online (its
// link bound).
func benchWaitOnline(ctx context.Context, base, key, number string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/phones", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			var out struct {
				Data []struct{ Number, Status string }
			}
			json.NewDecoder(res.Body).Decode(&out)
			res.Body.Close()
			for _, p := range out.Data {
				if p.Number == number && p.Status == "online" {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the phone %s did not come online (its SMPP link did not bind)", number)
}

// benchCountMessages returns how many of the tenant's messages have
// status (0, or at least 1: one page is enough to know).
func benchCountMessages(ctx context.Context, base, key, status string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/messages?limit=1&status="+status, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var out struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("listing %s messages: %d %v", status, res.StatusCode, err)
	}
	return len(out.Data), nil
}

func benchDeletePhone(ctx context.Context, base, key, id string) error {
	req, _ := http.NewRequestWithContext(ctx, "DELETE", base+"/v1/phones/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("deleting the simulated phone answered %d", res.StatusCode)
	}
	return nil
}
