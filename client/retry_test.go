package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/client"
)

// fakeClock records the waits asked of it and returns at once, moving its
// time forward by each.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	// onSleep, when set, runs before each wait returns.
	onSleep func()
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	f := c.onSleep
	c.mu.Unlock()
	if f != nil {
		f()
	}
	return ctx.Err()
}

func (c *fakeClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

func secs(s ...int) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, n := range s {
		out[i] = time.Duration(n) * time.Second
	}
	return out
}

// answer is what the scripted server answers to one request.
type answer struct {
	status int
	code   string
	header map[string]string
	// drop closes the connection without an answer.
	drop bool
}

// scripted is a server that answers the i-th request with answers[i] (the
// last one over and over) and records every request.
type scripted struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers []answer
	reqs    []scriptedReq
}

type scriptedReq struct {
	method, path, query string
	header              http.Header
	body                string
}

func newScripted(t testing.TB, answers ...answer) *scripted {
	s := &scripted{answers: answers}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		a := s.answers[min(len(s.reqs), len(s.answers)-1)]
		s.reqs = append(s.reqs, scriptedReq{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(body)})
		s.mu.Unlock()
		if a.drop {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_test_"+strconv.Itoa(len(s.reqs)))
		w.WriteHeader(a.status)
		if a.status < 300 {
			io.WriteString(w, `{"data":[]}`)
			return
		}
		io.WriteString(w, `{"error":"Scripted answer.","code":"`+a.code+`"}`)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) requests() []scriptedReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func ok() answer { return answer{status: 200} }

func fail(status int, code string, header ...string) answer {
	a := answer{status: status, code: code, header: map[string]string{}}
	for i := 0; i+1 < len(header); i += 2 {
		a.header[header[i]] = header[i+1]
	}
	return a
}

const scriptKey = "svc_test_0123456789abcdefghijklmnopqrstuv"

func scriptedClient(t testing.TB, s *scripted, opts ...client.Option) (*client.Client, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)}
	c, err := client.New(s.srv.URL, scriptKey, append([]client.Option{client.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, clock
}

// TestRetryRules checks each retry rule of docs/api.md, with the exact waits, on a
// server that answers 429, 500 and 503 on purpose.
func TestRetryRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		answers  []answer
		wantErr  client.Code // "" for success
		sleeps   []time.Duration
		requests int
	}{
		{"500 three retries 1 2 4 s", []answer{fail(500, "INTERNAL_ERROR")}, client.CodeInternal, secs(1, 2, 4), 4},
		{"500 then success", []answer{fail(500, "INTERNAL_ERROR"), ok()}, "", secs(1), 2},
		{"500 twice then success", []answer{fail(500, "INTERNAL_ERROR"), fail(500, "INTERNAL_ERROR"), ok()}, "", secs(1, 2), 3},
		{"503 retries 2 4 8 16 s within the 30 s budget", []answer{fail(503, "DETECTION_UNAVAILABLE")}, client.CodeDetectionUnavailable, secs(2, 4, 8, 16), 5},
		{"503 then success", []answer{fail(503, "DETECTION_UNAVAILABLE"), ok()}, "", secs(2), 2},
		{"503 and 500 count apart", []answer{fail(503, "CHANNEL_UNAVAILABLE"), fail(500, "INTERNAL_ERROR"), fail(503, "CHANNEL_UNAVAILABLE"), ok()}, "", secs(2, 1, 4), 4},
		{"503 waits at least Retry-After", []answer{fail(503, "NO_PHONE_AVAILABLE", "Retry-After", "5"), fail(503, "DATABASE_UNAVAILABLE", "Retry-After", "1"), ok()}, "", secs(5, 4), 3},
		{"NO_PHONE_AVAILABLE past the budget not waited", []answer{fail(503, "NO_PHONE_AVAILABLE", "Retry-After", "60"), ok()}, client.CodeNoPhoneAvailable, nil, 1},
		{"NO_PHONE_AVAILABLE until midnight not waited", []answer{fail(503, "NO_PHONE_AVAILABLE", "Retry-After", "41000"), ok()}, client.CodeNoPhoneAvailable, nil, 1},
		{"NO_PHONE_AVAILABLE without Retry-After not retried", []answer{fail(503, "NO_PHONE_AVAILABLE"), ok()}, client.CodeNoPhoneAvailable, nil, 1},
		{"the budget counts every wait", []answer{fail(429, "RATE_LIMIT_EXCEEDED", "Retry-After", "20"), fail(500, "INTERNAL_ERROR"), fail(429, "RATE_LIMIT_EXCEEDED", "Retry-After", "20"), ok()}, client.CodeRateLimitExceeded, secs(20, 1), 3},
		{"429 waits Retry-After", []answer{fail(429, "RATE_LIMIT_EXCEEDED", "Retry-After", "7"), ok()}, "", secs(7), 2},
		{"429 at most three retries", []answer{fail(429, "RATE_LIMIT_EXCEEDED", "Retry-After", "2")}, client.CodeRateLimitExceeded, secs(2, 2, 2), 4},
		{"429 Retry-After as a date", []answer{fail(429, "RATE_LIMIT_EXCEEDED", "Retry-After", "Sat, 31 Jan 2026 12:00:05 GMT"), ok()}, "", secs(5), 2},
		{"429 Retry-After over a minute not waited", []answer{fail(429, "QUOTA_EXCEEDED", "Retry-After", "2592000")}, client.CodeQuotaExceeded, nil, 1},
		{"429 without Retry-After not retried", []answer{fail(429, "NEW_CONTACT_LIMIT")}, client.CodeNewContactLimit, nil, 1},
		{"400 never", []answer{fail(400, "VALIDATION_ERROR"), ok()}, client.CodeValidation, nil, 1},
		{"401 never", []answer{fail(401, "INVALID_API_KEY"), ok()}, client.CodeInvalidAPIKey, nil, 1},
		{"403 never", []answer{fail(403, "KEY_INACTIVE"), ok()}, client.CodeKeyInactive, nil, 1},
		{"404 never", []answer{fail(404, "NOT_FOUND"), ok()}, client.CodeNotFound, nil, 1},
		{"405 never", []answer{fail(405, "METHOD_NOT_ALLOWED"), ok()}, client.CodeMethodNotAllowed, nil, 1},
		{"409 never", []answer{fail(409, "DUPLICATE_CONTACT"), ok()}, client.CodeDuplicateContact, nil, 1},
		{"413 never", []answer{fail(413, "PAYLOAD_TOO_LARGE"), ok()}, client.CodePayloadTooLarge, nil, 1},
		{"502 (not in 7.3) never", []answer{fail(502, "INTERNAL_ERROR"), ok()}, client.CodeInternal, nil, 1},
		{"504 (not in 7.3) never", []answer{fail(504, "INTERNAL_ERROR"), ok()}, client.CodeInternal, nil, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScripted(t, tc.answers...)
			c, clock := scriptedClient(t, s)
			_, err := collectErr(c.ListTemplates(context.Background(), nil))
			if tc.wantErr == "" && err != nil {
				t.Fatalf("want success, got %v", err)
			}
			if tc.wantErr != "" && !errors.Is(err, tc.wantErr) {
				t.Fatalf("want %s, got %v", tc.wantErr, err)
			}
			if got := clock.slept(); !slices.Equal(got, tc.sleeps) {
				t.Fatalf("waits %v, want %v", got, tc.sleeps)
			}
			if got := len(s.requests()); got != tc.requests {
				t.Fatalf("%d requests, want %d", got, tc.requests)
			}
		})
	}
}

