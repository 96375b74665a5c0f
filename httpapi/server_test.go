package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// newTestServer returns a Server with no store: enough for the public
// routes and for routes a test adds to its mux.
func newTestServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// captureLog sends the default logger to a buffer until the test ends.
func captureLog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &buf
}

// TestInternalErrorsHideInternals: a handler that panics, or that returns an
// error that is not an *sb.Error, answers 500 INTERNAL_ERROR whose text names
// the request id and nothing else; the details go to the log only. No route
// of the service panics, so the test adds two to the mux.
func TestInternalErrorsHideInternals(t *testing.T) {
	logs := captureLog(t) // not parallel: it swaps the default logger
	s := newTestServer(t)
	const secret = "pq: relation \"api_keys\" does not exist at /srv/switchboard/sqlstore/keys.go:42"
	s.mux.Handle("GET /test/panic", s.public(func(w http.ResponseWriter, r *http.Request) error {
		panic(secret)
	}))
	s.mux.Handle("GET /test/error", s.public(func(w http.ResponseWriter, r *http.Request) error {
		return errors.New(secret)
	}))

	for _, path := range []string{"/test/panic", "/test/error"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		id := w.Header().Get("X-Request-Id")
		if w.Code != http.StatusInternalServerError || id == "" || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d, X-Request-Id %q, Content-Type %q: %s", path, w.Code, id, w.Header().Get("Content-Type"), w.Body)
		}
		var body map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: body %q: %v", path, w.Body, err)
		}
		msg, _ := body["error"].(string)
		if body["code"] != "INTERNAL_ERROR" || len(body) != 2 || !strings.Contains(msg, id) {
			t.Errorf("%s: body %s, want only error (naming request id %s) and code INTERNAL_ERROR", path, w.Body, id)
		}
		for _, leak := range []string{"pq:", "api_keys", "keys.go", "/srv", "panic", "goroutine"} {
			if strings.Contains(strings.ToLower(w.Body.String()), strings.ToLower(leak)) {
				t.Errorf("%s: the answer leaks %q: %s", path, leak, w.Body)
			}
		}
		// The log has what the client does not, under the same request id.
		var found bool
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, id) && strings.Contains(line, "api_keys") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: the log has no line with request id %s and the failure: %s", path, id, logs)
		}
	}

	// The server goes on serving, and counted the failures.
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("/healthz after a panic: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(w.Body.String(), `switchboard_http_requests_total{route="GET /test/panic",status="500"} 1`) {
		t.Errorf("/metrics does not count the panic as a 500:\n%s", w.Body)
	}
}

// TestPanicAfterWriteKeepsAnswer: a handler that panics after it answered
// does not get a second answer appended.
func TestPanicAfterWriteKeepsAnswer(t *testing.T) {
	captureLog(t)
	s := newTestServer(t)
	s.mux.Handle("GET /test/late-panic", s.public(func(w http.ResponseWriter, r *http.Request) error {
		writeData(w, http.StatusOK, map[string]string{"status": "ok"})
		panic("after the answer")
	}))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/test/late-panic", nil))
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"data":{"status":"ok"}}` {
		t.Errorf("late panic: %d %q", w.Code, w.Body)
	}
}

// TestErrorRetryAfter: an error that says how long to wait answers with
// Retry-After in whole seconds, rounded up; one that does not, without.
func TestErrorRetryAfter(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	for _, c := range []struct {
		wait time.Duration
		want string
	}{{500 * time.Millisecond, "1"}, {time.Minute, "60"}, {time.Minute + time.Millisecond, "61"}, {0, ""}} {
		w := httptest.NewRecorder()
		e := sb.Errorf(sb.CodeNoPhoneAvailable, "No phone.")
		e.RetryAfter = c.wait
		s.writeError(w, httptest.NewRequest("POST", "/v1/messages", nil), e)
		if got, ok := w.Header()["Retry-After"]; w.Code != http.StatusServiceUnavailable || (c.want == "") == ok || (ok && got[0] != c.want) {
			t.Errorf("wait %v: %d, Retry-After %v, want %q", c.wait, w.Code, got, c.want)
		}
	}
}
