package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	sb "github.com/switchboard/switchboard"
)

// TestRequestHash: the same request with other spacing, key order or string
// escapes has the same hash; another value, another hash.
func TestRequestHash(t *testing.T) {
	base := requestHash([]byte(`{"to":"+15005550000","body":"Hi","data":{"a":1,"b":"x"}}`))
	for _, same := range []string{
		`{"to": "+15005550000", "body": "Hi", "data": {"a": 1, "b": "x"}}`,
		"\n{\"data\":{\"b\":\"x\",\"a\":1},\"body\":\"Hi\",\"to\":\"+15005550000\"}\n",
		`{"to":"\u002b15005550000","body":"\u0048i","data":{"a":1,"b":"x"}}`,
	} {
		if requestHash([]byte(same)) != base {
			t.Errorf("%s: another hash", same)
		}
	}
	for _, other := range []string{
		`{"to":"+15005550000","body":"Hi","data":{"a":1.0,"b":"x"}}`, // numbers as written
		`{"to":"+15005550000","body":"Hi ","data":{"a":1,"b":"x"}}`,
		`{"to":"+15005550000","body":"Hi","data":{"a":1,"b":"x"},"channel":"auto"}`,
		`not json`,
	} {
		if requestHash([]byte(other)) == base {
			t.Errorf("%s: the same hash", other)
		}
	}
	// Not JSON: the bytes decide.
	if requestHash([]byte("not json")) != sha256Hex([]byte("not json")) || requestHash([]byte("{} {}")) != sha256Hex([]byte("{} {}")) {
		t.Error("a body that is not one JSON value is not hashed as bytes")
	}
}

func TestSaneRequestID(t *testing.T) {
	for _, ok := range []string{"a", "req-1", "A.b_c:d-9", strings.Repeat("x", 128)} {
		if !saneRequestID(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 129), "a b", "a\nb", "a/b", "é", "a\"b", "a,b", "<x>"} {
		if saneRequestID(bad) {
			t.Errorf("%q kept", bad)
		}
	}
}

// TestCheckQuery: unknown, repeated, empty and malformed parameters are
// each VALIDATION_ERROR naming them; known ones pass.
func TestCheckQuery(t *testing.T) {
	allowed := []string{"limit", "after"}
	for query, field := range map[string]string{
		"limit=5&after=01ARZ3NDEKTSV4RRFFQ69G5FAV": "",
		"":                    "",
		"limit=5&limit=6":     "limit",
		"after=":              "after",
		"bogus=1":             "bogus",
		"limit=1&zzz=1&aaa=2": "aaa", // the first in sorted order
		"limit=%zz":           "query",
		"limit=1;after=x":     "query",
	} {
		r := httptest.NewRequest("GET", "/v1/templates?"+query, nil)
		r.Pattern = "GET /v1/templates"
		err := checkQuery(r, allowed)
		got := ""
		if err != nil {
			if sb.ErrorCode(err) != sb.CodeValidation {
				t.Errorf("%q: %v", query, err)
			}
			var e *sb.Error
			e, _ = err.(*sb.Error)
			got, _ = e.Details["field"].(string)
		}
		if got != field {
			t.Errorf("%q: field %q (%v), want %q", query, got, err, field)
		}
	}
	r := httptest.NewRequest("GET", "/v1/api-keys?x=1", nil)
	r.Pattern = "GET /v1/api-keys"
	if err := checkQuery(r, nil); err == nil || !strings.Contains(err.Error(), "GET /v1/api-keys takes none") {
		t.Errorf("a route without parameters: %v", err)
	}
}
