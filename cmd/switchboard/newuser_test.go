package main

// What a new user runs into: bad input must get a clear error rather than
// be accepted silently, headers must be honoured rather than refused or
// dropped, and error texts must say what to do.

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNewUser(t *testing.T) {
	t.Parallel()
	runShared(t, []string{"--allow-private-webhooks", "--plans", tempPlansFile(t, `{"scale": {"new_contacts_per_day": 1}}`)}, []sharedCase{
		{"NewContactLimitRetryAfter", testNewContactLimitRetryAfter},
		{"RateLimitWholeNumber", testRateLimitWholeNumber},
		{"ContactPhoneNull", testContactPhoneNull},
		{"QueryParameters", testQueryParameters},
		{"PlusInQuery", testPlusInQuery},
		{"AuthorizationScheme", testAuthorizationScheme},
		{"RequestID", testRequestID},
		{"IdempotencyParsed", testIdempotencyParsed},
		{"IdempotencyKeyElsewhere", testIdempotencyKeyElsewhere},
		{"NoBodyRoutes", testNoBodyRoutes},
		{"ErrorTexts", testErrorTexts},
		{"RetryAfterText", testRetryAfterText},
	})
}

// secondsToNextUTCDay is what Retry-After of a daily limit should say at now.
func secondsToNextUTCDay(now time.Time) int {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	return int((next.Sub(now) + time.Second - 1) / time.Second)
}

// testNewContactLimitRetryAfter: 429 NEW_CONTACT_LIMIT carries Retry-After
// until the next UTC day, as every 429 does.
func testNewContactLimitRetryAfter(t *testing.T, s *server, db string) {
	tn := newTenant(t, db, "--plan", "scale") // one new recipient a day
	msgSend(t, s, tn.Test, map[string]any{"to": "+15005550000", "body": "first"})
	before := time.Now()
	r := s.do(t, "POST", "/v1/messages", tn.Test, map[string]any{"to": "+15005550002", "body": "second"})
	after := time.Now()
	msgWantErr(t, r, 429, "NEW_CONTACT_LIMIT", "")
	ra := headerInt(t, r, "Retry-After")
	// Exactly the seconds to the next UTC day, counted at some moment
	// while the request was served.
	if hi, lo := secondsToNextUTCDay(before), secondsToNextUTCDay(after); ra < lo || ra > hi {
		t.Errorf("Retry-After %d, want %d..%d (until the next UTC day)", ra, lo, hi)
	}
	// Known recipients are still allowed.
	msgSend(t, s, tn.Test, map[string]any{"to": "+15005550000", "body": "again"})
}

// testRateLimitWholeNumber: a rate_limit written 5.0 is the whole number 5.
func testRateLimitWholeNumber(t *testing.T, s *server, db string) {
	tn := newTenant(t, db) // trial: ceiling 50
	for body, want := range map[string]float64{`{"name":"a","rate_limit":5.0}`: 5, `{"name":"b","rate_limit":1e1}`: 10, `{"name":"c","rate_limit":50.000}`: 50} {
		r := s.do(t, "POST", "/v1/api-keys", tn.Live, body)
		if r.Status != http.StatusCreated || r.Data()["rate_limit"] != want {
			t.Errorf("%s: %d %s, want 201 with rate_limit %v", body, r.Status, r.Raw, want)
		}
	}
	for _, bad := range []string{"5.5", "0.0", `"5"`, "50.5", "51.0"} {
		r := s.do(t, "POST", "/v1/api-keys", tn.Live, `{"name":"x","rate_limit":`+bad+`}`)
		msgWantErr(t, r, 400, "VALIDATION_ERROR", "rate_limit")
	}
}

