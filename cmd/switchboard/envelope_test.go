package main

// The response envelope and errors (docs/api.md): unknown paths and
// methods, request bodies, sizes, and the public endpoints /healthz,
// /v1/openapi.json and /metrics. The harness checks the envelope shape,
// X-Request-Id, Content-Type and the OpenAPI document on every answer;
// these tests check the codes.

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/httpapi"
)

// TestEnvelope runs the envelope rules on one server per database.
func TestEnvelope(t *testing.T) {
	t.Parallel()
	runShared(t, nil, []sharedCase{
		{"UnknownPath", testEnvelopeUnknownPath},
		{"MethodNotAllowed", testEnvelopeMethodNotAllowed},
		{"BadBodies", testEnvelopeBadBodies},
		{"BodySize", testEnvelopeBodySize},
		{"PublicEndpoints", testEnvelopePublicEndpoints},
	})
}

func testEnvelopeUnknownPath(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	for _, c := range []struct{ method, path, key string }{
		{"GET", "/", ""},
		{"GET", "/nope", ""},
		{"GET", "/v1", tn.Live},
		{"GET", "/v1/nope", tn.Live},
		{"POST", "/v1/nope", ""},
		{"GET", "/v2/api-keys", tn.Live},
		{"DELETE", "/v1/api-keys/a/b", tn.Live},
		{"GET", "/healthz/x", ""},
	} {
		r := s.do(t, c.method, c.path, c.key, nil)
		wantError(t, c.method+" "+c.path, r, http.StatusNotFound, "NOT_FOUND")
		if e, _ := r.Body["error"].(string); e == "" {
			t.Errorf("%s %s: empty error text", c.method, c.path)
		}
	}
}

