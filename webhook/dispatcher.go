// Package webhook delivers events to tenants' endpoints: it claims due
// deliveries from the store, signs and POSTs them (through an SSRF-safe
// client that dials only vetted addresses), and records every attempt.
//
// Isolation: each endpoint has at most PerEndpoint requests in flight, and
// the claim skips endpoints that are full, so a slow or dead endpoint only
// ever holds its own slots; and since one tenant's backlog can occupy at most
// its own endpoints' slots, it cannot starve another tenant's deliveries.
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/webhook/sign"
	"github.com/switchboard/switchboard/webhook/ssrf"
)

// Store is what the dispatcher needs from storage.
type Store interface {
	// ClaimDeliveries claims up to limit due deliveries, leaving out the
	// webhooks in full and no more for any webhook than room(webhook id).
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int, full []string, room func(webhookID string) int) ([]*sb.Delivery, error)
	WebhooksByID(ctx context.Context, ids []string) (map[string]*sb.Webhook, error)
	RecordAttempts(ctx context.Context, rs []sb.AttemptResult) error
	// NextDelivery returns when the next delivery of a webhook not in full
	// falls due.
	NextDelivery(ctx context.Context, full []string) (time.Time, bool, error)
	WebhooksDue() <-chan struct{}
}

// Options tune a Dispatcher; zero values take the defaults.
type Options struct {
	// PerEndpoint is the most requests in flight to one webhook.
	PerEndpoint int
	// Timeout is how long an endpoint has to answer.
	Timeout time.Duration
	// Lease reserves a claimed delivery for this node; longer than Timeout.
	Lease time.Duration
	// Poll bounds the sleep between claims without a wake-up.
	Poll time.Duration
	// AllowPrivate lets deliveries go to loopback and private addresses.
	AllowPrivate bool
	// Resolver resolves webhook hosts; nil means the system resolver.
	Resolver ssrf.Resolver
	// Registry, when set, gets the dispatcher's metrics.
	Registry prometheus.Registerer
	// Log is the dispatcher's logger (default slog.Default()): every
	// failed attempt at info level.
	Log *slog.Logger
}

// DefaultPerEndpoint is the default of Options.PerEndpoint.
const DefaultPerEndpoint = 32

func (o *Options) defaults() {
	if o.PerEndpoint == 0 {
		o.PerEndpoint = DefaultPerEndpoint
	}
	if o.Timeout == 0 {
		o.Timeout = ssrf.DefaultTimeout
	}
	if o.Lease == 0 {
		o.Lease = o.Timeout + 20*time.Second
	}
	if o.Poll == 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Dispatcher delivers webhooks for one node.
type Dispatcher struct {
	store  Store
	opt    Options
	client *http.Client

	mu       sync.Mutex
	inflight map[string]int // webhook id -> requests in flight
	freed    chan struct{}
	results  chan sb.AttemptResult

	attempts *prometheus.CounterVec
	latency  prometheus.Histogram
}

// attemptResults are the values of the result label of
// switchboard_webhook_attempts_total.
var attemptResults = []string{"succeeded", "http_error", "redirect", "timeout", "connection_error", "refused"}

// resultLabel classifies an attempt for the metrics.
func resultLabel(r sb.AttemptResult) string {
	a := r.Attempt
	switch {
	case r.OK:
		return "succeeded"
	case a.StatusCode >= 300 && a.StatusCode < 400:
		return "redirect"
	case a.StatusCode != 0:
		return "http_error"
	case strings.HasPrefix(a.Error, "timeout"):
		return "timeout"
	case strings.HasPrefix(a.Error, "refused"):
		return "refused"
	}
	return "connection_error"
}

// New returns a Dispatcher.
func New(store Store, opt Options) *Dispatcher {
	opt.defaults()
	guard := &ssrf.Guard{AllowPrivate: opt.AllowPrivate, Resolver: opt.Resolver}
	d := &Dispatcher{
		store:    store,
		opt:      opt,
		client:   ssrf.NewClient(guard, opt.Timeout),
		inflight: map[string]int{},
		freed:    make(chan struct{}, 1),
		results:  make(chan sb.AttemptResult, 4096),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_webhook_attempts_total",
			Help: "Webhook delivery attempts made by this node, by result: succeeded (2xx), http_error (another status), " +
				"redirect (3xx, never followed), timeout, connection_error, refused (an address the SSRF checks refuse).",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_webhook_attempt_duration_seconds",
			Help:    "Duration of webhook delivery attempts made by this node, from the request to the endpoint's answer (or the failure).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	for _, r := range attemptResults {
		d.attempts.WithLabelValues(r)
	}
	if opt.Registry != nil {
		opt.Registry.MustRegister(d.attempts, d.latency)
	}
	return d
}

// Run delivers until ctx ends. Attempts in flight finish and are recorded
// before it returns.
func (d *Dispatcher) Run(ctx context.Context) {
	var attempts sync.WaitGroup
	recorded := make(chan struct{})
	go func() { d.record(); close(recorded) }()
	d.claimLoop(ctx, &attempts)
	attempts.Wait()
	close(d.results)
	<-recorded
}

// full returns the webhooks that have all their requests in flight.
func (d *Dispatcher) full() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for id, n := range d.inflight {
		if n >= d.opt.PerEndpoint {
			out = append(out, id)
		}
	}
	return out
}

