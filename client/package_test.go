package client_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/client"
)

// TestStandardLibraryOnly: the package imports the standard library only,
// so it is importable on its own, with nothing of the server.
func TestStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		n++
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s, which is not the standard library", f, path)
			}
		}
	}
	if n == 0 {
		t.Fatal("no source files found")
	}
}

// openAPI returns the test server's OpenAPI document.
func openAPI(t *testing.T) map[string]any {
	t.Helper()
	c := newClient(t, "svc_test_00000000000000000000000000000000")
	raw := must(c.OpenAPIDocument(ctxT(t)))(t)
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// at walks a path of object keys in a decoded JSON document.
func at(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("no %s in the document", strings.Join(path, "."))
		}
		v = m[k]
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	slices.Sort(out)
	return out
}

// packageConsts returns the values of the package's constants by type name.
func packageConsts(t *testing.T) map[string][]string {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string][]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				id, ok := vs.Type.(*ast.Ident)
				if !ok || len(vs.Values) != 1 {
					continue
				}
				if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					out[id.Name] = append(out[id.Name], v)
				}
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// TestEnumsMatchTheDocument: every enum of the OpenAPI document has exactly
// the constants of its client type, so a code or status the server adds
// fails here until the client has it.
func TestEnumsMatchTheDocument(t *testing.T) {
	t.Parallel()
	doc := openAPI(t)
	consts := packageConsts(t)
	schema := func(path ...string) []string {
		return strs(at(t, doc, append([]string{"components", "schemas"}, path...)...))
	}
	codes := append(schema("ErrorCode", "enum"), schema("MessageErrorCode", "enum")...)
	slices.Sort(codes)
	codes = slices.Compact(codes)
	for typ, want := range map[string][]string{
		"Code":               codes,
		"MessageStatus":      schema("MessageStatus", "enum"),
		"Direction":          schema("Direction", "enum"),
		"Channel":            schema("SendChannel", "enum"),
		"Environment":        schema("Environment", "enum"),
		"KeyStatus":          schema("KeyStatus", "enum"),
		"EventType":          schema("WebhookEventType", "enum"),
		"WebhookRetryPolicy": schema("WebhookRetryPolicy", "enum"),
		"DeliveryStatus":     schema("WebhookDelivery", "properties", "status", "enum"),
		"CampaignStatus":     schema("Campaign", "properties", "status", "enum"),
		"Audience":           schema("Campaign", "properties", "audience", "enum"),
		"PhoneKind":          schema("Phone", "properties", "kind", "enum"),
		"PhoneStatus":        schema("Phone", "properties", "status", "enum"),
		"ImportRowStatus":    schema("ContactImportRow", "properties", "status", "enum"),
		"EngineState":        schema("SimulatorSettings", "properties", "chat_engine", "enum"),
	} {
		if got := consts[typ]; !slices.Equal(got, want) {
			t.Errorf("constants of %s: %v, the document has %v", typ, got, want)
		}
	}
}

// jsonFields returns the JSON names of a struct's fields, those of embedded
// structs included.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" && f.IsExported() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestTypesMatchTheDocument: every request and answer type of the client
// has exactly the properties of its schema, so a field the server adds to
// an answer (or accepts in a request) fails here until the client has it.
func TestTypesMatchTheDocument(t *testing.T) {
	t.Parallel()
	doc := openAPI(t)
	props := func(name string) []string {
		var out []string
		for k := range at(t, doc, "components", "schemas", name, "properties").(map[string]any) {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	for schema, v := range map[string]any{
		"APIKey":                client.APIKey{},
		"APIKeyCreated":         client.NewAPIKey{},
		"CreateAPIKeyRequest":   client.CreateAPIKeyParams{},
		"Message":               client.Message{},
		"SendMessageRequest":    client.SendParams{},
		"SendAccepted":          client.SendResult{},
		"Template":              client.Template{},
		"CreateTemplateRequest": client.CreateTemplateParams{},
		"Webhook":               client.Webhook{},
		"WebhookCreate":         client.CreateWebhookParams{},
		"WebhookUpdate":         client.UpdateWebhookParams{},
		"WebhookDelivery":       client.WebhookDelivery{},
		"WebhookRecover":        client.RecoverWebhookParams{},
		"WebhookRecovery":       client.WebhookRecovery{},
		"WebhookEventPayload":   client.Event{},
		"PhoneEventPayload":     client.PhoneEvent{},
		"QuarantinePolicy":      client.QuarantinePolicy{},
		"Warmup":                client.WarmupParams{},
		"Contact":               client.Contact{},
		"ContactCreate":         client.CreateContactParams{},
		"ContactUpdate":         client.UpdateContactParams{},
		"ContactImportReport":   client.ImportReport{},
		"ContactImportRow":      client.ImportRow{},
		"Campaign":              client.Campaign{},
		"CampaignCounts":        client.CampaignCounts{},
		"CampaignCreate":        client.CreateCampaignParams{},
		"Phone":                 client.Phone{},
		"Pairing":               client.Pairing{},
		"PhoneCreate":           client.CreatePhoneParams{},
		"PhoneUpdate":           client.UpdatePhoneParams{},
		"InboundRequest":        client.InboundParams{},
		"SimulatorSettings":     client.SimulatorSettings{},
		"ErrorDetails":          client.ErrorDetails{},
		"ReadinessCheck":        client.ReadinessCheck{},
	} {
		if got, want := jsonFields(reflect.TypeOf(v)), props(schema); !slices.Equal(got, want) {
			t.Errorf("%T has the fields %v; the schema %s has %v", v, got, schema, want)
		}
	}
	// WebhookAttempt decodes duration_ms into a Duration by hand.
	if got := props("WebhookAttempt"); !slices.Equal(got, []string{"at", "duration_ms", "error", "status_code"}) {
		t.Errorf("WebhookAttempt has the properties %v; client.WebhookAttempt decodes at, duration_ms, error, status_code", got)
	}
}
