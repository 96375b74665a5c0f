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
// components, and every other file adds its paths and components. They are
// merged (maps deep-merged, a key defined twice is an error) and validated
// when the server starts.
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
		if err := mergeMaps(merged, part, name); err != nil {
			return nil, err
		}
	}
	return json.Marshal(merged)
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
