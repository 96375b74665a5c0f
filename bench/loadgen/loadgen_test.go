package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/testenv"
)

// serve starts h and stops it when the test ends.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	url, stop, err := Serve(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return url
}

func getTarget(name, url string) Target {
	return Target{Name: name, Next: func(int, uint64) Request { return Request{URL: url} }}
}

func TestBareHandler(t *testing.T) {
	url := serve(t, BareHandler())
	resp, err := http.Post(url+"/items", "application/json", strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var body struct {
		Data []struct{ ID, Name string } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body.Data) != 1 || body.Data[0].Name != "bare" || !strings.HasPrefix(body.Data[0].ID, "01J") {
		t.Errorf("body = %+v", body)
	}
}

func TestRunBare(t *testing.T) {
	testenv.Timing(t)
	url := serve(t, BareHandler())
	res, err := Run(context.Background(), getTarget("bare", url), Options{
		Connections: 8,
		Duration:    300 * time.Millisecond,
		Warmup:      50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res.JSON())
	if res.Requests == 0 || res.RPS <= 0 {
		t.Fatalf("Requests = %d, RPS = %v; want both > 0", res.Requests, res.RPS)
	}
	if res.Errors != 0 || len(res.Unexpected) != 0 {
		t.Fatalf("Errors = %d, Unexpected = %v; want none", res.Errors, res.Unexpected)
	}
	if res.Elapsed < 300*time.Millisecond {
		t.Errorf("Elapsed = %v, want at least the 300ms window", res.Elapsed)
	}
	if !(0 < res.P50 && res.P50 <= res.P90 && res.P90 <= res.P99 && res.P99 <= res.Max) {
		t.Errorf("quantiles not ordered: p50 %v p90 %v p99 %v max %v", res.P50, res.P90, res.P99, res.Max)
	}
}

func TestRunUnexpectedStatuses(t *testing.T) {
	var served, failed atomic.Uint64
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1)%3 == 0 {
			failed.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	const n = 300
	res, err := Run(context.Background(), getTarget("every3rd", url), Options{Connections: 4, MaxRequests: n})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != n {
		t.Fatalf("Requests = %d, want %d", res.Requests, n)
	}
	if got, want := res.Unexpected[500], failed.Load(); got != want || got < 90 {
		t.Fatalf("Unexpected[500] = %d, server sent %d (want about %d)", got, want, n/3)
	}
	if len(res.Unexpected) != 1 || res.Errors != res.Unexpected[500] {
		t.Fatalf("Errors = %d, Unexpected = %v; want only the 500s", res.Errors, res.Unexpected)
	}

	// A custom Expect that accepts 500 reports nothing unexpected, while
	// rejecting 201 shows up under that status.
	tg := getTarget("accept500", url)
	tg.Expect = func(status int) bool { return status == http.StatusInternalServerError }
	res, err = Run(context.Background(), tg, Options{Connections: 2, MaxRequests: 30})
	if err != nil {
		t.Fatal(err)
	}
	if res.Unexpected[500] != 0 || res.Unexpected[201] != 20 || res.Errors != 20 {
		t.Fatalf("Errors = %d, Unexpected = %v; want 20 × 201", res.Errors, res.Unexpected)
	}
}

func TestRunNextAndRequestShape(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var bad atomic.Value
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		if r.Method != http.MethodPost || string(body) != key || r.Host != "api.example" {
			bad.Store(r.Method + " " + r.Host + " " + key + " " + string(body))
		}
		mu.Lock()
		dup := seen[key]
		seen[key] = true
		mu.Unlock()
		if dup {
			bad.Store("duplicate key " + key)
		}
	}))
	const conns = 3
	tg := Target{Name: "post", Next: func(worker int, seq uint64) Request {
		if worker < 0 || worker >= conns {
			bad.Store("worker out of range")
		}
		key := string(rune('a'+worker)) + "-" + strings.Repeat("x", int(seq%5)) + "-" + time.Duration(seq).String()
		return Request{
			Method: http.MethodPost,
			URL:    url,
			Header: http.Header{"Idempotency-Key": {key}, "Host": {"api.example"}},
			Body:   []byte(key),
		}
	}}
	res, err := Run(context.Background(), tg, Options{Connections: conns, MaxRequests: 90})
	if err != nil {
		t.Fatal(err)
	}
	if v := bad.Load(); v != nil {
		t.Fatalf("bad request seen: %v", v)
	}
	if res.Requests != 90 || res.Errors != 0 || len(seen) != 90 {
		t.Fatalf("Requests = %d, Errors = %d, distinct keys = %d; want 90, 0, 90", res.Requests, res.Errors, len(seen))
	}
}

