package httpapi

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	sb "github.com/switchboard/switchboard"
)

// TestOpenAPIConventions checks the merged document against the conventions
// written at the top of openapi/openapi.yaml, so that every file, including
// one added later, follows them. Each failure says what to change.
func TestOpenAPIConventions(t *testing.T) {
	doc, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	for _, problem := range openAPIProblems(doc, tree) {
		t.Error(problem)
	}
}

// TestOpenAPIConventionsCatchMistakes breaks a correct document in the ways
// the conventions forbid and expects each break to be reported, so that a
// check that stopped working would not pass unnoticed.
func TestOpenAPIConventionsCatchMistakes(t *testing.T) {
	raw, err := openAPIMerged()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		breakIt func(tree map[string]any)
		want    string
	}{
		{"no operationId", func(tree map[string]any) {
			delete(dig(tree, "paths", "/v1/messages", "post"), "operationId")
		}, "POST /v1/messages: no operationId"},
		{"operationId not camelCase", func(tree map[string]any) {
			dig(tree, "paths", "/v1/messages", "post")["operationId"] = "send_message"
		}, `operationId "send_message" is not lowerCamelCase`},
		{"undeclared tag", func(tree map[string]any) {
			dig(tree, "paths", "/v1/messages", "post")["tags"] = []any{"faxes"}
		}, `tag "faxes" is not declared`},
		{"two tags", func(tree map[string]any) {
			dig(tree, "paths", "/v1/messages", "post")["tags"] = []any{"messages", "templates"}
		}, "POST /v1/messages: 2 tags"},
		{"tag without description", func(tree map[string]any) {
			delete(tree["tags"].([]any)[0].(map[string]any), "description")
		}, "has no description"},
		{"parameter without example", func(tree map[string]any) {
			delete(dig(tree, "components", "parameters", "Limit"), "example")
		}, "parameter limit has no example"},
		{"operation without description", func(tree map[string]any) {
			delete(dig(tree, "paths", "/v1/messages", "post"), "description")
		}, "POST /v1/messages: no description"},
		{"parameter without description", func(tree map[string]any) {
			delete(dig(tree, "components", "parameters", "Limit"), "description")
		}, "parameter limit has no description"},
		{"body without example", func(tree map[string]any) {
			delete(dig(tree, "paths", "/v1/templates", "post", "requestBody", "content", "application/json"), "example")
		}, "POST /v1/templates: request body application/json has no example"},
		{"2xx without rate-limit headers", func(tree map[string]any) {
			delete(dig(tree, "paths", "/v1/templates", "post", "responses", "201", "headers"), "X-RateLimit-Limit")
		}, "POST /v1/templates: 201 does not declare X-RateLimit-Limit"},
		{"response without X-Request-Id", func(tree map[string]any) {
			delete(dig(tree, "paths", "/v1/templates", "post", "responses", "201", "headers"), "X-Request-Id")
		}, "POST /v1/templates: 201 does not declare X-Request-Id"},
		{"error code outside ErrorCode", func(tree map[string]any) {
			dig(tree, "paths", "/v1/contacts", "post", "responses", "409")["content"] = map[string]any{
				"application/json": map[string]any{"schema": map[string]any{
					"type": "object", "required": []any{"error", "code"},
					"properties": map[string]any{"error": map[string]any{"type": "string"}, "code": map[string]any{"type": "string"}},
				}},
			}
		}, "POST /v1/contacts: 409: code is neither the ErrorCode schema nor a const or enum of its codes"},
		{"ErrorCode misses a code", func(tree map[string]any) {
			ec := dig(tree, "components", "schemas", "ErrorCode")
			ec["enum"] = slices.DeleteFunc(slices.Clone(ec["enum"].([]any)), func(v any) bool { return v == "FORBIDDEN" })
		}, "ErrorCode lacks FORBIDDEN"},
		{"multi-type", func(tree map[string]any) {
			dig(tree, "components", "schemas", "TemplateData")["additionalProperties"] = map[string]any{"type": []any{"string", "number", "boolean"}}
		}, "TemplateData.additionalProperties: type [string number boolean]"},
		{"default on a property", func(tree map[string]any) {
			dig(tree, "components", "schemas", "SendMessageRequest", "properties")["channel"] = map[string]any{"type": "string", "enum": []any{"sms", "chat", "auto"}, "default": "auto"}
		}, "SendMessageRequest.properties.channel: a default written on the property"},
		{"PATCH null without nullable.Nullable", func(tree map[string]any) {
			delete(dig(tree, "components", "schemas", "ContactUpdate", "properties", "name"), "x-go-type")
		}, "PATCH /v1/contacts/{id}: name accepts null"},
		{"authenticated operation without 400", func(tree map[string]any) {
			delete(dig(tree, "paths", "/v1/messages/{id}", "get", "responses"), "400")
		}, "GET /v1/messages/{id}: no 400"},
		{"429 without a required Retry-After", func(tree map[string]any) {
			delete(dig(tree, "paths", "/v1/messages", "post", "responses", "429", "headers"), "Retry-After")
		}, "POST /v1/messages: 429 does not declare a required Retry-After"},
		{"no license", func(tree map[string]any) {
			delete(dig(tree, "info"), "license")
		}, "info has no license"},
		{"another license", func(tree map[string]any) {
			dig(tree, "info", "license")["name"] = "Proprietary"
		}, "not Apache-2.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tree map[string]any
			if err := json.Unmarshal(raw, &tree); err != nil {
				t.Fatal(err)
			}
			c.breakIt(tree)
			b, _ := json.Marshal(tree)
			doc, err := openapi3.NewLoader().LoadFromData(b)
			if err != nil {
				t.Fatal(err)
			}
			problems := openAPIProblems(doc, tree)
			for _, p := range problems {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Errorf("no problem mentions %q; got %q", c.want, problems)
		})
	}
}

