package httpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The API reference, docs/api.md, is written for people; this file keeps it
// and the OpenAPI document the server serves from drifting apart. The page
// follows a few conventions so that a test can read it:
//
//   - every operation has a heading of its own, "### `METHOD /path`", and
//     its section (up to the next heading) names its query and header
//     parameters and its statuses other than the common ones;
//   - a table of an object's fields is preceded by a line
//     "<!-- schema: Name [Name...] -->" naming the component schemas it
//     documents: its rows are exactly their properties, one "`name`" a row;
//   - the section "## Every error code" has one row per code.

const apiReferencePath = "../docs/api.md"

// commonStatuses are the statuses most operations answer (the envelope's
// 400, authentication, the rate limits, the body limit, failures), which the
// page documents once rather than under every route.
var commonStatuses = map[string]bool{"400": true, "401": true, "403": true, "413": true, "429": true, "500": true, "503": true}

var (
	routeHeading = regexp.MustCompile("(?m)^(#{2,4}) `(GET|POST|PUT|PATCH|DELETE) (/[^`\\s]*)`\\s*$")
	anyHeading   = regexp.MustCompile(`(?m)^#{1,4} `)
	schemaMarker = regexp.MustCompile(`(?m)^<!-- schema: ([A-Za-z0-9 ]+) -->\n`)
	codeToken    = regexp.MustCompile("`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`")
	firstCell    = regexp.MustCompile("^\\| `([^`]+)` \\|")
)

// TestAPIReference: docs/api.md documents every operation, schema property,
// parameter, header, enum value and error code of the served OpenAPI
// document, and documents no operation, property or code it does not have.
func TestAPIReference(t *testing.T) {
	t.Parallel()
	doc, md := apiReferenceInputs(t)
	for _, p := range apiReferenceProblems(doc, md) {
		t.Error(p)
	}
}

// TestAPIReferenceFindsDrift breaks the document or the page in each way
// the check is meant to catch, and expects it to say so.
func TestAPIReferenceFindsDrift(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		doc     func(map[string]any)
		md      func(string) string
		problem string
	}{
		{"an operation without a heading", nil, func(md string) string {
			return strings.Replace(md, "### `GET /v1/messages/{id}`\n", "### Get a message\n", 1)
		}, "GET /v1/messages/{id} has no heading"},
		{"a heading of no operation", nil, func(md string) string {
			return md + "\n### `GET /v1/nothing`\n\nNothing.\n"
		}, "GET /v1/nothing, which the OpenAPI document does not have"},
		{"a new operation", func(doc map[string]any) {
			dig(doc, "paths", "/v1/messages")["put"] = map[string]any{"responses": map[string]any{"200": map[string]any{"description": "ok"}}}
		}, nil, "PUT /v1/messages has no heading"},
		{"a query parameter left out", nil, func(md string) string {
			return strings.Replace(md, "| `created_before` | only messages created strictly before this time (RFC 3339) |\n", "", 1)
		}, "GET /v1/messages: its section does not name the parameter `created_before`"},
		{"a status left out", nil, func(md string) string {
			return strings.Replace(md, "Launching anything but a draft is 409\n`CAMPAIGN_NOT_DRAFT`", "Launching anything but a draft is refused", 1)
		}, "POST /v1/campaigns/{id}/launch: its section does not say 409"},
		{"a property without a row", nil, func(md string) string {
			return strings.Replace(md, "| `failed_at` | timestamp or null | |\n", "", 1)
		}, "Message has the property failed_at"},
		{"a row of no property", nil, func(md string) string {
			return strings.Replace(md, "| `failed_at` | timestamp or null | |\n", "| `failed_at` | timestamp or null | |\n| `billed_at` | timestamp or null | |\n", 1)
		}, "the table of Message documents billed_at"},
		{"a new property", func(doc map[string]any) {
			dig(doc, "components", "schemas", "Message", "properties")["billed_units"] = map[string]any{"type": "string"}
		}, nil, "Message has the property billed_units"},
		{"a new schema", func(doc map[string]any) {
			dig(doc, "components", "schemas")["Thing"] = map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}
		}, nil, "the schema Thing has no table"},
		{"a new enum value", func(doc map[string]any) {
			dig(doc, "components", "schemas", "Campaign", "properties", "status")["enum"] = []any{"draft", "running", "paused", "completed", "canceled"}
		}, nil, "the value `paused`"},
		{"a new error code", func(doc map[string]any) {
			s := dig(doc, "components", "schemas", "ErrorCode")
			s["enum"] = append(s["enum"].([]any), "PHONE_QUARANTINED")
		}, nil, "the error code PHONE_QUARANTINED"},
		{"a code of no error", nil, func(md string) string {
			return md + "\nA send may also answer `NO_SUCH_CODE`.\n"
		}, "NO_SUCH_CODE, which is not an error code"},
		{"a new header", func(doc map[string]any) {
			dig(doc, "components", "headers")["X-Thing"] = map[string]any{"schema": map[string]any{"type": "string"}}
		}, nil, "the header or parameter `X-Thing`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc, md := apiReferenceInputs(t)
			if c.doc != nil {
				c.doc(doc)
			}
			if c.md != nil {
				broken := c.md(md)
				if broken == md {
					t.Fatal("the case changes nothing of docs/api.md: update it")
				}
				md = broken
			}
			problems := apiReferenceProblems(doc, md)
			for _, p := range problems {
				if strings.Contains(p, c.problem) {
					return
				}
			}
			t.Errorf("no problem mentions %q; got %q", c.problem, problems)
		})
	}
}

