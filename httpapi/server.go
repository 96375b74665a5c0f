// Package httpapi is the HTTP adapter of Switchboard: routes, the response
// envelope, authentication, rate limits and quotas as middleware, request
// decoding and the OpenAPI document. Handlers return errors; writeError is
// the one place that turns an error into a status and an envelope.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/ratelimit"
)

// Store is everything the handlers need from storage.
type Store interface {
	KeyStore
	TemplateStore
	MessageStore
	WebhookStore
	ContactStore
	CampaignStore
	PhoneStore
}

// Config wires a Server.
type Config struct {
	Store   Store
	Auth    *auth.Authenticator
	Meter   *auth.Meter
	Limiter ratelimit.Limiter
	Plans   sb.Plans
	// Channels answers the channel and quiet-hours questions of a send.
	Channels Channels
	// Routing decides the status a phone shows.
	Routing sb.Routing
	// Devices, when set, serves the device protocol of android phones
	// under /api/mobile/v1/ (outside the envelope: it speaks the app's
	// protocol).
	Devices http.Handler
	// Dashboard, when set, serves the tenants' dashboard under /dashboard/
	// (outside the envelope: it answers with HTML pages).
	Dashboard http.Handler
	// Providers, when set, serves the callbacks of carrier links under
	// /api/providers/ (outside the envelope: each speaks its carrier's
	// protocol).
	Providers http.Handler
	// Engines are the chat engines tenants may bind numbers of their own to
	// (POST /v1/phones with provider): the links of the providers file
	// marked tenants_may_bind, by name, with their types (rbm, imessage).
	Engines map[string]string
	// URLChecker vets webhook urls at registration (SSRF).
	URLChecker URLChecker
	// Ready, when set, gives the checks GET /readyz reports (see Check).
	Ready   func(ctx context.Context) map[string]Check
	Metrics *Metrics
	// Log is the server's logger (default slog.Default()): a line per
	// request at debug level, internal errors, campaign launches and
	// cancels at info.
	Log *slog.Logger
	Now func() time.Time
}

// Channels answers a send's questions about channels and quiet hours, and
// switches the simulated chat engine (POST /v1/test/simulator).
type Channels interface {
	Detect(ctx context.Context, tenantID string, env sb.Environment, number string) (string, error)
	ChatAvailable(ctx context.Context, tenantID string, env sb.Environment) error
	QuietUntil(number string, now time.Time) (time.Time, bool)
	SetChatDown(tenantID string, env sb.Environment, down bool)
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	now     func() time.Time
	reqSeq  atomic.Uint64
	reqBase string
	openapi []byte
	log     *slog.Logger
}

