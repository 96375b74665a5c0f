package httpapi

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/yaml"
)

// The OpenAPI document is kept in several YAML files under openapi/, one per
// area of the API: openapi.yaml holds the info, security and shared
// components, and every other file adds its paths and components (the
// conventions every file follows are written at the top of openapi.yaml and
// checked by TestOpenAPIConventions). They are merged when the server starts:
// maps are deep-merged and a key defined twice is an error, except that the
// top-level tags lists are joined (openapi.yaml's first; a tag declared
// twice is an error). Every response of an operation, and every shared
// response, then gets the X-Request-Id header, which the server sets on
// every answer. The result is validated.
//
//go:embed openapi/*.yaml
var openapiFS embed.FS

// OpenAPI loads, merges and validates the embedded OpenAPI 3.1 document.
func OpenAPI() (*openapi3.T, error) {
	raw, err := openAPIMerged()
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return doc, nil
}

func openAPIMerged() ([]byte, error) {
	names, err := fs.Glob(openapiFS, "openapi/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Slice(names, func(i, j int) bool { // the base document first
		return names[i] == "openapi/openapi.yaml" || (names[j] != "openapi/openapi.yaml" && names[i] < names[j])
	})
	merged := map[string]any{}
	var tags []any
	tagFile := map[string]string{}
	for _, name := range names {
		y, err := openapiFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			return nil, fmt.Errorf("openapi %s: %w", name, err)
		}
		var part map[string]any
		if err := json.Unmarshal(j, &part); err != nil {
			return nil, fmt.Errorf("openapi %s: %w", name, err)
		}
		if t, ok := part["tags"]; ok {
			list, ok := t.([]any)
			if !ok {
				return nil, fmt.Errorf("openapi %s: tags is not a list", name)
			}
			for _, tag := range list {
				tn, _ := tag.(map[string]any)["name"].(string)
				if prev, dup := tagFile[tn]; dup {
					return nil, fmt.Errorf("openapi %s: tag %q is declared twice (also in %s)", name, tn, prev)
				}
				tagFile[tn] = name
			}
			tags = append(tags, list...)
			delete(part, "tags")
		}
		if err := mergeMaps(merged, part, name); err != nil {
			return nil, err
		}
	}
	merged["tags"] = tags
	addUnavailable(merged)
	addRequestIDHeader(merged)
	return json.Marshal(merged)
}

// addUnavailable documents 503 DATABASE_UNAVAILABLE (the shared
// Unavailable response) on every authenticated operation that lists no 503
// of its own: any of them may find the database busy or unreachable. An
// operation with its own 503 lists the code in its description.
func addUnavailable(doc map[string]any) {
	paths, _ := doc["paths"].(map[string]any)
	for _, item := range paths {
		item, _ := item.(map[string]any)
		for _, method := range []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"} {
			op, _ := item[method].(map[string]any)
			if op == nil {
				continue
			}
			if sec, ok := op["security"].([]any); ok && len(sec) == 0 {
				continue // no key: it answers without the database (or documents its own 503)
			}
			responses, _ := op["responses"].(map[string]any)
			if responses != nil && responses["503"] == nil {
				responses["503"] = map[string]any{"$ref": "#/components/responses/Unavailable"}
			}
		}
	}
}

// requestIDHeader is the header every answer of the server carries.
var requestIDHeader = map[string]any{"$ref": "#/components/headers/X-Request-Id"}

// addRequestIDHeader declares X-Request-Id on every response of every
// operation (callbacks excepted: their responses come from the tenant's
// endpoint) and on every shared response; a response that is a $ref gets it
// from the component it names.
func addRequestIDHeader(doc map[string]any) {
	add := func(resp any) {
		r, ok := resp.(map[string]any)
		if !ok || r["$ref"] != nil {
			return
		}
		h, ok := r["headers"].(map[string]any)
		if !ok {
			h = map[string]any{}
			r["headers"] = h
		}
		if _, ok := h["X-Request-Id"]; !ok {
			h["X-Request-Id"] = requestIDHeader
		}
	}
	paths, _ := doc["paths"].(map[string]any)
	for _, item := range paths {
		item, _ := item.(map[string]any)
		for _, method := range []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"} {
			op, _ := item[method].(map[string]any)
			responses, _ := op["responses"].(map[string]any)
			for _, resp := range responses {
				add(resp)
			}
		}
	}
	components, _ := doc["components"].(map[string]any)
	responses, _ := components["responses"].(map[string]any)
	for _, resp := range responses {
		add(resp)
	}
}

func mergeMaps(dst, src map[string]any, file string) error {
	for k, v := range src {
		cur, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		cm, ok1 := cur.(map[string]any)
		vm, ok2 := v.(map[string]any)
		if !ok1 || !ok2 {
			if file != "openapi/openapi.yaml" && k != "openapi" && k != "info" {
				return fmt.Errorf("openapi %s: %q is defined twice", file, k)
			}
			continue
		}
		if err := mergeMaps(cm, vm, file); err != nil {
			return err
		}
	}
	return nil
}

// OpenAPIJSON returns the document as served at /v1/openapi.json.
func OpenAPIJSON() ([]byte, error) {
	doc, err := OpenAPI()
	if err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}
