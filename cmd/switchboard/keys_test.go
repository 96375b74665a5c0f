package main

// API keys (docs/api.md): creation, the
// environment and rate_limit rules, listing, revocation, the 100-key cap,
// last_used_at, and revocation seen by every node.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var keyTextRE = regexp.MustCompile(`^svc_(live|test)_[0-9A-Za-z]{32}$`)

// apiCreateKey creates a key with POST /v1/api-keys and fails the test
// unless the answer is 201; it returns the creation object.
func apiCreateKey(t testing.TB, s *server, key string, body any) map[string]any {
	t.Helper()
	r := s.do(t, "POST", "/v1/api-keys", key, body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create key %v: %d %s", body, r.Status, r.Raw)
	}
	return r.Data()
}

// apiListKeys lists the keys with GET /v1/api-keys and fails the test
// unless the answer is 200.
func apiListKeys(t testing.TB, s *server, key string) []map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/api-keys", key, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list keys: %d %s", r.Status, r.Raw)
	}
	return r.List()
}

// findByID returns the object of list whose id is id, or nil.
func findByID(list []map[string]any, id any) map[string]any {
	for _, o := range list {
		if o["id"] == id {
			return o
		}
	}
	return nil
}

// tempPlansFile writes a --plans file and returns its path.
func tempPlansFile(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantError fails the test unless r is the error status and code.
func wantError(t testing.TB, what string, r *response, status int, code string) {
	t.Helper()
	if r.Body == nil { // the harness leaves the bodies of /metrics and /v1/openapi.json alone
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", what, ct)
		}
		json.Unmarshal(r.Raw, &r.Body)
	}
	if r.Status != status || r.Code() != code {
		t.Fatalf("%s: got %d %s, want %d %s", what, r.Status, r.Raw, status, code)
	}
}

// awaitStatus polls GET /v1/api-keys with key until it answers status with
// code ("" for a success), for changes that reach the auth cache
// asynchronously (an operator command, another node).
func awaitStatus(t testing.TB, s *server, key string, within time.Duration, what string, status int, code string) {
	t.Helper()
	var last *response
	defer func() {
		if t.Failed() && last != nil {
			t.Logf("%s: the last answer was %d %s", what, last.Status, last.Raw)
		}
	}()
	eventually(t, within, what, func() bool {
		last = s.do(t, "GET", "/v1/api-keys", key, nil)
		return last.Status == status && last.Code() == code
	})
}

// operatorChange is how long an operator command or another node's change
// may take to reach a server's auth cache: the cache's 1 s TTL (SQLite) or
// a NOTIFY (PostgreSQL), with margin for a loaded machine.
const operatorChange = 3 * time.Second

// TestKeys runs the key rules that need nothing but the default plans on
// one server per database; every subtest makes its own tenants.
func TestKeys(t *testing.T) {
	t.Parallel()
	runShared(t, nil, []sharedCase{
		{"Create", testKeyCreate},
		{"Environment", testKeyEnvironment},
		{"RateLimitValidation", testKeyRateLimitValidation},
		{"ScalePlanUnlimited", testKeyScalePlanUnlimited},
		{"ListOrderAndStatus", testKeyListOrderAndStatus},
		{"Revoke", testKeyRevoke},
		{"Cap", testKeyCap},
	})
}

