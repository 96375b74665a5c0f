package client

import (
	"context"
	"fmt"
	"net/http"
)

// InboundParams are a simulated inbound message.
type InboundParams struct {
	// From is the recipient who writes, E.164 (required).
	From string `json:"from"`
	// To is one of the tenant's numbers; empty is the tenant's first phone.
	To string `json:"to,omitempty"`
	// Body is the text (required); STOP, START and the other keywords opt
	// the sender out and in.
	Body string `json:"body"`
}

// SimulateInboundMessage acts as if p.From had written p.Body to the
// tenant's number p.To (POST /v1/test/inbound), in the key's environment,
// and returns the stored inbound message. A live key may do it only toward
// a simulated phone.
func (c *Client) SimulateInboundMessage(ctx context.Context, p InboundParams) (*Message, error) {
	var m Message
	if err := c.call(ctx, http.MethodPost, p, &m, "v1", "test", "inbound"); err != nil {
		return nil, err
	}
	return &m, nil
}

// EngineState is the state of the simulated chat engine.
type EngineState string

// The engine states.
const (
	EngineUp   EngineState = "up"
	EngineDown EngineState = "down"
)

// SimulatorSettings are the simulator's switches.
type SimulatorSettings struct {
	// ChatEngine down makes sends with ChannelChat answer 503
	// CHANNEL_UNAVAILABLE and ChannelAuto resolve to ChannelSMS.
	ChatEngine EngineState `json:"chat_engine"`
}

// SetSimulatorSettings switches the simulated chat engine of the caller's
// tenant and environment (POST /v1/test/simulator).
func (c *Client) SetSimulatorSettings(ctx context.Context, s SimulatorSettings) (*SimulatorSettings, error) {
	var out SimulatorSettings
	if err := c.call(ctx, http.MethodPost, s, &out, "v1", "test", "simulator"); err != nil {
		return nil, err
	}
	return &out, nil
}

// Health checks that the server answers (GET /healthz); it needs no valid
// key.
func (c *Client) Health(ctx context.Context) error {
	var h struct {
		Status string `json:"status"`
	}
	if err := c.call(ctx, http.MethodGet, nil, &h, "healthz"); err != nil {
		return err
	}
	if h.Status != "ok" {
		return fmt.Errorf("switchboard: health status %q", h.Status)
	}
	return nil
}

// Readiness is the answer of GET /readyz.
type Readiness struct {
	// Status is "ready", or "degraded" while the node serves with a
	// fallback (Redis unreachable) or every database connection is busy.
	Status string `json:"status"`
	// Checks has one entry per dependency: "database", "rate_limits".
	Checks map[string]ReadinessCheck `json:"checks"`
}

// ReadinessCheck is the state of one dependency of a node.
type ReadinessCheck struct {
	// Status is "ok", "degraded" or "down".
	Status string `json:"status"`
	// Detail says what is wrong, or which backend is in use.
	Detail string `json:"detail,omitempty"`
}

// Ready asks whether the node can serve (GET /readyz); it needs no valid
// key. A node whose database is unreachable answers 503
// DATABASE_UNAVAILABLE: the *Error's Details.Checks then has the checks.
// Like every 503, that answer is retried first.
func (c *Client) Ready(ctx context.Context) (*Readiness, error) {
	var r Readiness
	if err := c.call(ctx, http.MethodGet, nil, &r, "readyz"); err != nil {
		return nil, err
	}
	return &r, nil
}

// OpenAPIDocument returns the server's OpenAPI 3.1 document, as JSON
// (GET /v1/openapi.json).
func (c *Client) OpenAPIDocument(ctx context.Context) ([]byte, error) {
	u, err := c.endpoint(nil, "v1", "openapi.json")
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, &request{method: http.MethodGet, url: u})
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}