// TestOpenAPIMergeTags: the files' tags lists are joined, and a tag
// declared twice is an error.
func TestOpenAPIMergeTags(t *testing.T) {
	doc, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tag := range doc.Tags {
		names = append(names, tag.Name)
	}
	if len(names) == 0 || names[0] != "messages" {
		t.Errorf("tags %v: want openapi.yaml's first, messages leading", names)
	}
	dst := map[string]any{}
	if err := mergeMaps(dst, map[string]any{"paths": map[string]any{"/a": 1}}, "openapi/a.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := mergeMaps(dst, map[string]any{"paths": map[string]any{"/a": 2}}, "openapi/b.yaml"); err == nil {
		t.Error("a path defined twice was merged")
	}
}

var (
	lowerCamel  = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	nullableGo  = regexp.MustCompile(`^nullable\.Nullable\[.+\]$`)
	rateHeaders = []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
)

// openAPIProblems returns every way doc (loaded from tree) breaks the
// conventions; tree is the same document as decoded JSON, for what the
// loader does not keep (where a default is written, x- extensions).
func openAPIProblems(doc *openapi3.T, tree map[string]any) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if doc.Info == nil || doc.Info.License == nil || doc.Info.License.Name == "" {
		add("info has no license")
	} else if l := doc.Info.License; l.Name != "Apache-2.0" || l.URL != "https://www.apache.org/licenses/LICENSE-2.0" {
		add("info.license is %q %q, not Apache-2.0 with its URL", l.Name, l.URL)
	}
	if doc.Info == nil || doc.Info.Contact == nil || (doc.Info.Contact.URL == "" && doc.Info.Contact.Email == "") {
		add("info has no contact with a url or email")
	}

	declared := map[string]bool{}
	for _, tag := range doc.Tags {
		declared[tag.Name] = true
		if strings.TrimSpace(tag.Description) == "" {
			add("tag %q has no description: give it one where it is declared", tag.Name)
		}
	}
	used := map[string]bool{}
	opIDs := map[string]string{}

	checkOp := func(where, method, path string, op *openapi3.Operation, secured bool, callback bool) {
		at := method + " " + path
		if where != "" {
			at = where + ": " + at
		}
		switch {
		case op.OperationID == "":
			add("%s: no operationId: add one in lowerCamelCase, named as a client method (verb + resource, e.g. listWebhookDeliveries)", at)
		case !lowerCamel.MatchString(op.OperationID):
			add("%s: operationId %q is not lowerCamelCase", at, op.OperationID)
		case opIDs[op.OperationID] != "":
			add("%s: operationId %q is also used by %s", at, op.OperationID, opIDs[op.OperationID])
		default:
			opIDs[op.OperationID] = at
		}
		if strings.TrimSpace(op.Summary) == "" {
			add("%s: no summary", at)
		}
		if strings.TrimSpace(op.Description) == "" {
			add("%s: no description", at)
		}
		if len(op.Tags) != 1 {
			add("%s: %d tags; give it exactly one", at, len(op.Tags))
		}
		for _, tag := range op.Tags {
			used[tag] = true
			if !declared[tag] {
				add("%s: tag %q is not declared: declare it, with a description, in openapi.yaml's tags or a top-level tags list of its file", at, tag)
			}
		}
		for _, p := range op.Parameters {
			if p.Value == nil {
				continue
			}
			if p.Value.Example == nil && len(p.Value.Examples) == 0 {
				add("%s: parameter %s has no example", at, p.Value.Name)
			}
			if strings.TrimSpace(p.Value.Description) == "" {
				add("%s: parameter %s has no description", at, p.Value.Name)
			}
		}
		if op.RequestBody != nil && op.RequestBody.Value != nil {
			for mt, media := range op.RequestBody.Value.Content {
				if media.Example == nil && len(media.Examples) == 0 {
					add("%s: request body %s has no example or examples", at, mt)
				}
			}
		}
		if callback {
			return // its answers come from the tenant's endpoint
		}
		if op.Responses == nil {
			return
		}
		codes := op.Responses.Map()
		if secured && codes["400"] == nil {
			add("%s: no 400: every authenticated operation answers 400 VALIDATION_ERROR to a query parameter it does not have", at)
		}
		if r := codes["429"]; r != nil && r.Value != nil {
			if h := r.Value.Headers["Retry-After"]; h == nil || h.Value == nil || !h.Value.Required {
				add("%s: 429 does not declare a required Retry-After (every 429 carries one)", at)
			}
		}
		keys := make([]string, 0, len(codes))
		for k := range codes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, status := range keys {
			resp := codes[status].Value
			if resp == nil {
				continue
			}
			if resp.Headers["X-Request-Id"] == nil {
				add("%s: %s does not declare X-Request-Id", at, status)
			}
			if secured && strings.HasPrefix(status, "2") {
				for _, h := range rateHeaders {
					if resp.Headers[h] == nil {
						add("%s: %s does not declare %s (authenticated answers carry the X-RateLimit-* headers)", at, status, h)
					}
				}
			}
			if n, err := strconv.Atoi(status); err == nil && n >= 400 {
				if p := errorEnvelopeProblem(doc, resp); p != "" {
					add("%s: %s: %s", at, status, p)
				}
			}
		}
	}

	rootSecured := len(doc.Security) > 0
	if doc.Paths != nil {
		paths := doc.Paths.Map()
		pathKeys := make([]string, 0, len(paths))
		for k := range paths {
			pathKeys = append(pathKeys, k)
		}
		sort.Strings(pathKeys)
		for _, path := range pathKeys {
			for _, p := range paths[path].Parameters { // shared by the path's operations
				if p.Value == nil {
					continue
				}
				if p.Value.Example == nil && len(p.Value.Examples) == 0 {
					add("%s: parameter %s has no example", path, p.Value.Name)
				}
				if strings.TrimSpace(p.Value.Description) == "" {
					add("%s: parameter %s has no description", path, p.Value.Name)
				}
			}
			for method, op := range paths[path].Operations() {
				secured := rootSecured
				if op.Security != nil {
					secured = len(*op.Security) > 0
				}
				checkOp("", method, path, op, secured, false)
				for name, cb := range op.Callbacks {
					if cb.Value == nil {
						continue
					}
					for expr, item := range cb.Value.Map() {
						for m, cop := range item.Operations() {
							checkOp(fmt.Sprintf("callback %s of %s %s", name, method, path), m, expr, cop, false, true)
						}
					}
				}
			}
		}
	}
	for name := range declared {
		if !used[name] {
			add("tag %q is declared but no operation uses it", name)
		}
	}

	// The shared ErrorCode lists exactly the codes of errors.go, and
	// MessageErrorCode the codes a failed message carries.
	if want, err := codesOfErrorsGo(); err != nil {
		add("reading ../errors.go: %v", err)
	} else {
		problems = append(problems, enumProblems("ErrorCode", schemaEnum(doc, "ErrorCode"), want)...)
	}
	problems = append(problems, enumProblems("MessageErrorCode", schemaEnum(doc, "MessageErrorCode"),
		[]string{string(sb.CodeDeliveryFailed), sb.ErrorCodeCampaignCanceled})...)

	if r := doc.Components.Responses["MethodNotAllowed"]; r == nil || r.Value == nil || r.Value.Headers["Allow"] == nil {
		add("components/responses/MethodNotAllowed must exist, with the Allow header")
	}
	if r := doc.Components.Responses["NotFound"]; r == nil || r.Value == nil {
		add("components/responses/NotFound must exist")
	}

	problems = append(problems, schemaTreeProblems(tree)...)
	problems = append(problems, patchNullProblems(tree)...)
	return problems
}