// TestRetryErrorsCarryTheAnswer: after the retries, the error is the last
// answer's, with its status, code, request id and Retry-After.
func TestRetryErrorsCarryTheAnswer(t *testing.T) {
	t.Parallel()
	s := newScripted(t, fail(429, "QUOTA_EXCEEDED", "Retry-After", "86400"))
	c, _ := scriptedClient(t, s)
	_, err := c.GetMessage(context.Background(), "01JD5Z8Q4K7V3N2M1X0W9Y8T7R")
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Code != client.CodeQuotaExceeded || e.RetryAfter != 24*time.Hour ||
		e.RequestID != "req_test_1" || e.Message != "Scripted answer." {
		t.Fatalf("error: %#v", err)
	}
	if want := "switchboard: 429 QUOTA_EXCEEDED: Scripted answer. [request req_test_1]"; err.Error() != want {
		t.Fatalf("error text %q, want %q", err.Error(), want)
	}
	if strings.Contains(err.Error(), scriptKey) {
		t.Fatal("the error text holds the API key")
	}
	if !errors.Is(err, &client.Error{Code: client.CodeQuotaExceeded}) || errors.Is(err, client.CodeRateLimitExceeded) || client.ErrorCode(err) != client.CodeQuotaExceeded {
		t.Fatal("errors.Is against codes")
	}
}