// testContactPhoneNull: {"phone": null} cannot remove a contact's phone,
// and is not taken for leaving it out.
func testContactPhoneNull(t *testing.T, s *server, db string) {
	tn := ctTenant(t, db)
	c := ctCreate(t, s, tn.Test, map[string]any{"phone": "+15005550000", "name": "Ada"})
	r := s.do(t, "PATCH", "/v1/contacts/"+c["id"].(string), tn.Test, `{"phone": null, "name": "Grace"}`)
	msgWantErr(t, r, 400, "VALIDATION_ERROR", "phone")
	if got := ctGet(t, s, tn.Test, c["id"].(string)); got["phone"] != "+15005550000" || got["name"] != "Ada" {
		t.Errorf("the refused PATCH changed the contact: %v", got)
	}
	// Leaving phone out still leaves it as it is.
	r = s.do(t, "PATCH", "/v1/contacts/"+c["id"].(string), tn.Test, `{"name": "Grace"}`)
	if r.Status != 200 || r.Data()["phone"] != "+15005550000" || r.Data()["name"] != "Grace" {
		t.Errorf("PATCH without phone: %d %s", r.Status, r.Raw)
	}
}

// testQueryParameters: every route refuses a query parameter it does not
// have, one given twice or given empty, and a cursor that is not an id;
// before, GET /v1/messages?campaign_id=X answered every message.
func testQueryParameters(t *testing.T, s *server, db string) {
	tn := ctTenant(t, db)
	key := tn.Test
	msgSend(t, s, key, map[string]any{"to": "+15005550000", "body": "direct"})
	hook := s.do(t, "POST", "/v1/webhooks", key, map[string]any{"url": "http://127.0.0.1:9/h", "events": []string{"message.failed"},
		"secret": "a-secret-of-sixteen-or-more"})
	if hook.Status != 201 {
		t.Fatalf("webhook: %d %s", hook.Status, hook.Raw)
	}
	hookID := hook.Data()["id"].(string)
	lists := []string{"/v1/messages", "/v1/contacts", "/v1/templates", "/v1/campaigns", "/v1/webhooks/" + hookID + "/deliveries"}
	for _, path := range lists {
		for query, field := range map[string]string{
			"?after=garbage":                     "after",
			"?after=01ARZ3NDEKTSV4RRFFQ69G5FA":   "after", // 25 characters
			"?after=01arz3ndektsv4rrffq69g5fav":  "after", // not as ids are written
			"?limit=10&limit=20":                 "limit",
			"?limit=":                            "limit",
			"?page=2":                            "page",
			"?sort=asc&limit=5":                  "sort",
			"?starting_after=01ARZ3NDEKTSV4RRFF": "starting_after",
		} {
			r := s.do(t, "GET", path+query, key, nil)
			msgWantErr(t, r, 400, "VALIDATION_ERROR", field)
		}
		if r := s.do(t, "GET", path+"?limit=1&after=01ARZ3NDEKTSV4RRFFQ69G5FAV", key, nil); r.Status != 200 {
			t.Errorf("GET %s with a well-formed cursor: %d %s", path, r.Status, r.Raw)
		}
	}
	// Routes that take no parameter refuse any.
	for _, path := range []string{"/v1/api-keys", "/v1/webhooks", "/v1/phones", "/v1/webhooks/" + hookID, "/v1/messages/01ARZ3NDEKTSV4RRFFQ69G5FAV"} {
		r := s.do(t, "GET", path+"?verbose=1", key, nil)
		msgWantErr(t, r, 400, "VALIDATION_ERROR", "verbose")
	}
	r := s.do(t, "POST", "/v1/messages?dry_run=true", key, map[string]any{"to": "+15005550000", "body": "x"})
	msgWantErr(t, r, 400, "VALIDATION_ERROR", "dry_run")
	// The campaign filter filters.
	c := cmpCreate(t, s, key, map[string]any{"name": "Filter", "body": "from a campaign", "to": []string{"+15005550000"}})
	cmpLaunch(t, s, key, c["id"].(string))
	cmpAwait(t, s, key, c["id"].(string), "the campaign's message", func(c map[string]any) bool { return cmpCounts(c)["pending"] == 0 })
	all := s.do(t, "GET", "/v1/messages", key, nil).List()
	only := s.do(t, "GET", "/v1/messages?campaign_id="+c["id"].(string), key, nil).List()
	if len(all) != 2 || len(only) != 1 || only[0]["campaign_id"] != c["id"] || only[0]["body"] != "from a campaign" {
		t.Errorf("all %d messages, %d of the campaign: %v", len(all), len(only), only)
	}
	msgWantErr(t, s.do(t, "GET", "/v1/messages?campaign_id=nope", key, nil), 400, "VALIDATION_ERROR", "campaign_id")
}