// errorEnvelopeProblem says how resp fails to be the error envelope whose
// code is ErrorCode or a subset of it, or "" when it is one.
func errorEnvelopeProblem(doc *openapi3.T, resp *openapi3.Response) string {
	media := resp.Content.Get("application/json")
	if media == nil || media.Schema == nil || media.Schema.Value == nil {
		return "no application/json error envelope"
	}
	s := media.Schema.Value
	if !slices.Contains(s.Required, "error") || !slices.Contains(s.Required, "code") {
		return "the envelope must require error and code"
	}
	code := s.Properties["code"]
	if code == nil {
		return "the envelope has no code"
	}
	if code.Ref == "#/components/schemas/ErrorCode" {
		return ""
	}
	all := schemaEnum(doc, "ErrorCode")
	var values []any
	if code.Value != nil {
		values = code.Value.Enum
		if code.Value.Const != nil {
			values = append(values, code.Value.Const)
		}
	}
	if len(values) == 0 {
		return "code is neither the ErrorCode schema nor a const or enum of its codes"
	}
	for _, v := range values {
		if s, _ := v.(string); !slices.Contains(all, s) {
			return fmt.Sprintf("code %v is not in ErrorCode", v)
		}
	}
	return ""
}

func schemaEnum(doc *openapi3.T, name string) []string {
	ref := doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return nil
	}
	var out []string
	for _, v := range ref.Value.Enum {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

func enumProblems(name string, have, want []string) []string {
	var problems []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			problems = append(problems, fmt.Sprintf("%s lacks %s", name, w))
		}
	}
	for _, h := range have {
		if !slices.Contains(want, h) {
			problems = append(problems, fmt.Sprintf("%s has %s, which is not a code of the service", name, h))
		}
	}
	return problems
}