func testEnvelopeMethodNotAllowed(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	for _, c := range []struct {
		method, path string
		allow        []string
	}{
		{"PUT", "/v1/api-keys", []string{"GET", "POST"}},
		{"DELETE", "/v1/api-keys", []string{"GET", "POST"}},
		{"PATCH", "/v1/api-keys/01ARZ3NDEKTSV4RRFFQ69G5FAV", []string{"DELETE"}},
		{"GET", "/v1/api-keys/01ARZ3NDEKTSV4RRFFQ69G5FAV", []string{"DELETE"}},
		{"POST", "/healthz", []string{"GET"}},
		{"DELETE", "/v1/openapi.json", []string{"GET"}},
		{"POST", "/metrics", []string{"GET"}},
	} {
		for _, key := range []string{"", tn.Live} {
			r := s.do(t, c.method, c.path, key, nil)
			wantError(t, c.method+" "+c.path, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
			allow := r.Header.Get("Allow")
			for _, m := range c.allow {
				if !strings.Contains(allow, m) {
					t.Errorf("%s %s: Allow %q does not list %s", c.method, c.path, allow, m)
				}
			}
			if strings.Contains(allow, c.method) {
				t.Errorf("%s %s: Allow %q lists the refused method", c.method, c.path, allow)
			}
		}
	}
}

func testEnvelopeBadBodies(t *testing.T, s *server, db string) {
	tn := newTenant(t, db, "--plan", "scale") // many requests, no rate limit
	for _, c := range []struct {
		what, body, field string
	}{
		{"empty body", "", "body"},
		{"whitespace only", " \n\t", "body"},
		{"malformed JSON", `{"name": "x"`, "body"},
		{"not JSON", `name=x`, "body"},
		{"trailing comma", `{"name": "x",}`, "body"},
		{"two objects", `{"name": "x"} {"name": "y"}`, "body"},
		{"array", `[{"name": "x"}]`, "body"},
		{"string", `"x"`, "body"},
		{"null", `null`, "body"},
		{"unknown field", `{"name": "x", "bogus": 1}`, "bogus"},
		{"unknown field in another case", `{"name": "x", "Rate_Limit": 5}`, "Rate_Limit"},
		{"field name differing in case", `{"NAME": "x"}`, "NAME"},
		{"wrong type: name", `{"name": 5}`, "name"},
		{"wrong type: rate_limit", `{"name": "x", "rate_limit": "10"}`, "rate_limit"},
		{"wrong type: environment", `{"name": "x", "environment": ["live"]}`, "environment"},
		{"missing name", `{}`, "name"},
		{"null name", `{"name": null}`, "name"},
		{"blank name", `{"name": "  "}`, "name"},
		{"name too long", `{"name": "` + strings.Repeat("n", 101) + `"}`, "name"},
	} {
		r := s.do(t, "POST", "/v1/api-keys", tn.Live, c.body)
		wantError(t, c.what, r, http.StatusBadRequest, "VALIDATION_ERROR")
		if r.Field() != c.field {
			t.Errorf("%s: details.field %q, want %q (%s)", c.what, r.Field(), c.field, r.Raw)
		}
		if e, _ := r.Body["error"].(string); e == "" {
			t.Errorf("%s: empty error text", c.what)
		}
	}
	// Nothing was created.
	if n := len(apiListKeys(t, s, tn.Live)); n != 2 {
		t.Errorf("%d keys after invalid requests, want 2", n)
	}
}

func testEnvelopeBodySize(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	// Exactly 1 MiB of valid JSON: {"name":"big"} padded with spaces.
	const head, tail = `{"name":"big"`, `}`
	exact := head + strings.Repeat(" ", httpapi.MaxBodyBytes-len(head)-len(tail)) + tail
	if len(exact) != 1<<20 {
		t.Fatalf("fixture is %d bytes", len(exact))
	}
	if r := s.do(t, "POST", "/v1/api-keys", tn.Live, exact); r.Status != http.StatusCreated {
		t.Errorf("a body of exactly 1 MiB: %d %s, want 201", r.Status, r.Raw)
	}
	for what, body := range map[string]string{
		"1 MiB + 1 of valid JSON": exact + " ",
		"1 MiB + 1 of garbage":    strings.Repeat("x", 1<<20+1),
	} {
		wantError(t, what, s.do(t, "POST", "/v1/api-keys", tn.Live, body), http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
	}
	if n := len(apiListKeys(t, s, tn.Live)); n != 3 {
		t.Errorf("%d keys, want 3: only the 1 MiB request creates one", n)
	}
}

func testEnvelopePublicEndpoints(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)

	// /healthz needs no key, and ignores a bad one.
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer nonsense"}} {
		r := s.do(t, "GET", "/healthz", "", nil, hdr...)
		if r.Status != http.StatusOK || strings.TrimSpace(string(r.Raw)) != `{"data":{"status":"ok"}}` {
			t.Errorf("/healthz: %d %s", r.Status, r.Raw)
		}
	}

	// /v1/openapi.json: the bare OpenAPI 3.1 document, no key needed.
	r := s.do(t, "GET", "/v1/openapi.json", "", nil)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("/v1/openapi.json: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI    string                     `json:"openapi"`
		Paths      map[string]json.RawMessage `json:"paths"`
		Components map[string]json.RawMessage `json:"components"`
		Data       json.RawMessage            `json:"data"`
	}
	if err := json.Unmarshal(r.Raw, &doc); err != nil {
		t.Fatalf("/v1/openapi.json is not JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Data != nil {
		t.Errorf("/v1/openapi.json: openapi %q, enveloped %v", doc.OpenAPI, doc.Data != nil)
	}
	for _, p := range []string{"/healthz", "/v1/openapi.json", "/v1/api-keys", "/v1/api-keys/{id}"} {
		if _, ok := doc.Paths[p]; !ok {
			t.Errorf("/v1/openapi.json has no path %s", p)
		}
	}
	if _, ok := doc.Components["schemas"]; !ok {
		t.Errorf("/v1/openapi.json has no component schemas")
	}

	// X-Request-Id differs between requests.
	a := s.do(t, "GET", "/v1/api-keys", tn.Live, nil)
	b := s.do(t, "GET", "/v1/api-keys", "", nil)
	if a.Header.Get("X-Request-Id") == b.Header.Get("X-Request-Id") {
		t.Errorf("two requests share the request id %q", a.Header.Get("X-Request-Id"))
	}

	// /metrics: counters and latency by route pattern; an unknown path
	// is one "unmatched" route, never a label of its own.
	s.do(t, "GET", "/v1/no-such-route-4711", "", nil)
	r = s.do(t, "GET", "/metrics", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("/metrics: %d", r.Status)
	}
	m := string(r.Raw)
	for _, re := range []string{
		`(?m)^switchboard_http_requests_total\{route="GET /v1/api-keys",status="200"\} [1-9]`,
		`(?m)^switchboard_http_requests_total\{route="GET /v1/api-keys",status="401"\} [1-9]`,
		`(?m)^switchboard_http_requests_total\{route="unmatched",status="404"\} [1-9]`,
		`(?m)^switchboard_http_request_duration_seconds_bucket\{route="GET /v1/api-keys",le="[^"]+"\} [1-9]`,
		`(?m)^switchboard_http_request_duration_seconds_count\{route="GET /v1/api-keys"\} [1-9]`,
	} {
		if !regexp.MustCompile(re).MatchString(m) {
			t.Errorf("/metrics does not match %s", re)
		}
	}
	if strings.Contains(m, "no-such-route-4711") {
		t.Errorf("/metrics has a label for a raw unknown path")
	}
}