// New returns a Server. Routes are all listed in routes.
func New(cfg Config) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	var b [6]byte
	rand.Read(b[:])
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), now: cfg.Now, log: cfg.Log, reqBase: "req_" + hex.EncodeToString(b[:])}
	doc, err := OpenAPIJSON()
	if err != nil {
		return nil, err
	}
	s.openapi = doc
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux.Handle("GET /healthz", s.public(s.health))
	s.mux.Handle("GET /readyz", s.public(s.ready))
	s.mux.Handle("GET /v1/openapi.json", s.public(s.serveOpenAPI))
	s.mux.Handle("GET /metrics", s.public(s.serveMetrics))
	s.mux.Handle("GET /docs", s.public(docsPage.serve))
	s.mux.Handle("GET /docs/redoc.standalone.js", s.public(docsScript.serve))
	s.mux.Handle("GET /docs/redoc.standalone.js.LICENSE.txt", s.public(docsLicense.serve))

	s.mux.Handle("POST /v1/api-keys", s.authed(s.createKey))
	s.mux.Handle("GET /v1/api-keys", s.authed(s.listKeys))
	s.mux.Handle("DELETE /v1/api-keys/{id}", s.authed(s.revokeKey))

	s.mux.Handle("POST /v1/messages", s.authed(s.sendMessage))
	s.mux.Handle("GET /v1/messages", s.authed(s.listMessages, messageFilters...))
	s.mux.Handle("GET /v1/messages/{id}", s.authed(s.getMessage))

	s.mux.Handle("POST /v1/templates", s.authed(s.createTemplate))
	s.mux.Handle("GET /v1/templates", s.authed(s.listTemplates, pageParams...))
	s.mux.Handle("GET /v1/templates/{id}", s.authed(s.getTemplate))
	s.mux.Handle("DELETE /v1/templates/{id}", s.authed(s.deleteTemplate))

	s.mux.Handle("POST /v1/webhooks", s.authed(s.createWebhook))
	s.mux.Handle("GET /v1/webhooks", s.authed(s.listWebhooks))
	s.mux.Handle("GET /v1/webhooks/{id}", s.authed(s.getWebhook))
	s.mux.Handle("PATCH /v1/webhooks/{id}", s.authed(s.updateWebhook))
	s.mux.Handle("DELETE /v1/webhooks/{id}", s.authed(s.deleteWebhook))
	s.mux.Handle("GET /v1/webhooks/{id}/deliveries", s.authed(s.listDeliveries, pageParams...))
	s.mux.Handle("GET /v1/webhooks/{id}/deliveries/{delivery_id}", s.authed(s.getDelivery))
	s.mux.Handle("POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry", s.authed(s.retryDelivery))
	s.mux.Handle("POST /v1/webhooks/{id}/recover", s.authed(s.recoverDeliveries))

	s.mux.Handle("POST /v1/contacts", s.authed(s.createContact))
	s.mux.Handle("GET /v1/contacts", s.authed(s.listContacts, append([]string{"phone"}, pageParams...)...))
	s.mux.Handle("POST /v1/contacts/import", s.authed(s.importContacts))
	s.mux.Handle("GET /v1/contacts/{id}", s.authed(s.getContact))
	s.mux.Handle("PATCH /v1/contacts/{id}", s.authed(s.updateContact))
	s.mux.Handle("DELETE /v1/contacts/{id}", s.authed(s.deleteContact))

	s.mux.Handle("POST /v1/campaigns", s.authed(s.createCampaign))
	s.mux.Handle("GET /v1/campaigns", s.authed(s.listCampaigns, pageParams...))
	s.mux.Handle("GET /v1/campaigns/{id}", s.authed(s.getCampaign))
	s.mux.Handle("POST /v1/campaigns/{id}/launch", s.authed(s.launchCampaign))
	s.mux.Handle("POST /v1/campaigns/{id}/cancel", s.authed(s.cancelCampaign))

	s.mux.Handle("POST /v1/phones", s.authed(s.createPhone))
	s.mux.Handle("GET /v1/phones", s.authed(s.listPhones))
	s.mux.Handle("GET /v1/phones/{id}", s.authed(s.getPhone))
	s.mux.Handle("PATCH /v1/phones/{id}", s.authed(s.updatePhone))
	s.mux.Handle("DELETE /v1/phones/{id}", s.authed(s.deletePhone))
	s.mux.Handle("POST /v1/phones/{id}/pairing", s.authed(s.pairPhone))

	if s.cfg.Devices != nil {
		s.mux.Handle(DevicePrefix, s.raw(s.cfg.Devices))
	}
	if s.cfg.Dashboard != nil {
		s.mux.Handle(DashboardPrefix, s.raw(s.cfg.Dashboard))
		s.mux.Handle("GET /dashboard", s.raw(http.RedirectHandler(DashboardPrefix, http.StatusMovedPermanently)))
	}
	if s.cfg.Providers != nil {
		s.mux.Handle(ProvidersPrefix, s.raw(s.cfg.Providers))
	}

	s.mux.Handle("POST /v1/test/inbound", s.authed(s.testInbound))
	s.mux.Handle("POST /v1/test/simulator", s.authed(s.testSimulator))
}

// handlerFunc is a handler of an authenticated route.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p *auth.Principal) error

// recorder remembers the status for metrics and whether a route of ours
// answered; when none did, the mux's plain-text 404 or 405 is held back and
// replaced by the envelope.
type recorder struct {
	http.ResponseWriter
	status   int
	routed   bool
	hijacked bool // the mux answered on its own
	// tenant and env are those of the authenticated caller, for the log.
	tenant string
	env    sb.Environment
}