func testKeyCreate(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)

	before := time.Now().UTC().Truncate(time.Microsecond)
	d := apiCreateKey(t, s, tn.Live, map[string]any{"name": "ci"})
	after := time.Now().UTC()
	text, _ := d["key"].(string)
	if !keyTextRE.MatchString(text) || !strings.HasPrefix(text, "svc_live_") {
		t.Fatalf("key %q does not match svc_live_ + 32 of [0-9A-Za-z]", text)
	}
	if d["key_hint"] != "..."+text[len(text)-4:] {
		t.Errorf("key_hint %v, want ...%s", d["key_hint"], text[len(text)-4:])
	}
	if d["name"] != "ci" || d["environment"] != "live" || d["status"] != "active" {
		t.Errorf("created key: %v", d)
	}
	if v, ok := d["last_used_at"]; !ok || v != nil {
		t.Errorf("last_used_at of a new key: %v (present %v), want null", v, ok)
	}
	if d["rate_limit"] != float64(50) {
		t.Errorf("rate_limit %v, want the trial plan's 50", d["rate_limit"])
	}
	created, err := time.Parse(time.RFC3339Nano, fmt.Sprint(d["created_at"]))
	if err != nil || !strings.HasSuffix(fmt.Sprint(d["created_at"]), "Z") {
		t.Errorf("created_at %v is not an ISO 8601 UTC timestamp: %v", d["created_at"], err)
	} else if created.Before(before) || created.After(after) {
		t.Errorf("created_at %v is not the time of the request (%v .. %v)", created, before, after)
	}
	id := d["id"]

	// The new key works.
	apiListKeys(t, s, text)

	// Later lists never contain the key text, of any key.
	r := s.do(t, "GET", "/v1/api-keys", tn.Live, nil)
	for _, secret := range []string{text, tn.Live, tn.Test, text[len("svc_live_"):]} {
		if bytes.Contains(r.Raw, []byte(secret)) {
			t.Errorf("the list contains a full key: %s", r.Raw)
		}
	}
	k := findByID(r.List(), id)
	if k == nil {
		t.Fatalf("the new key is not in the list: %s", r.Raw)
	}
	if _, ok := k["key"]; ok {
		t.Errorf("a list item has a key field: %v", k)
	}
	if k["key_hint"] != d["key_hint"] || k["created_at"] != d["created_at"] || k["name"] != "ci" {
		t.Errorf("list item %v differs from the creation response %v", k, d)
	}
}

func testKeyEnvironment(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	cases := []struct {
		caller, env, want string
	}{
		{tn.Live, "", "live"}, // default: the caller's environment
		{tn.Test, "", "test"},
		{tn.Live, "live", "live"},
		{tn.Live, "test", "test"},
		{tn.Test, "test", "test"},
	}
	for _, c := range cases {
		body := map[string]any{"name": "env " + c.env}
		if c.env != "" {
			body["environment"] = c.env
		}
		d := apiCreateKey(t, s, c.caller, body)
		text, _ := d["key"].(string)
		if d["environment"] != c.want || !strings.HasPrefix(text, "svc_"+c.want+"_") || !keyTextRE.MatchString(text) {
			t.Errorf("caller %s, environment %q: got environment %v, key %q; want %s", c.caller[:9], c.env, d["environment"], text, c.want)
		}
		// The key authenticates, and its list entry has its environment.
		k := findByID(apiListKeys(t, s, text), d["id"])
		if k == nil || k["environment"] != c.want {
			t.Errorf("list entry of the %s key: %v", c.want, k)
		}
	}

	wantError(t, "test key creating a live key",
		s.do(t, "POST", "/v1/api-keys", tn.Test, map[string]any{"name": "x", "environment": "live"}),
		http.StatusForbidden, "FORBIDDEN")
	for _, bad := range []any{"prod", "", "LIVE", 1, true} {
		r := s.do(t, "POST", "/v1/api-keys", tn.Live, map[string]any{"name": "x", "environment": bad})
		wantError(t, fmt.Sprintf("environment %#v", bad), r, http.StatusBadRequest, "VALIDATION_ERROR")
		if r.Field() != "environment" {
			t.Errorf("environment %#v: details.field %q, want environment", bad, r.Field())
		}
	}
}

