package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// fuzzCreateKeyFields are the exact body fields of POST /v1/api-keys
// (additionalProperties: false in the OpenAPI document).
var fuzzCreateKeyFields = map[string]bool{"name": true, "rate_limit": true, "environment": true}

// fuzzCheckDecodeErr asserts err is nil or a VALIDATION_ERROR naming a field, and
// returns that field ("" for nil).
func fuzzCheckDecodeErr(t *testing.T, what string, data []byte, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var e *sb.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s(%q): error %v (%T) is not an *sb.Error", what, data, err, err)
	}
	if e.Code != sb.CodeValidation {
		t.Fatalf("%s(%q): code %s, want %s", what, data, e.Code, sb.CodeValidation)
	}
	field, ok := e.Details["field"].(string)
	if !ok || field == "" {
		t.Fatalf("%s(%q): details.field = %#v, want a non-empty string (error %v)", what, data, e.Details["field"], err)
	}
	return field
}

// FuzzDecodeBody drives decodeBytes, the strict JSON body decoder, with
// arbitrary bytes, into the create-key request and into a generic map.
func FuzzDecodeBody(f *testing.F) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	seeds := []string{
		`{"name":"ci","rate_limit":10,"environment":"test"}`,
		`{"name":"ci"}`,
		`{}`,
		` {"name" : "a" } `,
		"\t\r\n{\"name\":\"x\"}\n",
		`{"name":"a","rate_limit":null,"environment":null}`,
		`{"name":"\u00e9\ud83d\ude00\u0000"}`,
		`{"name":"\ud800"}`,              // lone surrogate
		"{\"name\":\"\xff\xfe\"}",        // invalid UTF-8 in a string
		"{\"\xff\":1}",                   // invalid UTF-8 in a key
		"\xef\xbb\xbf{\"name\":\"bom\"}", // byte-order mark
		`{"name":"a","name":"b"}`,        // duplicate keys
		`{"name":"a","name":5}`,
		`{"NAME":"upper"}`,
		`{"Name":"a","Rate_Limit":5}`,
		`{"rate_limit":1}`,
		`{"rate_limit":0}`,
		`{"rate_limit":-0}`,
		`{"rate_limit":1.5}`,
		`{"rate_limit":1e2}`,
		`{"rate_limit":1e309}`,
		`{"rate_limit":-1e309}`,
		`{"rate_limit":99999999999999999999}`,
		`{"rate_limit":"10"}`,
		`{"rate_limit":true}`,
		`{"rate_limit":[1]}`,
		`{"rate_limit":{"a":1}}`,
		`{"name":5}`,
		`{"name":["a"]}`,
		`{"name":{"nested":{"deeper":[1,2,{"x":null}]}}}`,
		`{"environment":"prod"}`,
		`{"unknown":1}`,
		`{"":1}`,
		`{"\"":1}`,
		`{"a\"":1}`,
		`{"\u0001":1}`,
		`{"name":"a"} trailing`,
		`{"name":"a"}{"name":"b"}`,
		`{"name":"a"}]`,
		`{"name":"a"},`,
		`{"name":"a"`,
		`{"name":}`,
		`{"name":"a",}`,
		`{name:"a"}`,
		`{'name':'a'}`,
		`[]`,
		`[{"name":"a"}]`,
		`"name"`,
		`42`,
		`-0`,
		`1e309`,
		`true`,
		`null`,
		`nul`,
		``,
		` `,
		"\x00",
		"{\"name\":\"a\"}\x00",
		`{"a":` + deep(100) + `}`,
		deep(10001),
		`{"a":{"b":{"c":{"d":{"e":{"f":{}}}}}}}`,
		`{"a":1e309}`,
		`{"a":-0,"b":0.1,"c":1E+2,"d":-1.5e-300}`,
		`{"name":"` + strings.Repeat("x", 4096) + `"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := json.Valid(data)

		// The create-key request.
		var req createKeyRequest
		err := decodeBytes(data, &req)
		field := fuzzCheckDecodeErr(t, "decodeBytes struct", data, err)
		if err == nil && !valid {
			t.Fatalf("decodeBytes(%q) into the create-key request accepted invalid JSON: %+v", data, req)
		}

		// A generic object.
		var m map[string]any
		merr := decodeBytes(data, &m)
		fuzzCheckDecodeErr(t, "decodeBytes map", data, merr)
		if merr == nil && !valid {
			t.Fatalf("decodeBytes(%q) into a map accepted invalid JSON: %#v", data, m)
		}

		// A field named in an error is a field of the request or a key
		// the body really holds.
		if err != nil && field != "body" && !fuzzCreateKeyFields[field] && merr == nil {
			if _, ok := m[field]; !ok {
				t.Fatalf("decodeBytes(%q): details.field %q names neither a request field nor a key of the body (error %v)", data, field, err)
			}
		}

		if err == nil {
			// Strict: a body the request accepts holds only its exact
			// fields, with the values the request took.
			if merr != nil {
				t.Fatalf("decodeBytes(%q): accepted as the request but not as an object: %v", data, merr)
			}
			for k, v := range m {
				if !fuzzCreateKeyFields[k] {
					t.Fatalf("decodeBytes(%q): accepted unknown field %q", data, k)
				}
				var got any
				switch k {
				case "name":
					if req.Name != nil {
						got = *req.Name
					}
				case "rate_limit":
					if req.RateLimit != nil {
						got = float64(*req.RateLimit)
					}
				case "environment":
					if req.Environment != nil {
						got = *req.Environment
					}
				}
				if !reflect.DeepEqual(got, v) {
					t.Fatalf("decodeBytes(%q): field %q decoded as %#v, the body holds %#v", data, k, got, v)
				}
			}

			// Round trip.
			enc, jerr := json.Marshal(req)
			if jerr != nil {
				t.Fatalf("re-encoding %+v: %v", req, jerr)
			}
			var again createKeyRequest
			if err := decodeBytes(enc, &again); err != nil {
				t.Fatalf("decodeBytes(%q) (re-encoded from %q): %v", enc, data, err)
			}
			if !reflect.DeepEqual(req, again) {
				t.Fatalf("round trip of %q: %+v != %+v (via %q)", data, req, again, enc)
			}
		}
		if merr == nil {
			enc, jerr := json.Marshal(m)
			if jerr != nil {
				t.Fatalf("re-encoding %#v: %v", m, jerr)
			}
			var again map[string]any
			if err := decodeBytes(enc, &again); err != nil {
				t.Fatalf("decodeBytes(%q) (re-encoded from %q): %v", enc, data, err)
			}
			if !reflect.DeepEqual(m, again) {
				t.Fatalf("round trip of %q: %#v != %#v (via %q)", data, m, again, enc)
			}
		}
	})
}

// fuzzOnlyReader hides the concrete type of a reader, so that the request has no
// known Content-Length (as with a chunked body).
type fuzzOnlyReader struct{ io.Reader }

func TestDecodeTooLarge(t *testing.T) {
	// exactly MaxBodyBytes of valid JSON: {"name":"x"} padded with whitespace.
	const head, tail = `{"name":"x"`, `}`
	exact := head + strings.Repeat(" \t\r\n", MaxBodyBytes)[:MaxBodyBytes-len(head)-len(tail)] + tail
	if len(exact) != MaxBodyBytes || !json.Valid([]byte(exact)) {
		t.Fatalf("bad fixture: %d bytes, valid %v", len(exact), json.Valid([]byte(exact)))
	}
	// One byte more, still valid JSON: only the size is wrong.
	over := exact + " "
	// One byte more of garbage.
	overGarbage := strings.Repeat("x", MaxBodyBytes+1)

	cases := []struct {
		name string
		body string
		want sb.Code // "" for success
	}{
		{"exactly 1 MiB", exact, ""},
		{"1 MiB + 1 valid JSON", over, sb.CodePayloadTooLarge},
		{"1 MiB + 1 garbage", overGarbage, sb.CodePayloadTooLarge},
	}
	for _, c := range cases {
		for _, chunked := range []bool{false, true} {
			var body io.Reader = strings.NewReader(c.body)
			if chunked {
				body = fuzzOnlyReader{body}
			}
			r := httptest.NewRequest(http.MethodPost, "/v1/api-keys", body)
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			var req createKeyRequest
			err := decode(w, r, &req)
			if got := sb.ErrorCode(err); got != c.want {
				t.Errorf("%s (chunked %v): code %q (err %v), want %q", c.name, chunked, got, err, c.want)
				continue
			}
			if c.want == "" && (req.Name == nil || *req.Name != "x") {
				t.Errorf("%s (chunked %v): name = %v, want \"x\"", c.name, chunked, req.Name)
			}
			if c.want == sb.CodePayloadTooLarge && statusOf[sb.ErrorCode(err)] != http.StatusRequestEntityTooLarge {
				t.Errorf("%s: status %d, want 413", c.name, statusOf[sb.ErrorCode(err)])
			}
		}
	}

	// A large body that fits is decoded in full, not cut at some buffer size.
	name := strings.Repeat("n", MaxBodyBytes-len(`{"name":""}`))
	r := httptest.NewRequest(http.MethodPost, "/v1/api-keys", bytes.NewReader([]byte(`{"name":"`+name+`"}`)))
	var req createKeyRequest
	if err := decode(httptest.NewRecorder(), r, &req); err != nil || req.Name == nil || *req.Name != name {
		t.Fatalf("1 MiB name: err %v, name length %d", err, len(fuzzDeref(req.Name)))
	}
}

func fuzzDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestDecodeExactFieldNames: field names match exactly, at any depth, and an
// error names the offending key as the body spelled it.
func TestDecodeExactFieldNames(t *testing.T) {
	type inner struct {
		Value int `json:"value"`
	}
	type Embedded struct {
		Flat string `json:"flat"`
	}
	type body struct {
		Embedded
		Name     string `json:"name"`
		Untagged string
		Skip     string           `json:"-"`
		Dash     string           `json:"-,"`
		Inner    *inner           `json:"inner"`
		List     []inner          `json:"list"`
		ByKey    map[string]inner `json:"by_key"`
		Free     map[string]any   `json:"free"`
		At       *time.Time       `json:"at"`
		Raw      json.RawMessage  `json:"raw"`
	}
	cases := []struct {
		in    string
		field string // "" when accepted
	}{
		{`{"name":"a","flat":"b","Untagged":"c","-":"d","inner":{"value":1},"list":[{"value":2}],"by_key":{"K":{"value":3}},"free":{"ANY":{"Thing":1}},"at":"2025-01-01T00:00:00Z","raw":{"X":1}}`, ""},
		{`{"NAME":"a"}`, "NAME"},
		{`{"Flat":"a"}`, "Flat"},
		{`{"untagged":"a"}`, "untagged"},
		{`{"Skip":"a"}`, "Skip"},
		{`{"inner":{"Value":1}}`, "Value"},
		{`{"list":[{"value":1},{"VALUE":2}]}`, "VALUE"},
		{`{"by_key":{"k":{"vAlue":3}}}`, "vAlue"},
		{`{"nope":1}`, "nope"},
		{`{"":1}`, "body"},
		{`{"a\"":1}`, `a"`},
		{`{"\u00e9":1}`, "é"},
		{`{"\u212a":1}`, "\u212a"}, // Kelvin sign, which folds to k
	}
	for _, c := range cases {
		var v body
		err := decodeBytes([]byte(c.in), &v)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.in, err)
			}
			continue
		}
		var e *sb.Error
		if !errors.As(err, &e) || e.Code != sb.CodeValidation || e.Details["field"] != c.field {
			t.Errorf("%s: error %v, want VALIDATION_ERROR with field %q", c.in, err, c.field)
		}
	}
}