// room returns how many more requests may be in flight to a webhook.
func (d *Dispatcher) room(webhookID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opt.PerEndpoint - d.inflight[webhookID]
}

func (d *Dispatcher) claimLoop(ctx context.Context, attempts *sync.WaitGroup) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for ctx.Err() == nil {
		ds, err := d.store.ClaimDeliveries(ctx, time.Now(), d.opt.Lease, 256, d.full(), d.room)
		if err != nil && ctx.Err() == nil {
			d.opt.Log.Error("claiming webhook deliveries", "err", err)
		}
		if len(ds) > 0 {
			d.start(ctx, ds, attempts)
		}
		wait := d.opt.Poll
		if len(ds) == 256 {
			wait = 0
		} else if next, ok, err := d.store.NextDelivery(ctx, d.full()); err == nil && ok {
			// Full webhooks are left out: their due deliveries wait for
			// a freed slot, which wakes this loop.
			if w := time.Until(next); w < wait {
				wait = max(w, time.Millisecond)
			}
		}
		if wait == 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-d.store.WebhooksDue():
		case <-d.freed:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (d *Dispatcher) start(ctx context.Context, ds []*sb.Delivery, attempts *sync.WaitGroup) {
	ids := make([]string, 0, len(ds))
	seen := map[string]bool{}
	for _, dl := range ds {
		if !seen[dl.WebhookID] {
			seen[dl.WebhookID] = true
			ids = append(ids, dl.WebhookID)
		}
	}
	hooks, err := d.store.WebhooksByID(ctx, ids)
	if err != nil {
		d.opt.Log.Error("loading webhooks", "err", err)
		return // the leases run out and the deliveries are claimed again
	}
	for _, dl := range ds {
		hook := hooks[dl.WebhookID]
		d.mu.Lock()
		d.inflight[dl.WebhookID]++
		d.mu.Unlock()
		attempts.Add(1)
		go func() {
			defer attempts.Done()
			var res sb.AttemptResult
			if hook == nil || hook.Deleted {
				res = sb.AttemptResult{DeliveryID: dl.ID, Attempt: sb.Attempt{At: time.Now().UTC(), Error: "webhook deleted"}}
			} else {
				res = d.attempt(context.WithoutCancel(ctx), hook, dl)
				d.observe(hook, dl, res)
			}
			d.results <- res
			d.mu.Lock()
			if d.inflight[dl.WebhookID]--; d.inflight[dl.WebhookID] <= 0 {
				delete(d.inflight, dl.WebhookID)
			}
			d.mu.Unlock()
			select {
			case d.freed <- struct{}{}:
			default:
			}
		}()
	}
}

// attempt POSTs one delivery and keeps the start of the answer for the log.
// Anything but a 2xx answer within the timeout is a failure: 3xx (redirects are not followed), 4xx, 5xx, a refused or
// reset connection, a refused address, a timeout.
func (d *Dispatcher) attempt(ctx context.Context, hook *sb.Webhook, dl *sb.Delivery) sb.AttemptResult {
	start := time.Now()
	res := sb.AttemptResult{DeliveryID: dl.ID, Attempt: sb.Attempt{At: start.UTC()}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(dl.Payload))
	if err != nil {
		res.Attempt.Error = "invalid url"
		return res
	}
	sign.HeadersRotating(req.Header, hook.SigningSecrets(start), dl.ID, dl.Event, start, dl.Payload)
	resp, err := d.client.Do(req)
	res.Attempt.Duration = time.Since(start)
	if err != nil {
		res.Attempt.Error = describe(err)
		return res
	}
	kept, _ := io.ReadAll(io.LimitReader(resp.Body, sb.MaxResponseKept))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	res.Attempt.Response = strings.ToValidUTF8(string(kept), "\uFFFD")
	res.Attempt.StatusCode = resp.StatusCode
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		res.OK = true
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		res.Attempt.Error = fmt.Sprintf("redirect (%d) not followed", resp.StatusCode)
	default:
		res.Attempt.Error = fmt.Sprintf("endpoint answered %d", resp.StatusCode)
	}
	return res
}