func testKeyRateLimitValidation(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)                         // trial: ceiling 50
	growth := newTenant(t, db, "--plan", "growth") // ceiling 200

	for _, bad := range []string{"0", "-1", "1.5", `"10"`, "51", "1000000", "1e2", "true", "99999999999999999999"} {
		r := s.do(t, "POST", "/v1/api-keys", tn.Live, `{"name":"x","rate_limit":`+bad+`}`)
		wantError(t, "rate_limit "+bad, r, http.StatusBadRequest, "VALIDATION_ERROR")
		if r.Field() != "rate_limit" {
			t.Errorf("rate_limit %s: details.field %q, want rate_limit", bad, r.Field())
		}
	}
	r := s.do(t, "POST", "/v1/api-keys", growth.Live, map[string]any{"name": "x", "rate_limit": 201})
	wantError(t, "rate_limit 201 on growth", r, http.StatusBadRequest, "VALIDATION_ERROR")
	if r.Field() != "rate_limit" {
		t.Errorf("rate_limit 201 on growth: details.field %q", r.Field())
	}

	for _, c := range []struct {
		tn    tenant
		body  string
		limit int
	}{
		{tn, `{"name":"x","rate_limit":50}`, 50}, // equal to the ceiling
		{tn, `{"name":"x","rate_limit":1}`, 1},
		{tn, `{"name":"x","rate_limit":10}`, 10},
		{tn, `{"name":"x"}`, 50}, // default: the plan's limit
		{tn, `{"name":"x","rate_limit":null}`, 50},
		{growth, `{"name":"x","rate_limit":200}`, 200},
		{growth, `{"name":"x"}`, 200},
	} {
		r := s.do(t, "POST", "/v1/api-keys", c.tn.Live, c.body)
		if r.Status != http.StatusCreated || r.Data()["rate_limit"] != float64(c.limit) {
			t.Errorf("%s: %d %s, want 201 with rate_limit %d", c.body, r.Status, r.Raw, c.limit)
			continue
		}
		// The limit is the one enforced.
		u := s.do(t, "GET", "/v1/api-keys", r.Data()["key"].(string), nil)
		if u.Status != http.StatusOK || u.Header.Get("X-RateLimit-Limit") != fmt.Sprint(c.limit) {
			t.Errorf("%s: using the key: %d, X-RateLimit-Limit %q, want %d", c.body, u.Status, u.Header.Get("X-RateLimit-Limit"), c.limit)
		}
		if k := findByID(u.List(), r.Data()["id"]); k == nil || k["rate_limit"] != float64(c.limit) {
			t.Errorf("%s: list entry %v, want rate_limit %d", c.body, k, c.limit)
		}
	}
}

func testKeyScalePlanUnlimited(t *testing.T, s *server, db string) {
	tn := newTenant(t, db, "--plan", "scale")

	r := s.do(t, "GET", "/v1/api-keys", tn.Live, nil)
	if r.Status != http.StatusOK || len(r.List()) != 2 {
		t.Fatalf("list: %d %s", r.Status, r.Raw)
	}
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if v, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			t.Errorf("an unlimited key's answer has %s: %v", h, v)
		}
	}
	for _, k := range r.List() {
		if v, ok := k["rate_limit"]; !ok || v != nil {
			t.Errorf("rate_limit of a Scale key without a limit: %v (present %v), want null", v, ok)
		}
	}
	d := apiCreateKey(t, s, tn.Live, map[string]any{"name": "unlimited"})
	if v, ok := d["rate_limit"]; !ok || v != nil {
		t.Errorf("created Scale key: rate_limit %v (present %v), want null", v, ok)
	}
	// A Scale key may have a limit of its own, of any size the limiter
	// can enforce.
	for _, limit := range []int{1000, 1_000_000} {
		d = apiCreateKey(t, s, tn.Live, map[string]any{"name": "limited", "rate_limit": limit})
		if d["rate_limit"] != float64(limit) {
			t.Errorf("created Scale key with a limit: rate_limit %v, want %d", d["rate_limit"], limit)
		}
		u := s.do(t, "GET", "/v1/api-keys", d["key"].(string), nil)
		if u.Status != http.StatusOK || u.Header.Get("X-RateLimit-Limit") != fmt.Sprint(limit) {
			t.Errorf("using a Scale key limited to %d: %d %s, X-RateLimit-Limit %q", limit, u.Status, u.Raw, u.Header.Get("X-RateLimit-Limit"))
		}
	}
	// A limit too fine for the limiter is refused at creation, not
	// turned into a key that answers 500.
	r = s.do(t, "POST", "/v1/api-keys", tn.Live, map[string]any{"name": "huge", "rate_limit": 1_000_000_000})
	if r.Status == http.StatusCreated {
		u := s.do(t, "GET", "/v1/api-keys", r.Data()["key"].(string), nil)
		if u.Status != http.StatusOK {
			t.Errorf("a Scale key created with rate_limit 1e9 answers %d %s", u.Status, u.Raw)
		}
	} else {
		wantError(t, "rate_limit 1e9 on Scale", r, http.StatusBadRequest, "VALIDATION_ERROR")
		if r.Field() != "rate_limit" {
			t.Errorf("rate_limit 1e9: details.field %q", r.Field())
		}
	}
}

