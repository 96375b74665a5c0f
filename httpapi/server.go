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
	"net"
	"net/http"
	"strconv"
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
	// URLChecker vets webhook urls at registration (SSRF).
	URLChecker URLChecker
	Metrics    *Metrics
	Now        func() time.Time
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
	s := &Server{cfg: cfg, mux: http.NewServeMux(), now: cfg.Now, reqBase: "req_" + hex.EncodeToString(b[:])}
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
	s.mux.Handle("GET /v1/openapi.json", s.public(s.serveOpenAPI))
	s.mux.Handle("GET /metrics", s.public(s.serveMetrics))
	s.mux.Handle("GET /docs", s.public(docsPage.serve))
	s.mux.Handle("GET /docs/redoc.standalone.js", s.public(docsScript.serve))
	s.mux.Handle("GET /docs/redoc.standalone.js.LICENSE.txt", s.public(docsLicense.serve))

	s.mux.Handle("POST /v1/api-keys", s.authed(s.createKey))
	s.mux.Handle("GET /v1/api-keys", s.authed(s.listKeys))
	s.mux.Handle("DELETE /v1/api-keys/{id}", s.authed(s.revokeKey))

	s.mux.Handle("POST /v1/messages", s.authed(s.sendMessage))
	s.mux.Handle("GET /v1/messages", s.authed(s.listMessages))
	s.mux.Handle("GET /v1/messages/{id}", s.authed(s.getMessage))

	s.mux.Handle("POST /v1/templates", s.authed(s.createTemplate))
	s.mux.Handle("GET /v1/templates", s.authed(s.listTemplates))
	s.mux.Handle("GET /v1/templates/{id}", s.authed(s.getTemplate))
	s.mux.Handle("DELETE /v1/templates/{id}", s.authed(s.deleteTemplate))

	s.mux.Handle("POST /v1/webhooks", s.authed(s.createWebhook))
	s.mux.Handle("GET /v1/webhooks", s.authed(s.listWebhooks))
	s.mux.Handle("DELETE /v1/webhooks/{id}", s.authed(s.deleteWebhook))
	s.mux.Handle("GET /v1/webhooks/{id}/deliveries", s.authed(s.listDeliveries))
	s.mux.Handle("POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry", s.authed(s.retryDelivery))

	s.mux.Handle("POST /v1/contacts", s.authed(s.createContact))
	s.mux.Handle("GET /v1/contacts", s.authed(s.listContacts))
	s.mux.Handle("POST /v1/contacts/import", s.authed(s.importContacts))
	s.mux.Handle("GET /v1/contacts/{id}", s.authed(s.getContact))
	s.mux.Handle("PATCH /v1/contacts/{id}", s.authed(s.updateContact))
	s.mux.Handle("DELETE /v1/contacts/{id}", s.authed(s.deleteContact))

	s.mux.Handle("POST /v1/campaigns", s.authed(s.createCampaign))
	s.mux.Handle("GET /v1/campaigns", s.authed(s.listCampaigns))
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

// ServeHTTP gives every request an id, recovers panics into a 500 envelope,
// renders the mux's own 404 and 405 as envelopes and records metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := s.reqBase + "_" + strconv.FormatUint(s.reqSeq.Add(1), 36)
	w.Header().Set("X-Request-Id", id)
	rw := &recorder{ResponseWriter: w}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			slog.Error("panic", "request_id", id, "method", r.Method, "path", r.URL.Path, "panic", v)
			if rw.status == 0 {
				rw.routed = true
				writeError(rw, r, errPanic)
			}
		}
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		s.cfg.Metrics.observe(route, rw.status, time.Since(start))
	}()
	s.mux.ServeHTTP(rw, r)
	if rw.hijacked {
		rw.routed = true
		hdr := w.Header()
		delete(hdr, "X-Content-Type-Options")
		if rw.status == http.StatusMethodNotAllowed {
			writeError(rw.ResponseWriter, r, sb.Errorf(sb.CodeMethodNotAllowed, "Method %s is not allowed on %s.", r.Method, r.URL.Path))
			return
		}
		writeError(rw.ResponseWriter, r, sb.Errorf(sb.CodeNotFound, "No route matches %s %s.", r.Method, r.URL.Path))
	}
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
			writeError(w, r, err)
		}
	})
}

// authed adapts a handler of an authenticated route. Checks run in the
// contract's order: authentication (401/403), rate limits (429
// RATE_LIMIT_EXCEEDED: the key's, then the tenant's total), monthly quota
// (429 QUOTA_EXCEEDED), then the handler.
func (s *Server) authed(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rw, ok := w.(*recorder); ok {
			rw.routed = true
		}
		if err := s.admit(w, r, h); err != nil {
			writeError(w, r, err)
		}
	})
}

func (s *Server) admit(w http.ResponseWriter, r *http.Request, h handlerFunc) error {
	ctx := r.Context()
	p, err := s.cfg.Auth.Authenticate(ctx, r.Header.Get("Authorization"), clientAddr(r))
	if err != nil {
		var th *auth.Throttled
		if errors.As(err, &th) {
			w.Header().Set("Retry-After", strconv.Itoa(th.RetryAfter))
		}
		return err
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
			return sb.Errorf(sb.CodeRateLimitExceeded, "Rate limit of %d requests per minute exceeded. Retry after %d seconds.", d.Limit, d.RetryAfterSeconds())
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
			return sb.Errorf(sb.CodeRateLimitExceeded, "The account's limit of %d requests per minute across all its keys is exceeded. Retry after %d seconds.", d.Limit, d.RetryAfterSeconds())
		}
	}
	if p.Env == sb.Live {
		now := s.now()
		if err := s.cfg.Meter.Take(ctx, p.Tenant.ID, p.Plan.MonthlyCalls, now); err != nil {
			if sb.ErrorCode(err) == sb.CodeQuotaExceeded {
				w.Header().Set("Retry-After", strconv.Itoa(secondsToNextMonth(now)))
			}
			return err
		}
	}
	return h(w, r, p)
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

func secondsToNextMonth(now time.Time) int {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	return int(next.Sub(now)/time.Second) + 1
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	writeData(w, http.StatusOK, map[string]string{"status": "ok"})
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
	s.cfg.Auth.Run(ctx, time.Second)
	<-done
}