// codesOfErrorsGo returns the values of the Code constants of ../errors.go.
func codesOfErrorsGo() ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "../errors.go", nil, 0)
	if err != nil {
		return nil, err
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					codes = append(codes, s)
				}
			}
		}
	}
	if len(codes) == 0 {
		return nil, fmt.Errorf("no Code constants found")
	}
	return codes, nil
}

// schemaTreeProblems walks every schema of the document for what
// generators mishandle: a type list with more than one type besides "null"
// (oapi-codegen cannot generate it; use oneOf), and a default written on an
// object property (openapi-typescript makes such a property required; put
// the default on a named schema and $ref it).
func schemaTreeProblems(tree map[string]any) []string {
	var problems []string
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if types, ok := v["type"].([]any); ok {
				n := 0
				for _, t := range types {
					if t != "null" {
						n++
					}
				}
				if n > 1 {
					problems = append(problems, fmt.Sprintf("%s: type %v: at most one type besides \"null\"; use oneOf", at, types))
				}
			}
			if props, ok := v["properties"].(map[string]any); ok {
				for name, p := range props {
					if pm, ok := p.(map[string]any); ok && pm["default"] != nil && pm["$ref"] == nil {
						problems = append(problems, fmt.Sprintf("%s.properties.%s: a default written on the property; move the schema with its default to components/schemas and $ref it", at, name))
					}
				}
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if k == "example" || k == "examples" || k == "enum" || k == "const" || k == "default" {
					continue // values, not schemas
				}
				walk(v[k], at+"."+k)
			}
		case []any:
			for i, e := range v {
				walk(e, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	}
	for _, section := range []string{"paths", "components"} {
		s, _ := tree[section].(map[string]any)
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walk(s[k], strings.TrimPrefix(k, "schemas."))
		}
	}
	// Report component schemas by name: "TemplateData.additionalProperties".
	for i, p := range problems {
		problems[i] = strings.TrimPrefix(p, "schemas.")
	}
	return problems
}

