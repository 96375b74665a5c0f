package httpapi

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
)

//go:embed openapi/openapi.yaml
var openapiFS embed.FS

// OpenAPI loads and validates the embedded OpenAPI 3.1 document.
func OpenAPI() (*openapi3.T, error) {
	raw, err := openapiFS.ReadFile("openapi/openapi.yaml")
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return doc, nil
}

// OpenAPIJSON returns the document as served at /v1/openapi.json.
func OpenAPIJSON() ([]byte, error) {
	doc, err := OpenAPI()
	if err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}