func testKeyListOrderAndStatus(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	other := newTenant(t, db)
	apiCreateKey(t, s, other.Live, map[string]any{"name": "other tenant"})

	var want []string // ids, oldest first
	var envs []string
	for _, k := range apiListKeys(t, s, tn.Live) {
		want = append(want, k["id"].(string))
		envs = append(envs, k["environment"].(string))
	}
	if len(want) != 2 || envs[0] != "live" || envs[1] != "test" {
		t.Fatalf("a new tenant's keys: %v %v, want its live and test key", want, envs)
	}
	for i, env := range []string{"test", "live", "test", "live"} {
		d := apiCreateKey(t, s, tn.Live, map[string]any{"name": fmt.Sprint("k", i), "environment": env})
		want = append(want, d["id"].(string))
		envs = append(envs, env)
	}
	check := func(wantIDs, wantEnvs []string) {
		t.Helper()
		checkList(t, apiListKeys(t, s, tn.Live), wantIDs, wantEnvs)
		// A test key sees the test keys only, in the same order.
		var testIDs, testEnvs []string
		for i, id := range wantIDs {
			if wantEnvs[i] == "test" {
				testIDs, testEnvs = append(testIDs, id), append(testEnvs, "test")
			}
		}
		checkList(t, apiListKeys(t, s, tn.Test), testIDs, testEnvs)
	}
	check(want, envs)

	// Revoked keys leave the list; the rest keep their order.
	if r := s.do(t, "DELETE", "/v1/api-keys/"+want[3], tn.Live, nil); r.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.Status, r.Raw)
	}
	check(append(append([]string{}, want[:3]...), want[4:]...), append(append([]string{}, envs[:3]...), envs[4:]...))
}

// checkList checks a key list against the ids and environments expected,
// oldest first.
func checkList(t *testing.T, list []map[string]any, wantIDs, wantEnvs []string) {
	t.Helper()
	var got []string
	var prev time.Time
	for i, k := range list {
		got = append(got, fmt.Sprint(k["id"]))
		if k["status"] != "active" {
			t.Errorf("key %v: status %v, want active", k["id"], k["status"])
		}
		if i < len(wantEnvs) && k["environment"] != wantEnvs[i] {
			t.Errorf("key %v: environment %v, want %s", k["id"], k["environment"], wantEnvs[i])
		}
		c, err := time.Parse(time.RFC3339Nano, fmt.Sprint(k["created_at"]))
		if err != nil || c.Before(prev) {
			t.Errorf("created_at %v after %v: not oldest first (%v)", k["created_at"], prev, err)
		}
		prev = c
	}
	if strings.Join(got, ",") != strings.Join(wantIDs, ",") {
		t.Errorf("list order %v, want oldest first %v", got, wantIDs)
	}
}