// patchNullProblems: in a PATCH body a property left out keeps its value
// and null removes it, so oapi-codegen's client must be able to send both;
// an optional property that accepts null needs nullable.Nullable[T].
func patchNullProblems(tree map[string]any) []string {
	var problems []string
	paths, _ := tree["paths"].(map[string]any)
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, path := range keys {
		op := dig(tree, "paths", path, "patch")
		if op == nil {
			continue
		}
		content, _ := dig(op, "requestBody", "content")["application/json"].(map[string]any)
		schema := resolve(tree, content["schema"])
		if schema == nil {
			continue
		}
		required := map[string]bool{}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				required[fmt.Sprint(r)] = true
			}
		}
		props, _ := schema["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			p, _ := props[name].(map[string]any)
			if required[name] || !acceptsNull(tree, p) {
				continue
			}
			goType, _ := p["x-go-type"].(string)
			imp, _ := p["x-go-type-import"].(map[string]any)
			if !nullableGo.MatchString(goType) || imp["path"] != "github.com/oapi-codegen/nullable" || p["x-go-type-skip-optional-pointer"] != true {
				problems = append(problems, fmt.Sprintf("PATCH %s: %s accepts null, which differs from leaving it out: give it x-go-type: nullable.Nullable[T], x-go-type-import: {path: github.com/oapi-codegen/nullable} and x-go-type-skip-optional-pointer: true", path, name))
			}
		}
	}
	return problems
}

func acceptsNull(tree map[string]any, s map[string]any) bool {
	s = resolve(tree, s)
	if s == nil {
		return false
	}
	switch t := s["type"].(type) {
	case string:
		if t == "null" {
			return true
		}
	case []any:
		if slices.Contains(t, any("null")) {
			return true
		}
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		list, _ := s[k].([]any)
		for _, b := range list {
			if bm, ok := b.(map[string]any); ok && acceptsNull(tree, bm) {
				return true
			}
		}
	}
	return false
}

// resolve follows a local $ref of the decoded document.
func resolve(tree map[string]any, v any) map[string]any {
	m, _ := v.(map[string]any)
	for i := 0; m != nil && i < 10; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
		m = dig(tree, parts...)
	}
	return m
}

// dig returns the object at the path of keys, or nil.
func dig(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}