func (rw *recorder) WriteHeader(status int) {
	if rw.status != 0 {
		return
	}
	rw.status = status
	if !rw.routed {
		rw.hijacked = true
		return
	}
	rw.ResponseWriter.WriteHeader(status)
}

func (rw *recorder) Write(b []byte) (int, error) {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.hijacked {
		return len(b), nil
	}
	return rw.ResponseWriter.Write(b)
}

func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// ServeHTTP gives every request an id (the client's own X-Request-Id when it
// is a sane token), recovers panics into a 500 envelope, renders the mux's
// own 404 and 405 as envelopes, records metrics and logs the request at
// debug level.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get("X-Request-Id")
	if !saneRequestID(id) {
		id = s.reqBase + "_" + strconv.FormatUint(s.reqSeq.Add(1), 36)
	}
	w.Header().Set("X-Request-Id", id)
	rw := &recorder{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic", "request_id", id, "method", r.Method, "route", r.Pattern, "panic", v)
			if rw.status == 0 {
				rw.routed = true
				s.writeError(rw, r, errPanic)
			}
		}
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		elapsed := time.Since(start)
		s.cfg.Metrics.observe(route, rw.status, elapsed)
		s.logRequest(r, rw, id, route, elapsed)
	}()
	if strings.HasPrefix(r.URL.Path, DevicePrefix) && strings.Contains(r.URL.Path, "//") {
		// An API URL typed into the app with a trailing slash makes its
		// calls /api/mobile/v1//device: served as they are meant, where
		// the mux would redirect them (and the app's POST would come back
		// a GET).
		for strings.Contains(r.URL.Path, "//") {
			r.URL.Path = strings.ReplaceAll(r.URL.Path, "//", "/")
		}
		r.URL.RawPath = ""
	}
	s.mux.ServeHTTP(rw, r)
	if rw.hijacked {
		rw.routed = true
		hdr := w.Header()
		delete(hdr, "X-Content-Type-Options")
		if rw.status == http.StatusMethodNotAllowed {
			s.writeError(rw.ResponseWriter, r, sb.Errorf(sb.CodeMethodNotAllowed, "Method %s is not allowed on %s.", r.Method, r.URL.Path))
			return
		}
		s.writeError(rw.ResponseWriter, r, sb.Errorf(sb.CodeNotFound, "No route matches %s %s.", r.Method, r.URL.Path))
	}
}

// saneRequestID reports whether a client's X-Request-Id may be kept as the
// request's id: 1 to 128 characters of letters, digits and . _ : -, so
// that it can go into logs and headers as it is.
func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// logRequest writes the request's line at debug level: method, route
// pattern (never the path's ids or the query), status, duration, request
// id and, once authenticated, the tenant and environment. Never a key.
func (s *Server) logRequest(r *http.Request, rw *recorder, id, route string, elapsed time.Duration) {
	ctx := r.Context()
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	status := rw.status
	if status == 0 {
		status = http.StatusOK
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("route", route), slog.Int("status", status),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000), slog.String("request_id", id),
	}
	if rw.tenant != "" {
		attrs = append(attrs, slog.String("tenant_id", rw.tenant), slog.String("environment", string(rw.env)))
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "request", attrs...)
}

var errPanic = &panicError{}

type panicError struct{}

func (*panicError) Error() string { return "handler panicked" }

// DevicePrefix is where the device protocol of android phones is served.
const DevicePrefix = "/api/mobile/v1/"

// DashboardPrefix is where the dashboard is served.
const DashboardPrefix = "/dashboard/"

// ProvidersPrefix is where carrier links receive their callbacks.
const ProvidersPrefix = "/api/providers/"

// raw serves a handler that answers on its own, outside the envelope.
func (s *Server) raw(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rw, ok := w.(*recorder); ok {
			rw.routed = true
		}
		h.ServeHTTP(w, r)
	})
}

