package main

// The end-to-end harness: every HTTP test starts the real program with run()
// on a random port, against a fresh database, on SQLite and on PostgreSQL,
// and every response it receives is validated against the OpenAPI document.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/switchboard/switchboard/httpapi"
	"github.com/switchboard/switchboard/internal/dbtest"
)

// postgresEnv names the variable holding a PostgreSQL URL for tests.
const postgresEnv = dbtest.PostgresEnv

// forEachDB runs fn once on a fresh SQLite database and once on a fresh
// PostgreSQL database, both migrated (copies of the binary's templates).
// The PostgreSQL run is skipped, saying why, when SWITCHBOARD_TEST_POSTGRES
// is unset.
var forEachDB = dbtest.ForEach

var (
	sqliteURL   = dbtest.SQLite
	postgresURL = dbtest.Postgres
)

// sharedCase is a subtest that shares its server with the others of its
// test; it makes its own tenants.
type sharedCase struct {
	name string
	fn   func(t *testing.T, s *server, db string)
}

// runShared starts one server per database with args and runs every case
// on it, as subtests: starting a server costs about a second.
func runShared(t *testing.T, args []string, cases []sharedCase) {
	t.Helper()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db, args...)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { c.fn(t, s, db) })
		}
	})
}

// server is a running `switchboard serve`.
type server struct {
	t      testing.TB
	URL    string
	DB     string
	cancel context.CancelFunc
	done   chan error
	logs   *syncBuffer
	// client, when set, is the HTTP client of s.do (one that trusts the
	// server's certificate, say); httpClient otherwise.
	client *http.Client
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServer runs `switchboard serve` in-process on a random port against
// dbURL and waits until it listens. It stops when the test ends.
func startServer(t testing.TB, dbURL string, extra ...string) *server {
	t.Helper()
	return startServerEnv(t, dbURL, noEnv, extra...)
}

// startServerEnv is startServer with the environment getenv gives (the
// secrets a providers file names, say).
func startServerEnv(t testing.TB, dbURL string, getenv func(string) string, extra ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &server{t: t, DB: dbURL, cancel: cancel, done: make(chan error, 1), logs: &syncBuffer{}}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--database", dbURL}, extra...)
	go func() {
		err := run(ctx, args, getenv, io.Discard, pw)
		pw.CloseWithError(fmt.Errorf("server exited: %v", err))
		s.done <- err
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			s.logs.Write([]byte(line + "\n"))
			if !sent && strings.Contains(line, `"msg":"listening"`) {
				var l struct{ Addr, Scheme string }
				json.Unmarshal([]byte(line), &l)
				if l.Scheme == "" {
					l.Scheme = "http"
				}
				addr <- l.Scheme + "://" + l.Addr
				sent = true
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case a := <-addr:
		s.URL = a
	case err := <-s.done:
		t.Fatalf("server did not start: %v\n%s", err, s.logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not start within 60s\n%s", s.logs.String())
	}
	t.Cleanup(s.stop)
	return s
}

func (s *server) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if err := <-s.done; err != nil {
		s.t.Errorf("server stopped with error: %v", err)
	}
}

func noEnv(string) string { return "" }

// cli runs an operator command against the server's database and returns
// its stdout; it fails the test when the command fails.
func cli(t testing.TB, dbURL string, args ...string) string {
	t.Helper()
	out, err := cliErr(dbURL, args...)
	if err != nil {
		t.Fatalf("switchboard %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func cliErr(dbURL string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	args = append(args, "--database", dbURL)
	err := run(context.Background(), args, noEnv, &stdout, &stderr)
	if err != nil {
		return stdout.String(), fmt.Errorf("%w (stderr: %s)", err, stderr.String())
	}
	return stdout.String(), nil
}

// tenant is what `switchboard tenant create` prints.
type tenant struct {
	ID    string `json:"tenant_id"`
	Live  string `json:"live_key"`
	Test  string `json:"test_key"`
	Phone struct {
		ID     string `json:"id"`
		Number string `json:"number"`
	} `json:"phone"`
}

func newTenant(t testing.TB, dbURL string, args ...string) tenant {
	t.Helper()
	var tn tenant
	out := cli(t, dbURL, append([]string{"tenant", "create", "--name", "Test Co"}, args...)...)
	if err := json.Unmarshal([]byte(out), &tn); err != nil {
		t.Fatalf("tenant create printed %q: %v", out, err)
	}
	return tn
}

// response is one HTTP answer, already checked against the OpenAPI document.
type response struct {
	Status int
	Header http.Header
	Raw    []byte
	Body   map[string]any
}

// Data returns body.data as an object.
func (r *response) Data() map[string]any {
	d, _ := r.Body["data"].(map[string]any)
	return d
}

// List returns body.data as an array of objects.
func (r *response) List() []map[string]any {
	arr, _ := r.Body["data"].([]any)
	out := make([]map[string]any, len(arr))
	for i, v := range arr {
		out[i], _ = v.(map[string]any)
	}
	return out
}

// Code returns body.code.
func (r *response) Code() string { s, _ := r.Body["code"].(string); return s }

// Field returns body.details.field.
func (r *response) Field() string {
	d, _ := r.Body["details"].(map[string]any)
	s, _ := d["field"].(string)
	return s
}

var (
	specOnce   sync.Once
	specRouter routers.Router
	specDoc    *openapi3.T
	specErr    error
)

func openapiRouter(t testing.TB) (*openapi3.T, routers.Router) {
	specOnce.Do(func() {
		specDoc, specErr = httpapi.OpenAPI()
		if specErr == nil {
			// Route on paths alone: the document's server URL is not ours.
			specDoc.Servers = nil
			specRouter, specErr = gorillamux.NewRouter(specDoc)
		}
	})
	if specErr != nil {
		t.Fatalf("openapi: %v", specErr)
	}
	return specDoc, specRouter
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// do sends a request with key as the bearer token (none when empty). body
// may be nil, a string or []byte (sent as is), or a value to encode as JSON.
func (s *server) do(t testing.TB, method, path, key string, body any, headers ...string) *response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := httpClient
	if s.client != nil {
		client = s.client
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := &response{Status: res.StatusCode, Header: res.Header, Raw: raw}
	checkEnvelope(t, req, r)
	return r
}

// checkEnvelope asserts the rules every response obeys (docs/api.md)
// and validates the response against the OpenAPI document.
func checkEnvelope(t testing.TB, req *http.Request, r *response) {
	t.Helper()
	where := req.Method + " " + req.URL.Path
	if r.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s: no X-Request-Id", where)
	}
	if outsideEnvelope(req) {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", where, ct)
	}
	if err := json.Unmarshal(r.Raw, &r.Body); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v: %s", where, err, r.Raw)
	}
	_, hasData := r.Body["data"]
	_, hasErr := r.Body["error"]
	_, hasCode := r.Body["code"]
	switch {
	case r.Status < 400 && r.Code() == "QUIET_HOURS":
		if !hasData || hasErr {
			t.Errorf("%s: QUIET_HOURS answer must have data and no error: %s", where, r.Raw)
		}
	case r.Status < 400:
		if !hasData || hasErr || hasCode {
			t.Errorf("%s: success envelope must have only data: %s", where, r.Raw)
		}
	default:
		if hasData || !hasErr || !hasCode {
			t.Errorf("%s: error envelope must have error and code, no data: %s", where, r.Raw)
		}
		if r.Code() == "INTERNAL_ERROR" && strings.Contains(strings.ToLower(string(r.Raw)), "sql") {
			t.Errorf("%s: internal error leaks internals: %s", where, r.Raw)
		}
	}
	validateOpenAPI(t, req, r)
}

func validateOpenAPI(t testing.TB, req *http.Request, r *response) {
	t.Helper()
	where := req.Method + " " + req.URL.Path
	_, router := openapiRouter(t)
	route, params, err := router.FindRoute(req)
	if err != nil {
		// Unknown paths and methods answer as the document's shared
		// NotFound and MethodNotAllowed responses say.
		switch {
		case r.Status == http.StatusMethodNotAllowed && (errors.Is(err, routers.ErrMethodNotAllowed) || outsideDocument(req.URL.Path)):
			validateSharedResponse(t, where, r, "MethodNotAllowed")
		case errors.Is(err, routers.ErrPathNotFound) && r.Status == http.StatusNotFound:
			validateSharedResponse(t, where, r, "NotFound")
		default:
			t.Errorf("%s: answered %d but the OpenAPI document has no such operation (%v)", where, r.Status, err)
		}
		return
	}
	if route.Operation.Responses.Status(r.Status) == nil {
		t.Errorf("%s: status %d is not documented in the OpenAPI document", where, r.Status)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: r.Status,
		Header: r.Header,
		Body:   io.NopCloser(bytes.NewReader(r.Raw)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s: response %d does not match the OpenAPI document: %v\nbody: %s", where, r.Status, err, r.Raw)
	}
}

// outsideDocument reports the paths the server serves that are not in the
// OpenAPI document: the Prometheus metrics and the HTML API reference.
func outsideDocument(path string) bool {
	return path == "/metrics" || path == "/docs" || strings.HasPrefix(path, "/docs/")
}

// outsideEnvelope reports the requests answered without the envelope: those
// paths and the OpenAPI document itself (served bare). Other methods on them
// answer the usual 405 envelope.
func outsideEnvelope(req *http.Request) bool {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return false
	}
	return outsideDocument(req.URL.Path) || req.URL.Path == "/v1/openapi.json"
}

// validateSharedResponse checks an answer given outside the document's
// operations against components/responses/name: its required headers and
// its body.
func validateSharedResponse(t testing.TB, where string, r *response, name string) {
	t.Helper()
	doc, _ := openapiRouter(t)
	ref := doc.Components.Responses[name]
	if ref == nil || ref.Value == nil {
		t.Errorf("%s: the OpenAPI document has no components/responses/%s", where, name)
		return
	}
	for h, hdr := range ref.Value.Headers {
		if hdr.Value != nil && hdr.Value.Required && r.Header.Get(h) == "" {
			t.Errorf("%s: %d without the %s header that components/responses/%s requires", where, r.Status, h, name)
		}
	}
	media := ref.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil {
		t.Errorf("%s: components/responses/%s has no application/json schema", where, name)
		return
	}
	var body any
	if err := json.Unmarshal(r.Raw, &body); err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if err := media.Schema.Value.VisitJSON(body); err != nil {
		t.Errorf("%s: %d does not match components/responses/%s: %v\nbody: %s", where, r.Status, name, err, r.Raw)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
