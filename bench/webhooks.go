package bench

// The webhooks scenario of `switchboard bench`: how many webhook deliveries
// per second the server makes to a local receiver, and how long an event
// takes from its state change to the receiver. See docs/benchmarks.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/sqlstore"
	"github.com/switchboard/switchboard/webhook/sign"
)

// Figures and targets of the webhooks scenario.
const (
	// benchHookFanout is how many webhooks of the throughput tenant are
	// subscribed to message.delivered: every delivered message is one
	// delivery to each (20 is the most an environment may have).
	benchHookFanout = 10
	// benchHookOutstanding caps the deliveries the throughput phase has
	// caused and the receiver has not seen yet: senders wait above it, so
	// events are generated as fast as the pipeline delivers them and the
	// backlog stays bounded.
	benchHookOutstanding = 20000
	benchHookTarget      = 5000.0 // deliveries per second
	benchHookRate        = 1000.0 // events per second in the latency phase
	benchHookP99Target   = 250 * time.Millisecond
	// benchHookVerifyEvery: the receiver checks the X-Service-Signature of
	// every this many deliveries.
	benchHookVerifyEvery = 100
	// benchHookDrainWait bounds the wait for the pipeline to finish after a
	// phase.
	benchHookDrainWait = 60 * time.Second
	benchHookSecret    = "bench-webhook-secret-0123456789"
)