// testPlusInQuery: a number written with a bare "+" in a query string
// arrives as a space; the error says to write it %2B.
func testPlusInQuery(t *testing.T, s *server, db string) {
	tn := ctTenant(t, db)
	for path, field := range map[string]string{"/v1/messages?to=+15005550000": "to", "/v1/messages?from=+15005550000": "from", "/v1/contacts?phone=+15005550000": "phone"} {
		r := s.do(t, "GET", path, tn.Test, nil)
		msgWantErr(t, r, 400, "INVALID_PHONE_NUMBER", field)
		if msg := r.Body["error"].(string); !strings.Contains(msg, "%2B") {
			t.Errorf("GET %s: %q does not say to write + as %%2B", path, msg)
		}
		if r := s.do(t, "GET", strings.Replace(path, "+", "%2B", 1), tn.Test, nil); r.Status != 200 {
			t.Errorf("GET %s with %%2B: %d %s", path, r.Status, r.Raw)
		}
	}
}

// testAuthorizationScheme: "bearer" in any case authenticates (RFC 9110).
func testAuthorizationScheme(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	for _, scheme := range []string{"bearer", "BEARER", "Bearer", "bEaReR"} {
		r := s.do(t, "GET", "/v1/api-keys", "", nil, "Authorization", scheme+" "+tn.Live)
		if r.Status != 200 {
			t.Errorf("%s: %d %s", scheme, r.Status, r.Raw)
		}
	}
	for _, h := range []string{"Bearer" + tn.Live, "Bearer\t" + tn.Live, "Token " + tn.Live} {
		r := s.do(t, "GET", "/v1/api-keys", "", nil, "Authorization", h)
		msgWantErr(t, r, 401, "INVALID_API_KEY", "")
	}
}

// testRequestID: a client's own X-Request-Id, when it is a sane token, is
// kept and echoed; anything else is replaced by one the server makes.
func testRequestID(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	for _, id := range []string{"req-1234", "a", "0f8fad5b-d9cb-469f-a165-70867728950e", "trace:abc.DEF_9", strings.Repeat("x", 128)} {
		for _, r := range []*response{
			s.do(t, "GET", "/v1/api-keys", tn.Live, nil, "X-Request-Id", id),
			s.do(t, "GET", "/v1/nope", tn.Live, nil, "X-Request-Id", id),         // the envelope's 404
			s.do(t, "GET", "/v1/api-keys", "", nil, "X-Request-Id", id),          // 401
			s.do(t, "GET", "/healthz", "", nil, "X-Request-Id", id),              // public
			s.do(t, "DELETE", "/healthz", "", nil, "X-Request-Id", id),           // 405
			s.do(t, "GET", "/v1/messages?x=1", tn.Live, nil, "X-Request-Id", id), // 400
		} {
			if got := r.Header.Get("X-Request-Id"); got != id {
				t.Errorf("X-Request-Id %q echoed as %q (status %d)", id, got, r.Status)
			}
		}
	}
	made := regexp.MustCompile(`^req_[0-9a-f]{12}_[0-9a-z]+$`)
	for _, id := range []string{"has space", strings.Repeat("x", 129), "a/b", "é", "<script>", "a,b"} {
		r := s.do(t, "GET", "/v1/api-keys", tn.Live, nil, "X-Request-Id", id)
		if got := r.Header.Get("X-Request-Id"); got == id || !made.MatchString(got) {
			t.Errorf("X-Request-Id %q: answered %q, want one the server made", id, got)
		}
	}
}

