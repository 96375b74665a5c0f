package client

import (
	"context"
	"net/http"
	"time"
)

// Environment is where data lives: live keys (svc_live_) see live data, test
// keys (svc_test_) the test environment.
type Environment string

// The environments.
const (
	Live Environment = "live"
	Test Environment = "test"
)

// KeyStatus is the state of an API key.
type KeyStatus string

// The key statuses.
const (
	KeyActive   KeyStatus = "active"
	KeyInactive KeyStatus = "inactive" // deactivated by the operator: 403 KEY_INACTIVE
)

// APIKey is an API key as the list shows it: never the key itself.
type APIKey struct {
	ID          string      `json:"id"`
	Name        string      `json:"name"`
	KeyHint     string      `json:"key_hint"` // "..." and the key's last four characters
	Environment Environment `json:"environment"`
	Status      KeyStatus   `json:"status"`
	// RateLimit is the key's calls per minute; nil when unlimited (Scale).
	RateLimit *int `json:"rate_limit"`
	// LastUsedAt is the last use (within 2 seconds); nil when never used.
	LastUsedAt *time.Time `json:"last_used_at"`
	CreatedAt  time.Time  `json:"created_at"`
}

// NewAPIKey is a key just created: the only time Key, the full key, is
// shown. Store it now.
type NewAPIKey struct {
	APIKey
	Key string `json:"key"`
}

// CreateAPIKeyParams are the fields of a new key.
type CreateAPIKeyParams struct {
	// Name labels the key (required, 1 to 100 characters).
	Name string `json:"name"`
	// RateLimit is the key's calls per minute, at most the plan's; 0 is the
	// plan's limit.
	RateLimit int `json:"rate_limit,omitempty"`
	// Environment is the new key's; empty is the calling key's. A test key
	// cannot create a live key (403 FORBIDDEN).
	Environment Environment `json:"environment,omitempty"`
}

// CreateAPIKey creates a key for the caller's tenant (POST /v1/api-keys).
func (c *Client) CreateAPIKey(ctx context.Context, p CreateAPIKeyParams) (*NewAPIKey, error) {
	var k NewAPIKey
	if err := c.call(ctx, http.MethodPost, p, &k, "v1", "api-keys"); err != nil {
		return nil, err
	}
	return &k, nil
}

// ListAPIKeys lists the tenant's keys that are not revoked, oldest first: a
// live key sees live and test keys, a test key only test keys
// (GET /v1/api-keys).
func (c *Client) ListAPIKeys(ctx context.Context) ([]*APIKey, error) {
	var keys []*APIKey
	if err := c.call(ctx, http.MethodGet, nil, &keys, "v1", "api-keys"); err != nil {
		return nil, err
	}
	return keys, nil
}

// RevokeAPIKey revokes a key, at once and for good
// (DELETE /v1/api-keys/{id}).
func (c *Client) RevokeAPIKey(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, nil, nil, "v1", "api-keys", id)
}