func testKeyRevoke(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	d := apiCreateKey(t, s, tn.Live, map[string]any{"name": "to revoke"})
	id, text := d["id"].(string), d["key"].(string)
	apiListKeys(t, s, text) // used, so this node has it cached

	r := s.do(t, "DELETE", "/v1/api-keys/"+id, tn.Live, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.Status, r.Raw)
	}
	if got := r.Data(); len(got) != 2 || got["id"] != id || got["revoked"] != true {
		t.Errorf("revoke answered %s, want {id, revoked: true}", r.Raw)
	}
	// At once, on this node: no polling.
	wantError(t, "using a revoked key", s.do(t, "GET", "/v1/api-keys", text, nil), http.StatusUnauthorized, "INVALID_API_KEY")
	wantError(t, "creating with a revoked key", s.do(t, "POST", "/v1/api-keys", text, map[string]any{"name": "x"}), http.StatusUnauthorized, "INVALID_API_KEY")
	if findByID(apiListKeys(t, s, tn.Live), id) != nil {
		t.Errorf("a revoked key is still listed")
	}
	wantError(t, "revoking again", s.do(t, "DELETE", "/v1/api-keys/"+id, tn.Live, nil), http.StatusNotFound, "NOT_FOUND")
	wantError(t, "revoking an unknown id", s.do(t, "DELETE", "/v1/api-keys/01ARZ3NDEKTSV4RRFFQ69G5FAV", tn.Live, nil), http.StatusNotFound, "NOT_FOUND")
	wantError(t, "revoking a malformed id", s.do(t, "DELETE", "/v1/api-keys/nope", tn.Live, nil), http.StatusNotFound, "NOT_FOUND")
	// Irreversible: the operator cannot bring it back either.
	if _, err := cliErr(db, "key", "activate", id); err == nil {
		t.Errorf("key activate brought back a revoked key")
	}
	wantError(t, "a revoked key after key activate", s.do(t, "GET", "/v1/api-keys", text, nil), http.StatusUnauthorized, "INVALID_API_KEY")

	// A key may revoke itself.
	d = apiCreateKey(t, s, tn.Live, map[string]any{"name": "self"})
	self := d["key"].(string)
	if r := s.do(t, "DELETE", "/v1/api-keys/"+d["id"].(string), self, nil); r.Status != http.StatusOK {
		t.Fatalf("self-revoke: %d %s", r.Status, r.Raw)
	}
	wantError(t, "a self-revoked key", s.do(t, "GET", "/v1/api-keys", self, nil), http.StatusUnauthorized, "INVALID_API_KEY")

	// A test (sandbox) key cannot revoke a live key; the live key keeps working.
	live := apiCreateKey(t, s, tn.Live, map[string]any{"name": "live"})
	wantError(t, "test key revoking a live key", s.do(t, "DELETE", "/v1/api-keys/"+live["id"].(string), tn.Test, nil), http.StatusForbidden, "FORBIDDEN")
	apiListKeys(t, s, live["key"].(string))
	// It can revoke a test key.
	test := apiCreateKey(t, s, tn.Test, map[string]any{"name": "test"})
	if r := s.do(t, "DELETE", "/v1/api-keys/"+test["id"].(string), tn.Test, nil); r.Status != http.StatusOK {
		t.Fatalf("test key revoking a test key: %d %s", r.Status, r.Raw)
	}
	wantError(t, "a revoked test key", s.do(t, "GET", "/v1/api-keys", test["key"].(string), nil), http.StatusUnauthorized, "INVALID_API_KEY")
}

func testKeyCap(t *testing.T, s *server, db string) {
	tn := newTenant(t, db, "--plan", "scale") // no rate limit to run into
	var last string
	for i := 3; i <= 100; i++ { // the tenant already has 2 keys
		last = apiCreateKey(t, s, tn.Live, map[string]any{"name": fmt.Sprint("key ", i)})["id"].(string)
	}
	if n := len(apiListKeys(t, s, tn.Live)); n != 100 {
		t.Fatalf("%d keys listed, want 100", n)
	}
	for _, env := range []string{"live", "test"} {
		r := s.do(t, "POST", "/v1/api-keys", tn.Live, map[string]any{"name": "one too many", "environment": env})
		wantError(t, "the 101st key ("+env+")", r, http.StatusBadRequest, "VALIDATION_ERROR")
	}
	// Revoked keys do not count.
	if r := s.do(t, "DELETE", "/v1/api-keys/"+last, tn.Live, nil); r.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.Status, r.Raw)
	}
	apiCreateKey(t, s, tn.Live, map[string]any{"name": "replacement"})
	wantError(t, "the 101st key after a replacement", s.do(t, "POST", "/v1/api-keys", tn.Live, map[string]any{"name": "x"}),
		http.StatusBadRequest, "VALIDATION_ERROR")
	// The cap is per tenant.
	other := newTenant(t, db, "--plan", "scale")
	apiCreateKey(t, s, other.Live, map[string]any{"name": "other tenant"})
}

