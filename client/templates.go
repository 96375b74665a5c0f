package client

import (
	"context"
	"iter"
	"net/http"
	"time"
)

// Template is a message text with {{variable}} placeholders, sent by name.
type Template struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Body string `json:"body"`
	// Variables are the variables the body uses, each once, in order of
	// first use.
	Variables []string  `json:"variables"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateTemplateParams are the fields of a new template.
type CreateTemplateParams struct {
	// Name is 1 to 64 of a-z, 0-9, _ and -, unique in the environment
	// (409 DUPLICATE_TEMPLATE otherwise).
	Name string `json:"name"`
	// Body is 1 to 1600 characters with {{variable}} placeholders.
	Body string `json:"body"`
}

// CreateTemplate creates a template in the key's environment
// (POST /v1/templates).
func (c *Client) CreateTemplate(ctx context.Context, p CreateTemplateParams) (*Template, error) {
	var t Template
	if err := c.call(ctx, http.MethodPost, p, &t, "v1", "templates"); err != nil {
		return nil, err
	}
	return &t, nil
}

// GetTemplate returns a template by id (GET /v1/templates/{id}).
func (c *Client) GetTemplate(ctx context.Context, id string) (*Template, error) {
	var t Template
	if err := c.call(ctx, http.MethodGet, nil, &t, "v1", "templates", id); err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTemplates iterates over the templates of the key's environment, newest
// first (GET /v1/templates). p may be nil.
func (c *Client) ListTemplates(ctx context.Context, p *ListParams) iter.Seq2[*Template, error] {
	return list[Template](ctx, c, p.values(nil), "v1", "templates")
}

// DeleteTemplate deletes a template (DELETE /v1/templates/{id}); later
// sends naming it answer 400 INVALID_TEMPLATE.
func (c *Client) DeleteTemplate(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, nil, nil, "v1", "templates", id)
}