// TestSendRetriesKeepTheKeyAndBody: every attempt of a send carries the same
// Idempotency-Key and the same bytes; a key is generated when the caller
// gives none, and a caller's key is used as it is.
func TestSendRetriesKeepTheKeyAndBody(t *testing.T) {
	t.Parallel()
	for _, given := range []string{"", "order-1234-shipped"} {
		s := newScripted(t, fail(500, "INTERNAL_ERROR"), fail(503, "DETECTION_UNAVAILABLE"), fail(500, "INTERNAL_ERROR"),
			answer{status: 202, header: map[string]string{}})
		// A 2xx of the scripted server has data [], which a send cannot
		// decode: what matters here is what was sent.
		c, clock := scriptedClient(t, s)
		c.SendMessage(context.Background(), client.SendParams{To: "+15005550000", Body: "hi", IdempotencyKey: given})
		reqs := s.requests()
		if len(reqs) != 4 || !slices.Equal(clock.slept(), secs(1, 2, 2)) {
			t.Fatalf("key %q: %d requests, waits %v", given, len(reqs), clock.slept())
		}
		key := reqs[0].header.Get("Idempotency-Key")
		if given != "" && key != given || given == "" && len(key) != 26 {
			t.Fatalf("Idempotency-Key %q (given %q)", key, given)
		}
		for _, r := range reqs {
			if r.method != "POST" || r.path != "/v1/messages" || r.header.Get("Idempotency-Key") != key || r.body != reqs[0].body ||
				r.header.Get("Authorization") != "Bearer "+scriptKey || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("attempt %+v differs from the first %+v", r, reqs[0])
			}
		}
		if reqs[0].body != `{"to":"+15005550000","body":"hi"}` {
			t.Fatalf("body %s", reqs[0].body)
		}
	}
	// Two sends never share a generated key.
	s := newScripted(t, fail(400, "VALIDATION_ERROR"))
	c, _ := scriptedClient(t, s)
	c.SendMessage(context.Background(), client.SendParams{To: "+15005550000", Body: "hi"})
	c.SendMessage(context.Background(), client.SendParams{To: "+15005550000", Body: "hi"})
	if r := s.requests(); r[0].header.Get("Idempotency-Key") == r[1].header.Get("Idempotency-Key") {
		t.Fatal("two sends got the same generated key")
	}
}

// TestNoAnswerRetries: a request that got no answer is retried when
// repeating it is safe (GET, sends with their key), and not otherwise.
func TestNoAnswerRetries(t *testing.T) {
	t.Parallel()
	drop := answer{drop: true}
	t.Run("GET", func(t *testing.T) {
		t.Parallel()
		s := newScripted(t, drop, drop, ok())
		c, clock := scriptedClient(t, s)
		if _, err := collectErr(c.ListTemplates(context.Background(), nil)); err != nil {
			t.Fatal(err)
		}
		if len(s.requests()) != 3 || !slices.Equal(clock.slept(), secs(1, 2)) {
			t.Fatalf("%d requests, waits %v", len(s.requests()), clock.slept())
		}
	})
	t.Run("GET gives up", func(t *testing.T) {
		t.Parallel()
		s := newScripted(t, drop)
		c, clock := scriptedClient(t, s)
		_, err := collectErr(c.ListTemplates(context.Background(), nil))
		if err == nil || client.ErrorCode(err) != "" || len(s.requests()) != 4 || !slices.Equal(clock.slept(), secs(1, 2, 4)) {
			t.Fatalf("err %v, %d requests, waits %v", err, len(s.requests()), clock.slept())
		}
	})
	t.Run("send", func(t *testing.T) {
		t.Parallel()
		s := newScripted(t, drop, fail(400, "VALIDATION_ERROR"))
		c, clock := scriptedClient(t, s)
		_, err := c.SendMessage(context.Background(), client.SendParams{To: "+15005550000", Body: "hi"})
		if !errors.Is(err, client.CodeValidation) || len(s.requests()) != 2 || !slices.Equal(clock.slept(), secs(1)) {
			t.Fatalf("err %v, %d requests, waits %v", err, len(s.requests()), clock.slept())
		}
	})
	t.Run("create is not repeated", func(t *testing.T) {
		t.Parallel()
		s := newScripted(t, drop, ok())
		c, clock := scriptedClient(t, s)
		_, err := c.CreateContact(context.Background(), client.CreateContactParams{Phone: "+15005550000"})
		if err == nil || len(s.requests()) != 1 || len(clock.slept()) != 0 {
			t.Fatalf("err %v, %d requests, waits %v", err, len(s.requests()), clock.slept())
		}
	})
}