// public adapts a handler of a route that needs no authentication.
func (s *Server) public(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rw, ok := w.(*recorder); ok {
			rw.routed = true
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// authed adapts a handler of an authenticated route that takes the query
// parameters params (none when empty). Checks run in the API's order:
// authentication (401/403), rate limits (429 RATE_LIMIT_EXCEEDED: the
// key's, then the tenant's total), monthly quota (429 QUOTA_EXCEEDED), then
// the request itself: its query parameters (checkQuery), then the handler.
func (s *Server) authed(h handlerFunc, params ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw, _ := w.(*recorder)
		if rw != nil {
			rw.routed = true
		}
		if err := s.admit(w, r, rw, h, params); err != nil {
			s.writeError(w, r, err)
		}
	})
}

func (s *Server) admit(w http.ResponseWriter, r *http.Request, rw *recorder, h handlerFunc, params []string) error {
	ctx := r.Context()
	p, err := s.cfg.Auth.Authenticate(ctx, r.Header.Get("Authorization"), clientAddr(r))
	if err != nil {
		var th *auth.Throttled
		if errors.As(err, &th) {
			w.Header().Set("Retry-After", strconv.Itoa(th.RetryAfter))
			s.cfg.Metrics.refused("auth_throttle")
		}
		return err
	}
	if rw != nil {
		rw.tenant, rw.env = p.Tenant.ID, p.Env
	}
	if p.RateLimit > 0 {
		d, err := s.cfg.Limiter.Allow(ctx, p.Key.ID, p.RateLimit, time.Minute)
		if err != nil {
			return err
		}
		hdr := w.Header()
		hdr["X-Ratelimit-Limit"] = []string{strconv.Itoa(d.Limit)}
		hdr["X-Ratelimit-Remaining"] = []string{strconv.Itoa(d.Remaining)}
		hdr["X-Ratelimit-Reset"] = []string{strconv.Itoa(d.ResetSeconds())}
		if !d.Allowed {
			hdr["Retry-After"] = []string{strconv.Itoa(d.RetryAfterSeconds())}
			s.cfg.Metrics.refused("key")
			return sb.Errorf(sb.CodeRateLimitExceeded, "Rate limit of %d requests per minute exceeded. Retry after %s.", d.Limit, sb.Seconds(d.RetryAfterSeconds()))
		}
	}
	// The tenant's total, across its keys and tokens of both environments.
	// A request the key's own limit refused does not count against it.
	if limit := p.Plan.TenantRateLimit; limit > 0 {
		d, err := s.cfg.Limiter.Allow(ctx, tenantBucket(p.Tenant.ID), limit, time.Minute)
		if err != nil {
			return err
		}
		if !d.Allowed {
			// The headers describe the bucket that refused.
			hdr := w.Header()
			hdr["X-Ratelimit-Limit"] = []string{strconv.Itoa(d.Limit)}
			hdr["X-Ratelimit-Remaining"] = []string{"0"}
			hdr["X-Ratelimit-Reset"] = []string{strconv.Itoa(d.ResetSeconds())}
			hdr["Retry-After"] = []string{strconv.Itoa(d.RetryAfterSeconds())}
			s.cfg.Metrics.refused("tenant")
			return sb.Errorf(sb.CodeRateLimitExceeded, "The account's limit of %d requests per minute across all its keys is exceeded. Retry after %s.", d.Limit, sb.Seconds(d.RetryAfterSeconds()))
		}
	}
	if p.Env == sb.Live {
		now := s.now()
		if err := s.cfg.Meter.Take(ctx, p.Tenant.ID, p.Plan.MonthlyCalls, now); err != nil {
			if sb.ErrorCode(err) == sb.CodeQuotaExceeded {
				w.Header().Set("Retry-After", strconv.Itoa(secondsToNextMonth(now)))
				s.cfg.Metrics.refused("monthly_quota")
			}
			return err
		}
	}
	if err := checkQuery(r, params); err != nil {
		return err
	}
	if err := checkIdempotencyHeader(r); err != nil {
		return err
	}
	err = h(w, r, p)
	if err == sb.ErrNotFound {
		err = notFound(r, p.Env)
	}
	return err
}

// checkIdempotencyHeader refuses an Idempotency-Key on a POST that does not
// honour it: only sends are made idempotent by it, and a client that sends
// it elsewhere must not believe that a retry is safe when it would create
// a second webhook, key or campaign.
func checkIdempotencyHeader(r *http.Request) error {
	if r.Method != http.MethodPost || r.Pattern == "POST /v1/messages" || r.Header.Get("Idempotency-Key") == "" {
		return nil
	}
	return sb.Invalid("Idempotency-Key", "Idempotency-Key is honoured only by POST /v1/messages; this request would not be made safe to retry by it. Leave the header out.")
}

