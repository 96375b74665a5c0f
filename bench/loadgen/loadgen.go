package loadgen

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultConnections is the number of connections Run uses when
// Options.Connections is zero.
const DefaultConnections = 64

// drainGrace is how long Run waits, after the measurement window has ended,
// for requests still in flight before cancelling them. Requests cancelled
// this way are counted as errors.
const drainGrace = 10 * time.Second

// Request describes one HTTP request to send.
type Request struct {
	// Method is the HTTP method; empty means GET.
	Method string
	// URL is the absolute request URL.
	URL string
	// Header holds the request headers. Run does not modify it, so one
	// Header may be shared by many requests. A "Host" entry overrides the
	// Host sent on the wire.
	Header http.Header
	// Body is the request body; nil or empty means no body.
	Body []byte
}

// Target describes what to load: a named stream of requests and the rule
// for which response statuses count as success.
type Target struct {
	// Name labels the Result.
	Name string
	// Next returns the request a worker sends next. worker is in
	// [0, Options.Connections) and seq counts that worker's requests from
	// zero, warmup included, so (worker, seq) is unique within one Run and
	// can be used to derive idempotency keys or vary bodies. Next is called
	// concurrently from all workers and must be safe for that.
	Next func(worker int, seq uint64) Request
	// Expect reports whether a response status is acceptable. Nil accepts
	// exactly the 2xx statuses.
	Expect func(status int) bool
}

// Options controls a Run.
type Options struct {
	// Connections is the number of concurrent workers, each using its own
	// keep-alive connection. Zero means DefaultConnections.
	Connections int
	// Duration is the length of the measurement window, which starts after
	// Warmup. Zero means no time limit, in which case MaxRequests must be
	// set.
	Duration time.Duration
	// Warmup is a period before the measurement window during which load is
	// applied but nothing is recorded.
	Warmup time.Duration
	// MaxRequests, if non-zero, caps the number of measured requests; the
	// run ends early once that many have been sent.
	MaxRequests uint64
	// Rate, if positive, switches to open-loop mode: requests are scheduled
	// at this fixed arrival rate in requests per second across all
	// connections, and when a request could not be sent on schedule because
	// every connection was still busy, its latency is measured from the
	// scheduled send time, so queueing behind a slow server counts as
	// latency (no coordinated omission). Requests sent on schedule are
	// timed from the actual send, so timer wake-up jitter in the load
	// generator does not count. Zero means closed loop: every worker
	// sends its next request as soon as the previous one has completed.
	Rate float64
}

// Result summarises one Run.
type Result struct {
	// Name is the Target's name.
	Name string
	// Requests is the number of measured requests that completed, whether
	// they succeeded or not.
	Requests uint64
	// Errors is the number of measured requests that failed: transport
	// errors (including failures reading the response body) plus responses
	// whose status Expect rejected.
	Errors uint64
	// Unexpected maps each status that Expect rejected to the number of such
	// responses. It is never nil.
	Unexpected map[int]uint64
	// Elapsed is the length of the measurement window actually used.
	Elapsed time.Duration
	// RPS is Requests divided by Elapsed, in requests per second.
	RPS float64
	// P50, P90 and P99 are latency quantiles and Max is the largest latency
	// observed, over all measured requests that received a complete
	// response (expected or not). Quantiles have about 0.4% relative
	// precision; Max is exact.
	P50, P90, P99, Max time.Duration
}

// worker holds the per-goroutine state of a Run. Only its own goroutine
// touches it until the run has finished.
type worker struct {
	id         int
	hist       *histogram
	requests   uint64
	errors     uint64
	unexpected map[int]uint64
	lastDone   time.Time
}

// run holds the state shared by all workers of a Run.
type run struct {
	target  Target
	opts    Options
	expect  func(int) bool
	client  *http.Client
	runCtx  context.Context // cancelled by the caller or on a fatal error
	reqCtx  context.Context // runCtx, also cancelled after the drain grace
	stopRun context.CancelFunc

	start, measureStart, end time.Time
	hasEnd                   bool
	interval                 float64 // open loop: nanoseconds between arrivals

	sched  atomic.Uint64 // open loop: next arrival slot
	budget atomic.Uint64 // measured requests started, for MaxRequests
	ended  atomic.Bool   // a worker stopped because the window ended

	fatalOnce sync.Once
	fatal     error
}

