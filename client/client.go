package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultTimeout is the time limit of one attempt of a request (not of the
// retries together: give the context a deadline for that) when New is not
// given an HTTP client.
const DefaultTimeout = 60 * time.Second

// userAgent is the default User-Agent header.
const userAgent = "switchboard-go-client/1"

// maxResponseBytes bounds the answers the client reads.
const maxResponseBytes = 32 << 20

// Client calls the Switchboard API with one API key. It is safe for
// concurrent use; make one and share it.
type Client struct {
	base      *url.URL
	key       string
	hc        *http.Client
	retry     RetryPolicy
	clock     Clock
	newKey    func() string
	userAgent string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc (its Timeout
// limits each attempt). The default is an http.Client with DefaultTimeout.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// WithRetryPolicy replaces DefaultRetryPolicy. RetryPolicy{} turns retries
// off.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) { c.retry = p }
}

// WithClock replaces the real time for the waits between retries.
func WithClock(clock Clock) Option {
	return func(c *Client) { c.clock = clock }
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// WithIdempotencyKeys replaces the generator of the Idempotency-Key that
// SendMessage sets when SendParams.IdempotencyKey is empty. The default
// makes 26 random characters (128 bits) with crypto/rand. Keys must be
// unique: a key reused with the same body within 24 hours sends nothing.
func WithIdempotencyKeys(generate func() string) Option {
	return func(c *Client) { c.newKey = generate }
}

// New returns a client of the API at baseURL (e.g. "http://127.0.0.1:8080",
// or "https://sms.example.com/switchboard" behind a proxy that strips the
// prefix) that authenticates with apiKey (svc_live_... or svc_test_...).
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("switchboard: base URL %q: want an absolute http(s) URL without credentials, query or fragment", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	if apiKey == "" {
		return nil, errors.New("switchboard: an API key is required")
	}
	c := &Client{
		base:      u,
		key:       apiKey,
		hc:        &http.Client{Timeout: DefaultTimeout},
		retry:     DefaultRetryPolicy(),
		clock:     realClock{},
		newKey:    rand.Text,
		userAgent: userAgent,
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: DefaultTimeout}
	}
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.newKey == nil {
		c.newKey = rand.Text
	}
	return c, nil
}

// request is one call of the API, repeated as it is on a retry.
type request struct {
	method         string
	url            *url.URL
	body           []byte
	contentType    string
	idempotencyKey string
	isSend         bool
}

// safeToRepeat reports whether the request may be sent again after it got
// no answer, when it may or may not have reached the server.
func (r *request) safeToRepeat() bool {
	switch r.method {
	case http.MethodGet, http.MethodPatch, http.MethodDelete:
		return true
	}
	return r.isSend && r.idempotencyKey != ""
}

// response is a successful answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// envelope is every answer's body.
type envelope struct {
	Data    json.RawMessage `json:"data"`
	Error   string          `json:"error"`
	Code    Code            `json:"code"`
	Details ErrorDetails    `json:"details"`
}

// endpoint returns the URL of the API path made of segments, each escaped,
// with the query q.
func (c *Client) endpoint(q url.Values, segments ...string) (*url.URL, error) {
	u := *c.base
	raw := u.EscapedPath()
	for _, s := range segments {
		if s == "" {
			return nil, errors.New("switchboard: an id is empty")
		}
		raw += "/" + url.PathEscape(s)
	}
	p, err := url.PathUnescape(raw)
	if err != nil {
		return nil, err
	}
	u.Path, u.RawPath = p, raw
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return &u, nil
}

// call sends method to the path of segments with in as its JSON body (none
// when nil), and decodes the answer's data into out (when not nil).
func (c *Client) call(ctx context.Context, method string, in, out any, segments ...string) error {
	u, err := c.endpoint(nil, segments...)
	if err != nil {
		return err
	}
	r := &request{method: method, url: u}
	if in != nil {
		if r.body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("switchboard: encoding the request: %w", err)
		}
		r.contentType = "application/json"
	}
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	_, err = resp.decode(out)
	return err
}

// decode decodes the answer's data into out (when not nil) and returns the
// envelope's code (QUIET_HOURS is the one code of a success).
func (resp *response) decode(out any) (Code, error) {
	var env envelope
	if err := json.Unmarshal(resp.body, &env); err != nil {
		return "", fmt.Errorf("switchboard: answer %d is not the API's JSON envelope: %w", resp.status, err)
	}
	if out != nil {
		if len(env.Data) == 0 {
			return "", fmt.Errorf("switchboard: answer %d has no data", resp.status)
		}
		if err := json.Unmarshal(env.Data, out); err != nil {
			return "", fmt.Errorf("switchboard: decoding the answer's data: %w", err)
		}
	}
	return env.Code, nil
}

// do sends r, retrying as the retry policy says, and returns the first 2xx
// answer or the last error.
func (c *Client) do(ctx context.Context, r *request) (*response, error) {
	var st retryState
	for {
		resp, apiErr, netErr := c.once(ctx, r)
		if resp != nil {
			return resp, nil
		}
		var last error = apiErr
		if netErr != nil {
			if ctx.Err() != nil {
				return nil, netErr
			}
			last = netErr
		}
		wait, ok := c.retry.delay(&st, r, apiErr, netErr)
		if !ok {
			return nil, last
		}
		if deadline, has := ctx.Deadline(); has && c.clock.Now().Add(wait).After(deadline) {
			// The retry could not happen in time: the answer is more
			// useful than a deadline error.
			return nil, last
		}
		if err := c.clock.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("switchboard: %w while waiting to retry after: %w", err, last)
		}
	}
}

// once sends r once. It returns the answer when it is a success, the API
// error when it is not, or the transport error when there was no answer.
func (c *Client) once(ctx context.Context, r *request) (*response, *Error, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url.String(), body)
	if err != nil {
		return nil, nil, fmt.Errorf("switchboard: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.idempotencyKey)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("switchboard: reading the answer: %w", err)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return &response{status: res.StatusCode, header: res.Header, body: data}, nil, nil
	}
	return nil, c.apiError(res, data), nil
}

// apiError turns an error answer into an *Error.
func (c *Client) apiError(res *http.Response, body []byte) *Error {
	e := &Error{
		StatusCode: res.StatusCode,
		RequestID:  res.Header.Get("X-Request-Id"),
		RetryAfter: parseRetryAfter(res.Header.Get("Retry-After"), c.clock.Now()),
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err == nil && env.Code != "" {
		e.Code, e.Message, e.Details = env.Code, env.Error, env.Details
	} else {
		e.Message = http.StatusText(res.StatusCode)
	}
	return e
}