func TestRunOpenLoopRate(t *testing.T) {
	testenv.Timing(t)
	url := serve(t, BareHandler())
	const (
		rate  = 200.0
		conns = 8
		dur   = 500 * time.Millisecond
	)
	res, err := Run(context.Background(), getTarget("open", url), Options{Connections: conns, Duration: dur, Rate: rate})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res.JSON())
	if limit := uint64(rate*dur.Seconds()*1.5) + conns; res.Requests == 0 || res.Requests > limit {
		t.Fatalf("Requests = %d, want between 1 and %d", res.Requests, limit)
	}
	if res.Errors != 0 {
		t.Fatalf("Errors = %d", res.Errors)
	}
}

// TestRunOpenLoopCoordinatedOmission checks that when the server cannot keep
// up with the arrival rate, the queueing delay shows up in the latency.
// With one connection, a 1000/s schedule and a handler taking at least 10ms,
// the last request is scheduled within the first ~31ms but cannot complete
// before the 300ms window has ended, so its latency is at least ~269ms
// however slow the machine is.
func TestRunOpenLoopCoordinatedOmission(t *testing.T) {
	url := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		time.Sleep(10 * time.Millisecond)
	}))
	res, err := Run(context.Background(), getTarget("slow", url), Options{
		Connections: 1,
		Duration:    300 * time.Millisecond,
		Rate:        1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res.JSON())
	if res.Max < 200*time.Millisecond {
		t.Fatalf("Max = %v; queueing behind the schedule was not counted", res.Max)
	}
}

func TestRunCancel(t *testing.T) {
	release := make(chan struct{})
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, getTarget("hang", url), Options{Connections: 2, Duration: time.Minute})
	if err != context.DeadlineExceeded {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if res.Errors != 0 {
		t.Fatalf("Errors = %d; cancelled requests must not count as errors", res.Errors)
	}
}

func TestRunInvalid(t *testing.T) {
	cases := map[string]struct {
		t Target
		o Options
	}{
		"nil Next":    {Target{}, Options{Duration: time.Second}},
		"no limit":    {getTarget("x", "http://127.0.0.1:1"), Options{}},
		"bad rate":    {getTarget("x", "http://127.0.0.1:1"), Options{Duration: time.Second, Rate: -1}},
		"neg conns":   {getTarget("x", "http://127.0.0.1:1"), Options{Duration: time.Second, Connections: -1}},
		"bad request": {getTarget("x", "::not a url"), Options{Duration: time.Second}},
	}
	for name, c := range cases {
		if _, err := Run(context.Background(), c.t, c.o); err == nil {
			t.Errorf("%s: Run succeeded, want an error", name)
		}
	}
}

func TestRunTransportErrors(t *testing.T) {
	url, stop, err := Serve(BareHandler())
	if err != nil {
		t.Fatal(err)
	}
	stop() // nothing listens on url any more
	res, err := Run(context.Background(), getTarget("down", url), Options{Connections: 2, MaxRequests: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 10 || res.Errors != 10 || len(res.Unexpected) != 0 {
		t.Fatalf("Requests = %d, Errors = %d, Unexpected = %v; want 10 transport errors", res.Requests, res.Errors, res.Unexpected)
	}
}

func TestReportAndJSON(t *testing.T) {
	base := Result{Name: "bare", Requests: 1000, RPS: 2000, P50: time.Millisecond, P99: 4 * time.Millisecond, Unexpected: map[int]uint64{}}
	srv := Result{Name: "switchboard", Requests: 500, Errors: 2, RPS: 1000, P50: 2 * time.Millisecond, P99: 6 * time.Millisecond,
		Unexpected: map[int]uint64{503: 2}}
	var buf bytes.Buffer
	Report(&buf, base, srv)
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
	if !strings.Contains(lines[2], "0.500x") || !strings.Contains(lines[2], "1.500x") || !strings.Contains(lines[1], "1.000x") {
		t.Errorf("ratios missing:\n%s", buf.String())
	}

	line := srv.JSON()
	if bytes.ContainsRune(line, '\n') {
		t.Errorf("JSON contains a newline: %s", line)
	}
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	if got["name"] != "switchboard" || got["p99_ms"] != 6.0 || got["unexpected"].(map[string]any)["503"] != 2.0 {
		t.Errorf("JSON = %s", line)
	}
	if s := string(Result{Name: "empty"}.JSON()); !strings.Contains(s, `"unexpected":{}`) {
		t.Errorf("JSON of empty result = %s", s)
	}
}