func benchWebhooksRun(ctx context.Context, env *benchEnv, o benchOptions, stdout io.Writer) error {
	store, err := sqlstore.Open(ctx, env.database)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	env.closers = append(env.closers, func() { store.Close() })
	rcv := &benchHookReceiver{secret: []byte(benchHookSecret)}
	// One listener per webhook, as endpoints on different hosts would be:
	// each gets its own connection pool in the dispatcher's client.
	listen := func(phase int) (string, error) {
		url, stop, err := loadgen.Serve(rcv.handler(phase))
		if err != nil {
			return "", err
		}
		env.closers = append(env.closers, stop)
		return url, nil
	}
	tpTenant, err := env.createTenant(ctx, "bench webhooks throughput", "scale")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for range benchHookFanout {
		url, err := listen(benchHookThroughputPhase)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := benchCreateWebhook(ctx, env.serverURL, tpTenant.LiveKey, url); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	latTenant, err := env.createTenant(ctx, "bench webhooks latency", "scale")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	url, err := listen(benchHookLatencyPhase)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := benchCreateWebhook(ctx, env.serverURL, latTenant.LiveKey, url); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	// The phases start on an idle pipeline, and end once everything they
	// caused is delivered and recorded.
	warm := max(o.warmup, time.Second)
	header := fmt.Sprintf("scenario webhooks: database %s; receivers on 127.0.0.1 answer 200 at once and verify the X-Service-Signature of every %dth delivery",
		env.dbLabel, benchHookVerifyEvery)
	fmt.Fprintln(env.stderr, header)

	base, err := benchHookCounts(ctx, store)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	tp, err := benchHookThroughput(ctx, env, store, rcv, tpTenant, o, warm, base)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	fmt.Fprintf(env.stderr, "throughput phase: %.1f deliveries/s\n", tp.DeliveriesPerS)
	lat, err := benchHookLatency(ctx, env, store, rcv, latTenant, o, warm, tp.counts)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	fmt.Fprintf(env.stderr, "latency phase: p99 %.1f ms\n", lat.P99Ms)

	verified, bad := rcv.verified.Load(), rcv.badSignatures.Load()
	var failures []string
	failures = append(failures, tp.failures...)
	failures = append(failures, lat.failures...)
	if bad > 0 {
		failures = append(failures, fmt.Sprintf("%d deliveries had a wrong X-Service-Signature", bad))
	}
	if verified == 0 {
		failures = append(failures, "no signature was verified")
	}
	if n := rcv.malformed.Load(); n > 0 {
		failures = append(failures, fmt.Sprintf("%d deliveries had no readable timestamp", n))
	}
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	tpPass := tp.DeliveriesPerS >= benchHookTarget
	latPass := lat.Measured > 0 && lat.P99Ms < float64(benchHookP99Target)/float64(time.Millisecond)

	if o.json {
		tp.Scenario, tp.Phase = "webhooks", "throughput"
		lat.Scenario, lat.Phase = "webhooks", "latency"
		tp.TargetPerS, tp.Pass = benchHookTarget, tpPass
		lat.P99TargetMs, lat.Pass = float64(benchHookP99Target)/float64(time.Millisecond), latPass
		if failures == nil {
			failures = []string{}
		}
		sum := struct {
			Scenario string   `json:"scenario"`
			Summary  bool     `json:"summary"`
			Database string   `json:"database"`
			Verified int64    `json:"signatures_verified"`
			Bad      int64    `json:"signatures_bad"`
			ErrorsOK bool     `json:"errors_ok"`
			Failures []string `json:"failures"`
			Pass     bool     `json:"pass"`
		}{"webhooks", true, env.dbLabel, verified, bad, len(failures) == 0, failures, len(failures) == 0 && tpPass && latPass}
		var b bytes.Buffer
		for _, v := range []any{tp, lat, sum} {
			line, err := json.Marshal(v)
			if err != nil {
				return err
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		if _, err := stdout.Write(b.Bytes()); err != nil {
			return err
		}
	} else {
		var b strings.Builder
		fmt.Fprintln(&b, header)
		fmt.Fprintf(&b, "throughput: %d webhooks of a Scale tenant on message.delivered; sends on %d connections, at most %d deliveries outstanding; %v measured after %v warmup\n",
			benchHookFanout, o.connections, benchHookOutstanding, o.duration, warm)
		fmt.Fprintf(&b, "  sends        %d accepted in the window (%.1f/s), %d errors, p99 %.3f ms\n",
			tp.Sends.Requests-tp.Sends.Errors, tp.Sends.RPS, tp.Sends.Errors, benchMs(tp.Sends.P99))
		fmt.Fprintf(&b, "  deliveries   %d received in the window: %.1f/s\n", tp.Received, tp.DeliveriesPerS)
		fmt.Fprintf(&b, "  after drain  %d received in all, %d succeeded, %d attempts recorded, %d pending, %d failed (drained in %.1fs)\n",
			tp.ReceivedAll, tp.Succeeded, tp.Attempts, tp.Pending, tp.Failed, tp.DrainS)
		fmt.Fprintf(&b, "  deliveries/s target >= %.0f: %s\n", benchHookTarget, verdict(tpPass))
		fmt.Fprintf(&b, "latency: 1 webhook of another Scale tenant; open loop, %.0f sends/s (each: delivered -> one delivery) for %v after %v warmup\n",
			benchHookRate, o.duration, warm)
		fmt.Fprintf(&b, "  sends        %d in the window (%.1f/s), %d errors, p99 %.3f ms\n",
			lat.Sends.Requests-lat.Sends.Errors, lat.Sends.RPS, lat.Sends.Errors, benchMs(lat.Sends.P99))
		fmt.Fprintf(&b, "  event-to-receiver delay over %d deliveries: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
			lat.Measured, lat.P50Ms, lat.P90Ms, lat.P99Ms, lat.MaxMs)
		fmt.Fprintf(&b, "  after drain  %d received in all, %d succeeded, %d attempts recorded, %d pending, %d failed (drained in %.1fs)\n",
			lat.ReceivedAll, lat.Succeeded, lat.Attempts, lat.Pending, lat.Failed, lat.DrainS)
		fmt.Fprintf(&b, "  p99 target < %v: %s\n", benchHookP99Target, verdict(latPass))
		fmt.Fprintf(&b, "signatures: %d verified, %d wrong\n", verified, bad)
		if _, err := io.WriteString(stdout, b.String()); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("bench: %s", strings.Join(failures, "; "))
	}
	return nil
}

func benchMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Which phase a receiver belongs to.
const (
	benchHookThroughputPhase = iota
	benchHookLatencyPhase
)

// benchHookReceiver is the webhook endpoint: it answers 200 at once, counts
// deliveries per phase, checks a sample of the signatures, and in the
// latency phase records each delivery's delay from the event's timestamp
// (the state change) to its arrival.
type benchHookReceiver struct {
	secret []byte

	received      [2]atomic.Int64
	seen          atomic.Int64
	verified      atomic.Int64
	badSignatures atomic.Int64
	malformed     atomic.Int64

	mu         sync.Mutex
	from, to   time.Time // events of the latency phase that count
	delays     []time.Duration
	lastArrive time.Time
}

func (h *benchHookReceiver) handler(phase int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
		h.received[phase].Add(1)
		if h.seen.Add(1)%benchHookVerifyEvery == 1 {
			if sign.Verify(h.secret, body, r.Header.Get(sign.HeaderSignature)) {
				h.verified.Add(1)
			} else {
				h.badSignatures.Add(1)
			}
		}
		if phase != benchHookLatencyPhase {
			return
		}
		at, ok := benchPayloadTimestamp(body)
		if !ok {
			h.malformed.Add(1)
			return
		}
		h.mu.Lock()
		if !at.Before(h.from) && at.Before(h.to) {
			h.delays = append(h.delays, arrived.Sub(at))
		}
		h.lastArrive = arrived
		h.mu.Unlock()
	})
}

// benchPayloadTimestamp returns the "timestamp" of an event payload: when the
// event was written, in the same transaction as the state change.
func benchPayloadTimestamp(body []byte) (time.Time, bool) {
	const key = `"timestamp":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return time.Time{}, false
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return t, err == nil
}

func benchCreateWebhook(ctx context.Context, base, key, url string) error {
	body, _ := json.Marshal(map[string]any{"url": url, "events": []string{sb.EventDelivered}, "secret": benchHookSecret})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/webhooks", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("creating a webhook answered %d: %s (does the server run with --allow-private-webhooks?)", resp.StatusCode, bytes.TrimSpace(raw))
	}
	return nil
}

// benchHookStoreCounts are the store's counts of deliveries and attempts.
type benchHookStoreCounts struct {
	succeeded, failed, pending, attempts int64
}

func benchHookCounts(ctx context.Context, store *sqlstore.DB) (benchHookStoreCounts, error) {
	by, attempts, err := store.DeliveryCounts(ctx)
	if err != nil {
		return benchHookStoreCounts{}, err
	}
	return benchHookStoreCounts{succeeded: by[sb.DeliverySucceeded], failed: by[sb.DeliveryFailed], pending: by[sb.DeliveryPending], attempts: attempts}, nil
}

// benchHookPhase is what a phase measured; it is also the phase's JSON line.
type benchHookPhase struct {
	Scenario string `json:"scenario,omitempty"`
	Phase    string `json:"phase,omitempty"`
	// The sends that caused the events, as loadgen measured them.
	Sends     loadgen.Result  `json:"-"`
	SendsJSON json.RawMessage `json:"sends"`
	// Throughput: deliveries received in the measured window.
	Received       int64   `json:"received,omitempty"`
	DeliveriesPerS float64 `json:"deliveries_per_s,omitempty"`
	TargetPerS     float64 `json:"target_per_s,omitempty"`
	Fanout         int     `json:"fanout"`
	// Latency: event-to-receiver delays of the events of the window.
	Measured    int     `json:"measured,omitempty"`
	P50Ms       float64 `json:"p50_ms,omitempty"`
	P90Ms       float64 `json:"p90_ms,omitempty"`
	P99Ms       float64 `json:"p99_ms,omitempty"`
	MaxMs       float64 `json:"max_ms,omitempty"`
	P99TargetMs float64 `json:"p99_target_ms,omitempty"`
	// After the drain, what the phase caused in all.
	ReceivedAll int64   `json:"received_all"`
	Succeeded   int64   `json:"succeeded"`
	Attempts    int64   `json:"attempts_recorded"`
	Pending     int64   `json:"pending"`
	Failed      int64   `json:"failed"`
	DrainS      float64 `json:"drain_s"`
	Pass        bool    `json:"pass"`

	counts   benchHookStoreCounts
	failures []string
}

// benchHookThroughput sends as fast as the webhook pipeline delivers, with
// benchHookFanout webhooks subscribed, and counts the deliveries the
// receivers get during the measured window.
func benchHookThroughput(ctx context.Context, env *benchEnv, store *sqlstore.DB, rcv *benchHookReceiver, t benchTenant,
	o benchOptions, warm time.Duration, base benchHookStoreCounts) (benchHookPhase, error) {
	var issued atomic.Int64
	rcv0 := rcv.received[benchHookThroughputPhase].Load()
	phaseEnd := time.Now().Add(warm + o.duration)
	hdr := http.Header{"Authorization": {"Bearer " + t.LiveKey}, "Content-Type": {"application/json"}}
	bodies := benchSendBodies()
	target := loadgen.Target{
		Name: "sends (webhooks throughput)",
		Next: func(w int, seq uint64) loadgen.Request {
			// Wait while too many deliveries are outstanding.
			for issued.Load()*benchHookFanout-(rcv.received[benchHookThroughputPhase].Load()-rcv0) > benchHookOutstanding &&
				time.Now().Before(phaseEnd) && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			issued.Add(1)
			return loadgen.Request{Method: http.MethodPost, URL: env.serverURL + "/v1/messages", Header: hdr,
				Body: bodies[(uint64(w)+seq)%uint64(len(bodies))]}
		},
		Expect: func(status int) bool { return status == http.StatusAccepted },
	}
	var atStart, atEnd atomic.Int64
	t0 := time.AfterFunc(warm, func() { atStart.Store(rcv.received[benchHookThroughputPhase].Load()) })
	t1 := time.AfterFunc(warm+o.duration, func() { atEnd.Store(rcv.received[benchHookThroughputPhase].Load()) })
	res, err := loadgen.Run(ctx, target, loadgen.Options{Connections: o.connections, Duration: o.duration, Warmup: warm})
	if err != nil {
		t0.Stop()
		t1.Stop()
		return benchHookPhase{}, err
	}
	for time.Now().Before(phaseEnd) {
		time.Sleep(time.Until(phaseEnd)) // res may end a little early
	}
	time.Sleep(10 * time.Millisecond) // let t1 fire
	p := benchHookPhase{Sends: res, Fanout: benchHookFanout}
	p.Received = atEnd.Load() - atStart.Load()
	p.DeliveriesPerS = float64(p.Received) / o.duration.Seconds()
	if err := p.finish(ctx, store, rcv, benchHookThroughputPhase, rcv0, base); err != nil {
		return p, err
	}
	return p, nil
}

// benchHookLatency sends at a fixed rate, with one webhook subscribed, and
// records the event-to-receiver delay of the events written in the window.
func benchHookLatency(ctx context.Context, env *benchEnv, store *sqlstore.DB, rcv *benchHookReceiver, t benchTenant,
	o benchOptions, warm time.Duration, base benchHookStoreCounts) (benchHookPhase, error) {
	rcv0 := rcv.received[benchHookLatencyPhase].Load()
	start := time.Now()
	rcv.mu.Lock()
	rcv.from, rcv.to = start.Add(warm), start.Add(warm+o.duration)
	rcv.mu.Unlock()
	hdr := http.Header{"Authorization": {"Bearer " + t.LiveKey}, "Content-Type": {"application/json"}}
	bodies := benchSendBodies()
	target := loadgen.Target{
		Name: "sends (webhooks latency)",
		Next: func(w int, seq uint64) loadgen.Request {
			return loadgen.Request{Method: http.MethodPost, URL: env.serverURL + "/v1/messages", Header: hdr,
				Body: bodies[(uint64(w)+seq)%uint64(len(bodies))]}
		},
		Expect: func(status int) bool { return status == http.StatusAccepted },
	}
	res, err := loadgen.Run(ctx, target, loadgen.Options{Connections: o.connections, Duration: o.duration, Warmup: warm, Rate: benchHookRate})
	if err != nil {
		return benchHookPhase{}, err
	}
	p := benchHookPhase{Sends: res, Fanout: 1}
	if err := p.finish(ctx, store, rcv, benchHookLatencyPhase, rcv0, base); err != nil {
		return p, err
	}
	rcv.mu.Lock()
	delays := slices.Clone(rcv.delays)
	rcv.mu.Unlock()
	slices.Sort(delays)
	p.Measured = len(delays)
	q := func(f float64) float64 {
		if len(delays) == 0 {
			return 0
		}
		i := min(len(delays)-1, int(f*float64(len(delays))))
		return benchMs(delays[i])
	}
	p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs = q(0.50), q(0.90), q(0.99), q(1)
	return p, nil
}

// finish waits until everything the phase caused is delivered and recorded
// (no message queued or sent, no delivery pending), then takes the store's
// counts and checks them.
func (p *benchHookPhase) finish(ctx context.Context, store *sqlstore.DB, rcv *benchHookReceiver, phase int, rcv0 int64, base benchHookStoreCounts) error {
	p.SendsJSON = p.Sends.JSON()
	if float64(p.Sends.Errors) > benchMaxErrorRate*float64(max(p.Sends.Requests, 1)) {
		p.failures = append(p.failures, fmt.Sprintf("%s: %d of %d sends failed; unexpected statuses %v",
			p.Sends.Name, p.Sends.Errors, p.Sends.Requests, p.Sends.Unexpected))
	}
	drainStart := time.Now()
	for {
		depth, err := store.QueueDepth(ctx)
		if err != nil {
			return err
		}
		pending, err := store.PendingDeliveries(ctx)
		if err != nil {
			return err
		}
		if (depth == 0 && pending == 0) || time.Since(drainStart) > benchHookDrainWait || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.DrainS = time.Since(drainStart).Seconds()
	c, err := benchHookCounts(ctx, store)
	if err != nil {
		return err
	}
	p.counts = c
	p.ReceivedAll = rcv.received[phase].Load() - rcv0
	p.Succeeded = c.succeeded - base.succeeded
	p.Failed = c.failed - base.failed
	p.Pending = c.pending
	p.Attempts = c.attempts - base.attempts
	switch {
	case p.Pending > 0:
		p.failures = append(p.failures, fmt.Sprintf("%s: %d deliveries still pending %v after the load", p.Sends.Name, p.Pending, benchHookDrainWait))
	case p.Failed > 0:
		p.failures = append(p.failures, fmt.Sprintf("%s: %d deliveries failed", p.Sends.Name, p.Failed))
	case p.Attempts < p.Succeeded || p.ReceivedAll < p.Succeeded:
		p.failures = append(p.failures, fmt.Sprintf("%s: %d deliveries succeeded but %d attempts are recorded and %d were received",
			p.Sends.Name, p.Succeeded, p.Attempts, p.ReceivedAll))
	}
	return nil
}