// testIdempotencyParsed: the same request with other spacing, key order or
// escapes is a replay, not a conflict; another value is a conflict.
func testIdempotencyParsed(t *testing.T, s *server, db string) {
	tn := newTenant(t, db, "--plan", "growth")
	first := s.do(t, "POST", "/v1/messages", tn.Test, `{"to":"+15005550000","body":"Your order has shipped","channel":"sms"}`, "Idempotency-Key", "order-42")
	if first.Status != 202 {
		t.Fatalf("first: %d %s", first.Status, first.Raw)
	}
	for _, same := range []string{
		`{"to": "+15005550000", "body": "Your order has shipped", "channel": "sms"}`,
		"{\n  \"channel\": \"sms\",\n  \"body\": \"Your order has shipped\",\n  \"to\": \"+15005550000\"\n}\n",
		`{"body":"Your order has shipped","to":"\u002b15005550000","channel":"sms"}`,
	} {
		r := s.do(t, "POST", "/v1/messages", tn.Test, same, "Idempotency-Key", "order-42")
		if r.Status != 202 || string(r.Raw) != string(first.Raw) || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the same request written %q: %d %s (replayed %q), want the first answer replayed", same, r.Status, r.Raw, r.Header.Get("Idempotent-Replayed"))
		}
	}
	for _, other := range []string{
		`{"to":"+15005550000","body":"Your order has shipped!","channel":"sms"}`,
		`{"to":"+15005550000","body":"Your order has shipped"}`, // channel left to its default: another request
	} {
		msgWantErr(t, s.do(t, "POST", "/v1/messages", tn.Test, other, "Idempotency-Key", "order-42"), 409, "IDEMPOTENCY_CONFLICT", "")
	}
	if n := len(s.do(t, "GET", "/v1/messages", tn.Test, nil).List()); n != 1 {
		t.Errorf("%d messages stored, want 1", n)
	}
}

// testIdempotencyKeyElsewhere: a POST that does not honour Idempotency-Key
// refuses it, rather than let a retry create a second webhook.
func testIdempotencyKeyElsewhere(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	for path, body := range map[string]any{
		"/v1/webhooks":  map[string]any{"url": "http://127.0.0.1:9/h", "events": []string{"message.failed"}, "secret": "a-secret-of-sixteen-or-more"},
		"/v1/templates": map[string]any{"name": "t", "body": "hi"},
		"/v1/api-keys":  map[string]any{"name": "k"},
	} {
		r := s.do(t, "POST", path, tn.Test, body, "Idempotency-Key", "k1")
		msgWantErr(t, r, 400, "VALIDATION_ERROR", "Idempotency-Key")
	}
	if n := len(s.do(t, "GET", "/v1/webhooks", tn.Test, nil).List()); n != 0 {
		t.Errorf("a refused request created %d webhooks", n)
	}
	// Reads ignore it, as they are safe to repeat anyway.
	if r := s.do(t, "GET", "/v1/webhooks", tn.Test, nil, "Idempotency-Key", "k1"); r.Status != 200 {
		t.Errorf("GET with Idempotency-Key: %d %s", r.Status, r.Raw)
	}
}

// testNoBodyRoutes: a route that takes no body refuses a body with fields,
// which would otherwise be ignored (a launch "at" a time, say).
func testNoBodyRoutes(t *testing.T, s *server, db string) {
	tn := ctTenant(t, db)
	c := cmpCreate(t, s, tn.Test, map[string]any{"name": "Later", "body": "hi", "to": []string{"+15005550000"}})
	id := c["id"].(string)
	msgWantErr(t, s.do(t, "POST", "/v1/campaigns/"+id+"/launch", tn.Test, map[string]any{"at": "2030-01-01T00:00:00Z"}), 400, "VALIDATION_ERROR", "at")
	msgWantErr(t, s.do(t, "POST", "/v1/campaigns/"+id+"/launch", tn.Test, "now"), 400, "VALIDATION_ERROR", "body")
	if got := cmpGet(t, s, tn.Test, id); got["status"] != "draft" {
		t.Fatalf("a refused launch launched: %v", got)
	}
	if r := s.do(t, "POST", "/v1/campaigns/"+id+"/launch", tn.Test, "{}"); r.Status != 202 {
		t.Errorf("launch with {}: %d %s", r.Status, r.Raw)
	}
	if r := s.do(t, "POST", "/v1/campaigns/"+id+"/cancel", tn.Test, nil); r.Status != 200 {
		t.Errorf("cancel without a body: %d %s", r.Status, r.Raw)
	}
}