// observe counts an attempt and logs it when it failed: the webhook, the
// delivery, the attempt's number and why, and whether it will be retried;
// never the url's path or query (which may hold a token) nor the secret.
func (d *Dispatcher) observe(hook *sb.Webhook, dl *sb.Delivery, res sb.AttemptResult) {
	d.attempts.WithLabelValues(resultLabel(res)).Inc()
	d.latency.Observe(res.Attempt.Duration.Seconds())
	if res.OK {
		return
	}
	host := ""
	if u, err := url.Parse(hook.URL); err == nil {
		host = u.Hostname()
	}
	attrs := []any{"tenant_id", hook.TenantID, "environment", string(hook.Env), "webhook_id", hook.ID, "host", host,
		"delivery_id", dl.ID, "event", dl.Event, "attempt", dl.Attempts + 1, "status_code", res.Attempt.StatusCode,
		"error", res.Attempt.Error, "duration_ms", res.Attempt.Duration.Milliseconds()}
	if delay, ok := sb.RetryDelay(hook.RetryPolicy, dl.Tries+1); ok {
		attrs = append(attrs, "retry_in", delay.String())
	} else {
		attrs = append(attrs, "retry_in", "none: the delivery is failed")
	}
	d.opt.Log.Info("webhook attempt failed", attrs...)
}

// describe turns a client error into a short reason that names no internals.
func describe(err error) string {
	var se *ssrf.Error
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &se):
		return "refused: " + se.Reason
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout: no answer within the time limit"
	case errors.As(err, &oe) && oe.Op == "dial":
		return "connection failed"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without an answer"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "host could not be resolved"
	}
	return "request failed"
}

// record writes attempt results in batches until results is closed.
func (d *Dispatcher) record() {
	batch := make([]sb.AttemptResult, 0, 512)
	for r := range d.results {
		batch = append(batch[:0], r)
	fill:
		for len(batch) < cap(batch) {
			select {
			case r, ok := <-d.results:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		for {
			err := d.store.RecordAttempts(context.Background(), batch)
			if err == nil {
				break
			}
			d.opt.Log.Error("recording webhook attempts; retrying", "err", err)
			time.Sleep(100 * time.Millisecond)
		}
		// A retry may now be due sooner than the claimer's timer.
		select {
		case d.freed <- struct{}{}:
		default:
		}
	}
}