// apiReferenceInputs returns the merged OpenAPI document, decoded, and the
// text of docs/api.md.
func apiReferenceInputs(t *testing.T) (map[string]any, string) {
	t.Helper()
	raw, err := openAPIMerged()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(apiReferencePath)
	if err != nil {
		t.Fatal(err)
	}
	return doc, string(md)
}

// apiReferenceProblems returns every way md (docs/api.md) and doc (the
// OpenAPI document) disagree.
func apiReferenceProblems(doc map[string]any, md string) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	mentions := func(text, name string) bool { return strings.Contains(text, "`"+name+"`") }

	// Operations and their sections.
	sections := map[string]string{}
	for _, m := range routeHeading.FindAllStringSubmatchIndex(md, -1) {
		op := md[m[4]:m[5]] + " " + md[m[6]:m[7]]
		if _, dup := sections[op]; dup {
			add("docs/api.md has two headings for %s", op)
		}
		rest := md[m[1]:]
		if next := anyHeading.FindStringIndex(rest); next != nil {
			rest = rest[:next[0]]
		}
		sections[op] = rest
	}
	paths, _ := doc["paths"].(map[string]any)
	documented := map[string]bool{}
	for path, item := range paths {
		for method, v := range item.(map[string]any) {
			if !slices.Contains([]string{"get", "post", "put", "patch", "delete"}, method) {
				continue
			}
			opMap := v.(map[string]any)
			op := strings.ToUpper(method) + " " + path
			documented[op] = true
			section, ok := sections[op]
			if !ok {
				add("%s has no heading \"### `%s`\" in docs/api.md", op, op)
				continue
			}
			for _, p := range parameters(doc, item.(map[string]any), opMap) {
				if in := p["in"]; (in == "query" || in == "header") && !mentions(section, p["name"].(string)) {
					add("%s: its section does not name the parameter `%s`", op, p["name"])
				}
			}
			responses, _ := opMap["responses"].(map[string]any)
			for status := range responses {
				if !commonStatuses[status] && !strings.Contains(section, status) {
					add("%s: its section does not say %s, which the operation answers", op, status)
				}
			}
		}
	}
	for _, op := range slices.Sorted(maps.Keys(sections)) {
		if !documented[op] {
			add("docs/api.md documents %s, which the OpenAPI document does not have", op)
		}
	}

	// Schemas: one table each, with exactly their properties.
	schemas := dig(doc, "components", "schemas")
	tabled := map[string]bool{}
	for _, m := range schemaMarker.FindAllStringSubmatchIndex(md, -1) {
		names := strings.Fields(md[m[2]:m[3]])
		rows := tableNames(md[m[1]:])
		want := map[string]bool{}
		for _, name := range names {
			if tabled[name] {
				add("the schema %s has two tables in docs/api.md", name)
			}
			tabled[name] = true
			s, ok := schemas[name].(map[string]any)
			if !ok {
				add("docs/api.md has a table of the schema %s, which the OpenAPI document does not have", name)
				continue
			}
			props, _ := s["properties"].(map[string]any)
			for p := range props {
				want[p] = true
				if !slices.Contains(rows, p) {
					add("%s has the property %s, which its table in docs/api.md does not list", name, p)
				}
			}
		}
		for _, r := range rows {
			if !want[r] {
				add("the table of %s documents %s, which the schema does not have", strings.Join(names, " and "), r)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(schemas)) {
		if _, hasProps := schemas[name].(map[string]any)["properties"]; hasProps && !tabled[name] {
			add("the schema %s has no table in docs/api.md (<!-- schema: %s --> before it)", name, name)
		}
	}

	// Every property, parameter, header and enum value of the document,
	// wherever it is (inline objects, callbacks), is named on the page.
	words := documentWords(doc)
	for _, w := range slices.Sorted(maps.Keys(words.properties)) {
		if !mentions(md, w) {
			add("docs/api.md does not name the property `%s`", w)
		}
	}
	for _, w := range slices.Sorted(maps.Keys(words.headers)) {
		if !mentions(md, w) && !strings.Contains(md, "{"+w+"}") { // a path parameter names itself in its route
			add("docs/api.md does not name the header or parameter `%s`", w)
		}
	}
	for _, w := range slices.Sorted(maps.Keys(words.values)) {
		if !mentions(md, w) {
			add("docs/api.md does not name the value `%s`", w)
		}
	}

	// Error codes: the table has exactly the codes, and the page names no
	// other.
	codes := map[string]bool{}
	for _, name := range []string{"ErrorCode", "MessageErrorCode"} {
		enum, _ := dig(schemas, name)["enum"].([]any)
		for _, c := range enum {
			codes[c.(string)] = true
		}
	}
	table := ""
	if _, after, ok := strings.Cut(md, "\n## Every error code\n"); ok {
		table, _, _ = strings.Cut(after, "\n## ")
	} else {
		add("docs/api.md has no section \"## Every error code\"")
	}
	rows := tableNames(table[strings.Index(table, "\n|")+1:])
	for _, c := range slices.Sorted(maps.Keys(codes)) {
		if !slices.Contains(rows, c) {
			add("the error code %s has no row in docs/api.md's \"Every error code\"", c)
		}
	}
	for _, r := range rows {
		if !codes[r] {
			add("docs/api.md's \"Every error code\" lists %s, which is not an error code of the document", r)
		}
	}
	for _, m := range codeToken.FindAllStringSubmatch(md, -1) {
		if !codes[m[1]] {
			add("docs/api.md names %s, which is not an error code of the document", m[1])
		}
	}
	slices.Sort(problems)
	return slices.Compact(problems)
}

// parameters returns the parameters of an operation and of its path item,
// with references resolved.
func parameters(doc, item, op map[string]any) []map[string]any {
	var out []map[string]any
	for _, list := range []any{item["parameters"], op["parameters"]} {
		l, _ := list.([]any)
		for _, p := range l {
			pm := p.(map[string]any)
			if ref, ok := pm["$ref"].(string); ok {
				pm = dig(doc, "components", "parameters", ref[strings.LastIndex(ref, "/")+1:])
			}
			out = append(out, pm)
		}
	}
	return out
}

// tableNames returns the names in the first cells ("| `name` |") of the
// table that text starts with.
func tableNames(text string) []string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if m := firstCell.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// docWords are the names and values of an OpenAPI document that its
// reference must name.
type docWords struct {
	properties, headers, values map[string]bool
}

// documentWords walks the whole document (examples aside) for property
// names, parameter and header names, and enum and const strings.
func documentWords(doc map[string]any) docWords {
	w := docWords{map[string]bool{}, map[string]bool{}, map[string]bool{}}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for name := range props {
					w.properties[name] = true
				}
			}
			if in, ok := v["in"].(string); ok && in != "" {
				if name, ok := v["name"].(string); ok {
					w.headers[name] = true
				}
			}
			if c, ok := v["const"].(string); ok {
				w.values[c] = true
			}
			if enum, ok := v["enum"].([]any); ok {
				for _, e := range enum {
					if s, ok := e.(string); ok {
						w.values[s] = true
					}
				}
			}
			for k, x := range v {
				if k != "example" && k != "examples" {
					walk(x)
				}
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	if headers, ok := dig(doc, "components")["headers"].(map[string]any); ok {
		for name := range headers {
			w.headers[name] = true
		}
	}
	return w
}