// Run drives t with the load described by o and returns the measurements.
//
// Exactly o.Connections worker goroutines are started. They share one
// http.Transport limited to o.Connections connections to each host, so each
// worker in effect keeps its own keep-alive connection. Redirects are not
// followed, compression is disabled, proxies are not used, and every
// response body is read completely and discarded. Once the measurement
// window has ended no new requests are started; requests still in flight
// are awaited (and counted) for up to 10 seconds before being cancelled and
// counted as errors.
//
// If ctx is cancelled, Run stops early and returns what it measured so far
// together with ctx's error. Run also returns an error if the options are
// invalid or Next produces a request that cannot be built.
func Run(ctx context.Context, t Target, o Options) (Result, error) {
	res := Result{Name: t.Name, Unexpected: map[int]uint64{}}
	if t.Next == nil {
		return res, errors.New("loadgen: Target.Next is nil")
	}
	if o.Connections == 0 {
		o.Connections = DefaultConnections
	}
	switch {
	case o.Connections < 0:
		return res, fmt.Errorf("loadgen: Connections is negative (%d)", o.Connections)
	case o.Duration < 0 || o.Warmup < 0:
		return res, errors.New("loadgen: Duration and Warmup must not be negative")
	case o.Duration == 0 && o.MaxRequests == 0:
		return res, errors.New("loadgen: one of Duration and MaxRequests must be set")
	case o.Rate < 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0):
		return res, fmt.Errorf("loadgen: invalid Rate %v", o.Rate)
	}

	expect := t.Expect
	if expect == nil {
		expect = func(status int) bool { return status >= 200 && status <= 299 }
	}
	tr := newTransport(o.Connections)
	defer tr.CloseIdleConnections()

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	reqCtx, cancelReqs := context.WithCancel(runCtx)
	defer cancelReqs()

	r := &run{
		target: t,
		opts:   o,
		expect: expect,
		client: &http.Client{
			Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		runCtx:  runCtx,
		reqCtx:  reqCtx,
		stopRun: stopRun,
		hasEnd:  o.Duration > 0,
	}
	if o.Rate > 0 {
		r.interval = float64(time.Second) / o.Rate
	}
	r.start = time.Now()
	r.measureStart = r.start.Add(o.Warmup)
	r.end = r.measureStart.Add(o.Duration)
	if r.hasEnd {
		drain := time.AfterFunc(time.Until(r.end)+drainGrace, cancelReqs)
		defer drain.Stop()
	}

	workers := make([]*worker, o.Connections)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{id: i, hist: newHistogram(), unexpected: map[int]uint64{}}
		workers[i] = w
		wg.Go(func() { r.work(w) })
	}
	wg.Wait()

	if r.fatal != nil {
		return res, r.fatal
	}

	hist := newHistogram()
	var finish time.Time
	for _, w := range workers {
		hist.merge(w.hist)
		res.Requests += w.requests
		res.Errors += w.errors
		for status, n := range w.unexpected {
			res.Unexpected[status] += n
		}
		if w.lastDone.After(finish) {
			finish = w.lastDone
		}
	}
	// A window that ran its full course counts in full even if the last
	// response arrived before its end, as happens in open loop.
	if r.ended.Load() && r.end.After(finish) {
		finish = r.end
	}
	if finish.After(r.measureStart) {
		res.Elapsed = finish.Sub(r.measureStart)
	}
	if res.Elapsed > 0 {
		res.RPS = float64(res.Requests) / res.Elapsed.Seconds()
	}
	res.P50 = hist.quantile(0.50)
	res.P90 = hist.quantile(0.90)
	res.P99 = hist.quantile(0.99)
	res.Max = hist.quantile(1)
	return res, ctx.Err()
}

// newTransport returns the transport shared by the workers of one Run.
func newTransport(conns int) *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		MaxIdleConns:        conns,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
		// A non-nil empty map disables HTTP/2, which would multiplex all
		// workers over a single connection.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
}

// failFatal records the first fatal error and stops all workers.
func (r *run) failFatal(err error) {
	r.fatalOnce.Do(func() {
		r.fatal = err
		r.stopRun()
	})
}

// work is the loop of one worker goroutine.
func (r *run) work(w *worker) {
	open := r.opts.Rate > 0
	var timer *time.Timer
	if open {
		timer = time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
	}
	for seq := uint64(0); ; seq++ {
		if r.runCtx.Err() != nil {
			return
		}
		// intended is when the request was due. In open loop, a worker that
		// had to wait for its slot was idle when the slot came due, so any
		// lateness in waking up is the client's, not the server's, and
		// latency starts when it wakes; a slot that was already overdue when
		// claimed was delayed by busy connections, and latency starts at the
		// scheduled time.
		var intended time.Time
		slept := false
		if open {
			slot := r.sched.Add(1) - 1
			intended = r.start.Add(time.Duration(float64(slot) * r.interval))
			if r.hasEnd && !intended.Before(r.end) {
				r.ended.Store(true)
				return
			}
			if d := time.Until(intended); d > 0 {
				slept = true
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-r.runCtx.Done():
					return
				}
			}
		}
		now := time.Now()
		if r.hasEnd && !now.Before(r.end) {
			r.ended.Store(true)
			return
		}
		measured := !now.Before(r.measureStart)
		if open {
			measured = !intended.Before(r.measureStart)
		}
		if measured && r.opts.MaxRequests > 0 && r.budget.Add(1) > r.opts.MaxRequests {
			return
		}

		req, err := newRequest(r.reqCtx, r.target.Next(w.id, seq))
		if err != nil {
			r.failFatal(fmt.Errorf("loadgen: worker %d request %d: %w", w.id, seq, err))
			return
		}
		began := intended
		if !open || slept {
			began = time.Now()
		}
		status, err := r.do(req)
		done := time.Now()
		if err != nil && r.runCtx.Err() != nil {
			return // cancelled by the caller: not the server's fault
		}
		if !measured {
			continue
		}
		w.requests++
		w.lastDone = done
		if err != nil {
			w.errors++
			continue
		}
		w.hist.record(done.Sub(began))
		if !r.expect(status) {
			w.errors++
			w.unexpected[status]++
		}
	}
}

// do sends req, reads and discards the whole response body and returns the
// response status.
func (r *run) do(req *http.Request) (int, error) {
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	return resp.StatusCode, err
}

// newRequest converts a Request into an *http.Request bound to ctx.
func newRequest(ctx context.Context, r Request) (*http.Request, error) {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if len(r.Body) > 0 {
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.URL, body)
	if err != nil {
		return nil, err
	}
	if r.Header != nil {
		req.Header = r.Header
		if host := r.Header.Get("Host"); host != "" {
			req.Host = host
		}
	}
	return req, nil
}