// TestRetryRespectsTheContext: a wait that would outlast the deadline is
// not started, and a context that ends during a wait ends the call.
func TestRetryRespectsTheContext(t *testing.T) {
	t.Parallel()
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		s := newScripted(t, fail(503, "DETECTION_UNAVAILABLE"))
		c, clock := scriptedClient(t, s)
		clock.now = time.Now() // the deadline is on the real clock
		ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(5*time.Second))
		defer cancel()
		_, err := collectErr(c.ListTemplates(ctx, nil))
		// 2 s fits, 2 + 4 s does not: two requests, and the 503 itself.
		if !errors.Is(err, client.CodeDetectionUnavailable) || !slices.Equal(clock.slept(), secs(2)) || len(s.requests()) != 2 {
			t.Fatalf("err %v, waits %v, %d requests", err, clock.slept(), len(s.requests()))
		}
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		t.Parallel()
		s := newScripted(t, fail(500, "INTERNAL_ERROR"))
		c, clock := scriptedClient(t, s)
		ctx, cancel := context.WithCancel(context.Background())
		clock.onSleep = cancel
		_, err := collectErr(c.ListTemplates(ctx, nil))
		if !errors.Is(err, context.Canceled) || !errors.Is(err, client.CodeInternal) || len(s.requests()) != 1 {
			t.Fatalf("err %v, %d requests", err, len(s.requests()))
		}
	})
	t.Run("real clock", func(t *testing.T) {
		t.Parallel()
		s := newScripted(t, fail(503, "DETECTION_UNAVAILABLE"), fail(500, "INTERNAL_ERROR"), ok())
		c, err := client.New(s.srv.URL, scriptKey, client.WithRetryPolicy(client.RetryPolicy{
			ServerErrorDelays: []time.Duration{time.Millisecond}, UnavailableDelays: []time.Duration{time.Millisecond}}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := collectErr(c.ListTemplates(context.Background(), nil)); err != nil || len(s.requests()) != 3 {
			t.Fatalf("err %v, %d requests", err, len(s.requests()))
		}
	})
	t.Run("no retries", func(t *testing.T) {
		t.Parallel()
		s := newScripted(t, fail(503, "NO_PHONE_AVAILABLE"), ok())
		c, clock := scriptedClient(t, s, client.WithRetryPolicy(client.RetryPolicy{}))
		if _, err := collectErr(c.ListTemplates(context.Background(), nil)); !errors.Is(err, client.CodeNoPhoneAvailable) || len(s.requests()) != 1 || len(clock.slept()) != 0 {
			t.Fatalf("err %v, %d requests", err, len(s.requests()))
		}
	})
}

// TestNotTheEnvelope: an error answer that is not the API's envelope (a
// proxy's page) is an *Error without a code.
func TestNotTheEnvelope(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer srv.Close()
	c := must(client.New(srv.URL, scriptKey))(t)
	err := c.Health(context.Background())
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 502 || e.Code != "" || e.Message != "Bad Gateway" || client.ErrorCode(err) != "" {
		t.Fatalf("err %#v", err)
	}
}

func TestNewRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://user:pw@host", "http://host/?q=1", "http:///path"} {
		if _, err := client.New(u, scriptKey); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	if _, err := client.New("http://127.0.0.1:8080", ""); err == nil {
		t.Error("New accepted an empty key")
	}
	// An id is one path segment, escaped; an empty one is refused before
	// anything is sent.
	s := newScripted(t, fail(404, "NOT_FOUND"))
	c, _ := scriptedClient(t, s)
	c.GetMessage(context.Background(), "a/b?c")
	if _, err := c.GetMessage(context.Background(), ""); err == nil {
		t.Error("an empty id was accepted")
	}
	if r := s.requests(); len(r) != 1 || r[0].path != "/v1/messages/a%2Fb%3Fc" || r[0].query != "" {
		t.Fatalf("requests %+v", r)
	}
}