func TestKeyLastUsed(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := newTenant(t, db, "--plan", "scale") // no rate limit while polling
		d := apiCreateKey(t, s, tn.Live, map[string]any{"name": "watched"})
		id, text := d["id"], d["key"].(string)
		if k := findByID(apiListKeys(t, s, tn.Live), id); k == nil || k["last_used_at"] != nil {
			t.Fatalf("an unused key: %v, want last_used_at null", k)
		}

		before := time.Now().UTC().Truncate(time.Microsecond)
		apiListKeys(t, s, text)
		var used string
		eventually(t, 2*time.Second, "last_used_at set after a use", func() bool {
			k := findByID(apiListKeys(t, s, tn.Live), id)
			used, _ = k["last_used_at"].(string)
			return used != ""
		})
		at, err := time.Parse(time.RFC3339Nano, used)
		if err != nil || !strings.HasSuffix(used, "Z") {
			t.Fatalf("last_used_at %q is not an ISO 8601 UTC timestamp: %v", used, err)
		}
		if at.Before(before) || at.After(time.Now()) {
			t.Errorf("last_used_at %v is not the time of the use (after %v)", at, before)
		}

		// A later use moves it forward.
		before = time.Now().UTC().Truncate(time.Microsecond)
		apiListKeys(t, s, text)
		eventually(t, 2*time.Second, "last_used_at moved by a second use", func() bool {
			k := findByID(apiListKeys(t, s, tn.Live), id)
			v, _ := k["last_used_at"].(string)
			t2, err := time.Parse(time.RFC3339Nano, v)
			return err == nil && !t2.Before(before)
		})

		// The tenant's test key was never used.
		for _, k := range apiListKeys(t, s, tn.Live) {
			if k["environment"] == "test" && k["last_used_at"] != nil {
				t.Errorf("the unused test key has last_used_at %v", k["last_used_at"])
			}
		}
	})
}

// TestKeyRevocationAcrossNodes runs two servers on one PostgreSQL database:
// a key revoked or deactivated through one is refused by the other, which
// had it cached.
func TestKeyRevocationAcrossNodes(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		if !strings.HasPrefix(db, "postgres") {
			t.Skip("several nodes share one database only on PostgreSQL; a SQLite file belongs to one process")
		}
		a := startServer(t, db)
		b := startServer(t, db)
		tn := newTenant(t, db, "--plan", "scale") // no rate limit while polling

		apiListKeys(t, b, tn.Live) // B has the tenant's key list cached
		d := apiCreateKey(t, a, tn.Live, map[string]any{"name": "revoked on A"})
		id, text := d["id"].(string), d["key"].(string)
		eventually(t, operatorChange, "B listing the key created on A", func() bool {
			return findByID(apiListKeys(t, b, tn.Live), id) != nil
		})
		apiListKeys(t, b, text) // cached on B
		if r := a.do(t, "DELETE", "/v1/api-keys/"+id, tn.Live, nil); r.Status != http.StatusOK {
			t.Fatalf("revoke on A: %d %s", r.Status, r.Raw)
		}
		wantError(t, "the revoked key on A", a.do(t, "GET", "/v1/api-keys", text, nil), http.StatusUnauthorized, "INVALID_API_KEY")
		awaitStatus(t, b, text, operatorChange, "B refusing the key revoked on A", http.StatusUnauthorized, "INVALID_API_KEY")
		eventually(t, operatorChange, "B no longer listing the key revoked on A", func() bool {
			return findByID(apiListKeys(t, b, tn.Live), id) == nil
		})

		// Operator changes reach every node too.
		d = apiCreateKey(t, b, tn.Live, map[string]any{"name": "deactivated"})
		id, text = d["id"].(string), d["key"].(string)
		apiListKeys(t, a, text)
		apiListKeys(t, b, text)
		cli(t, db, "key", "deactivate", id)
		awaitStatus(t, b, text, operatorChange, "B refusing the deactivated key", http.StatusForbidden, "KEY_INACTIVE")
		awaitStatus(t, a, text, operatorChange, "A refusing the deactivated key", http.StatusForbidden, "KEY_INACTIVE")
		cli(t, db, "key", "activate", id)
		awaitStatus(t, b, text, operatorChange, "B accepting the reactivated key", http.StatusOK, "")

		cli(t, db, "tenant", "suspend", tn.ID)
		awaitStatus(t, b, tn.Live, operatorChange, "B refusing the suspended tenant", http.StatusForbidden, "TENANT_SUSPENDED")
		cli(t, db, "tenant", "resume", tn.ID)
		awaitStatus(t, b, tn.Live, operatorChange, "B accepting the resumed tenant", http.StatusOK, "")
	})
}