// testErrorTexts: error texts say what is wrong.
func testErrorTexts(t *testing.T, s *server, db string) {
	tn := newTenant(t, db)
	text := func(r *response) string { s, _ := r.Body["error"].(string); return s }

	r := s.do(t, "POST", "/v1/templates", tn.Test, map[string]any{"name": "Shipped", "body": "hi"})
	msgWantErr(t, r, 400, "VALIDATION_ERROR", "name")
	if msg := text(r); strings.Contains(msg, "required") || !strings.Contains(msg, `"shipped"`) || !strings.Contains(msg, "lower case") {
		t.Errorf("template name Shipped: %q; want it to say lower case, suggesting \"shipped\"", msg)
	}
	r = s.do(t, "POST", "/v1/templates", tn.Test, map[string]any{"name": "greeting", "body": "Héllo {{ name"})
	msgWantErr(t, r, 400, "VALIDATION_ERROR", "body")
	if msg := text(r); strings.Contains(msg, "tmpl:") || !strings.Contains(msg, "unclosed placeholder at character 7") {
		t.Errorf("template syntax: %q; want the place in characters and no package prefix", msg)
	}
	r = s.do(t, "POST", "/v1/messages", tn.Test, map[string]any{"to": "+15005550000", "template": "nope", "data": map[string]any{}})
	msgWantErr(t, r, 400, "INVALID_TEMPLATE", "")
	if msg := text(r); !strings.Contains(msg, "test environment") {
		t.Errorf("unknown template: %q; want it to name the environment", msg)
	}
	for path, name := range map[string]string{
		"/v1/messages/01ARZ3NDEKTSV4RRFFQ69G5FAV": "message", "/v1/templates/01ARZ3NDEKTSV4RRFFQ69G5FAV": "template",
		"/v1/webhooks/01ARZ3NDEKTSV4RRFFQ69G5FAV": "webhook", "/v1/phones/01ARZ3NDEKTSV4RRFFQ69G5FAV": "phone",
	} {
		r := s.do(t, "GET", path, tn.Test, nil)
		msgWantErr(t, r, 404, "NOT_FOUND", "")
		if msg := text(r); !strings.HasPrefix(msg, "No "+name+" with this id exists") {
			t.Errorf("GET %s: %q, want it to name the %s", path, msg, name)
		}
	}
	r = s.do(t, "POST", "/v1/webhooks", tn.Test, map[string]any{"url": "http://127.0.0.1:9/h", "events": []string{"message.sent"}, "secret": "a-secret-of-sixteen-or-more"})
	msgWantErr(t, r, 400, "VALIDATION_ERROR", "events")
	if msg := text(r); strings.Contains(msg, "[") || !strings.Contains(msg, "message.delivered, message.failed, message.received") {
		t.Errorf("unknown event: %q", msg)
	}
}

// testRetryAfterText: "Retry after 1 second", not "1 seconds"; the text
// and the Retry-After header agree.
func testRetryAfterText(t *testing.T, s *server, db string) {
	tn := newTenant(t, db, "--plan", "growth")
	k := apiCreateKey(t, s, tn.Live, map[string]any{"name": "per second", "rate_limit": 60})["key"].(string)
	var r *response
	for i := 0; i < 600; i++ {
		if r = s.do(t, "GET", "/v1/api-keys", k, nil); r.Status == 429 {
			break
		}
	}
	msgWantErr(t, r, 429, "RATE_LIMIT_EXCEEDED", "")
	ra := headerInt(t, r, "Retry-After")
	want := fmt.Sprintf("Retry after %d seconds.", ra)
	if ra == 1 {
		want = "Retry after 1 second."
	}
	if msg := r.Body["error"].(string); !strings.HasSuffix(msg, want) {
		t.Errorf("%q (Retry-After %d), want it to end %q", msg, ra, want)
	}
}