// TestRetryWaitBudget: the budget is the policy's to set; zero means no
// bound, and a larger one lets a call wait for a phone.
func TestRetryWaitBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		budget  time.Duration
		answers []answer
		sleeps  []time.Duration
	}{
		{"no bound: five retries of a 503", 0, []answer{fail(503, "DETECTION_UNAVAILABLE")}, secs(2, 4, 8, 16, 32)},
		{"a larger budget waits for a phone", 90 * time.Second, []answer{fail(503, "NO_PHONE_AVAILABLE", "Retry-After", "60"), ok()}, secs(60)},
		{"a smaller budget", 10 * time.Second, []answer{fail(503, "DETECTION_UNAVAILABLE")}, secs(2, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := client.DefaultRetryPolicy()
			p.WaitBudget = tc.budget
			s := newScripted(t, tc.answers...)
			c, clock := scriptedClient(t, s, client.WithRetryPolicy(p))
			c.ListTemplates(context.Background(), nil)(func(*client.Template, error) bool { return false })
			if got := clock.slept(); !slices.Equal(got, tc.sleeps) {
				t.Fatalf("waits %v, want %v", got, tc.sleeps)
			}
		})
	}
	if client.DefaultRetryPolicy().WaitBudget != 30*time.Second {
		t.Errorf("default budget %v, want 30s", client.DefaultRetryPolicy().WaitBudget)
	}
}

// TestNoPhoneAgainstTheServer: a live send to a tenant whose only phone is
// at its daily limit gets NO_PHONE_AVAILABLE with the seconds until the
// next UTC day in Retry-After; the default client returns it at once
// instead of waiting, and with no phone at all (no Retry-After) it does not
// retry either.
func TestNoPhoneAgainstTheServer(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	toMidnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
	if toMidnight < 2*time.Minute {
		t.Skip("too close to midnight UTC, when the phone's daily count starts again")
	}
	ctx := context.Background()
	tn := newTenant(t)
	c := newClient(t, tn.Live)
	if _, err := c.UpdatePhone(ctx, tn.PhoneID, client.UpdatePhoneParams{DailyLimit: client.Value(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, client.SendParams{To: "+15005550006", Body: "the day's one message"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.SendMessage(ctx, client.SendParams{To: "+15005550006", Body: "one too many"})
	took := time.Since(start)
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodeNoPhoneAvailable {
		t.Fatalf("second send: %v, want NO_PHONE_AVAILABLE", err)
	}
	if d := e.RetryAfter - toMidnight; d < -5*time.Second || d > 5*time.Second {
		t.Errorf("Retry-After %v, want the time to the next UTC day (%v)", e.RetryAfter, toMidnight.Round(time.Second))
	}
	if took > 10*time.Second {
		t.Errorf("the call took %v: it waited instead of returning at once", took)
	}

	if err := c.DeletePhone(ctx, tn.PhoneID); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = c.SendMessage(ctx, client.SendParams{To: "+15005550006", Body: "no phone at all"})
	if !errors.As(err, &e) || e.Code != client.CodeNoPhoneAvailable || e.RetryAfter != 0 {
		t.Fatalf("send with no phone: %v (Retry-After %v), want NO_PHONE_AVAILABLE without Retry-After", err, e.RetryAfter)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the call took %v: it retried", took)
	}
}