// resourceNames names the resource of a route's {id}, for NOT_FOUND texts.
var resourceNames = map[string]string{
	"api-keys": "API key", "messages": "message", "templates": "template", "webhooks": "webhook", "phones": "phone",
}

// notFound is the NOT_FOUND of a route's {id}: the store's general error,
// said of the resource the route names. The resource may exist elsewhere
// (another tenant, the other environment): the text never says so.
func notFound(r *http.Request, env sb.Environment) error {
	rest, _ := strings.CutPrefix(r.URL.Path, "/v1/")
	kind, _, _ := strings.Cut(rest, "/")
	name, ok := resourceNames[kind]
	if !ok {
		return sb.ErrNotFound
	}
	// The text does not repeat the id: the answer to another tenant's id
	// must be the same, byte for byte, as to an id that never existed.
	switch kind {
	case "api-keys", "phones": // of the tenant, not of an environment
		return sb.Errorf(sb.CodeNotFound, "No %s with this id exists.", name)
	}
	return sb.Errorf(sb.CodeNotFound, "No %s with this id exists in the %s environment.", name, env)
}

// clientAddr is the address of the client that sent r: the connection's
// peer. (Behind a reverse proxy every client has the proxy's address; see
// the README on failed-authentication throttling.)
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	return host
}

// tenantBucket names the rate-limit bucket of a tenant's total; key ids
// (ULIDs, and "idp:..." for tokens) never take this form.
func tenantBucket(tenantID string) string { return "tenant:" + tenantID }

// secondsToNextDay is the Retry-After of a daily limit: whole seconds until
// the next UTC day begins, at least 1.
func secondsToNextDay(now time.Time) int {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	return max(1, int((next.Sub(now)+time.Second-1)/time.Second))
}

func secondsToNextMonth(now time.Time) int {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	return int(next.Sub(now)/time.Second) + 1
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	writeData(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// Check is the state of one thing a node needs, as GET /readyz reports it.
type Check struct {
	// Status is CheckOK, CheckDegraded (the node serves, with a fallback
	// or more slowly) or CheckDown (the node cannot serve).
	Status string `json:"status"`
	// Detail says what is wrong, or which backend is in use.
	Detail string `json:"detail,omitempty"`
	// Code is the error code /readyz answers with while this check is
	// down.
	Code sb.Code `json:"-"`
}

// The statuses of a Check.
const (
	CheckOK       = "ok"
	CheckDegraded = "degraded"
	CheckDown     = "down"
)

// readyTimeout bounds the checks of /readyz, below the 1 s a Kubernetes
// probe waits by default.
const readyTimeout = 800 * time.Millisecond

// ready answers GET /readyz: 200 with status "ready" when every check is
// ok, 200 with status "degraded" when some is degraded (the node still
// serves: a load balancer should keep it), and 503 with the down check's
// code, and the checks in details, when the node cannot serve.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) error {
	checks := map[string]Check{}
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		checks = s.cfg.Ready(ctx)
		cancel()
	}
	status := "ready"
	for _, name := range slices.Sorted(maps.Keys(checks)) {
		switch c := checks[name]; c.Status {
		case CheckDown:
			w.Header().Set("Retry-After", "1")
			return &sb.Error{Code: c.Code, Message: "The node cannot serve: " + name + " is down (" + c.Detail + ").",
				Details: map[string]any{"checks": checks}}
		case CheckDegraded:
			status = "degraded"
		}
	}
	writeData(w, http.StatusOK, map[string]any{"status": status, "checks": checks})
	return nil
}

func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.openapi)
	return nil
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.cfg.Metrics.handler.ServeHTTP(w, r)
	return nil
}

// Background runs the server's periodic work (last-use and usage flushes)
// until ctx ends.
func (s *Server) Background(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.cfg.Meter.Run(ctx, 500*time.Millisecond); close(done) }()
	s.cfg.Auth.Run(ctx, 500*time.Millisecond)
	<-done
}
