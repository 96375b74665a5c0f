// Package dashboard is the tenant's dashboard (docs/dashboard.md): HTML
// pages rendered on the server, one handler per page, with html/template
// templates and the stylesheet and script embedded beside them. It calls
// the same store methods and domain rules as the HTTP API (never the API
// itself), in the tenant's live or test environment.
//
// Pages work without JavaScript; a few lines of script (static/app.js)
// refresh the parts that change on their own (a campaign's progress, a
// webhook's delivery log). Sign-in is by a one-time link an operator makes
// or by pasting an API key; sessions are kept in the database (see
// session.go), and every form is protected against cross-site requests
// twice over: by the browser's Sec-Fetch-Site and Origin headers
// (http.CrossOriginProtection) and by a token tied to the session.
//
// It is not an admin console: an operator's commands stay in the CLI.
package dashboard

import (
	"context"
	"embed"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the dashboard is served.
const Prefix = "/dashboard/"

// Store is everything the pages need from storage: the union of the small
// interfaces each page declares.
type Store interface {
	SessionStore
	FlashStore
	TemplateStore
	OverviewStore
	KeyStore
	MessageStore
	WebhookStore
	PhoneStore
	ContactStore
	CampaignStore
}

// URLChecker vets a webhook url against SSRF, as the API does.
type URLChecker interface {
	CheckURL(ctx context.Context, raw string) error
}

// Config wires a Handler.
type Config struct {
	Store Store
	// Auth checks a pasted API key, with the API's throttling of failed
	// attempts, and forgets a revoked key at once.
	Auth       *auth.Authenticator
	Plans      sb.Plans
	Routing    sb.Routing
	URLChecker URLChecker
	// PublicURL, when set, is the base URL the service is reached at: the
	// server URL shown for pairing a phone, and (https) whether cookies
	// are Secure behind a proxy that terminates TLS.
	PublicURL string
	// Sender sends the send form's messages with the API's rules.
	Sender Sender
	// Engines are the chat engines tenants may bind numbers to themselves
	// (the providers file's tenants_may_bind), by name, with their types;
	// the phones page offers them.
	Engines map[string]string
	Now     func() time.Time
}

// Handler serves the dashboard under Prefix.
type Handler struct {
	cfg   Config
	mux   *http.ServeMux
	pages map[string]*pageTemplate
	csrf  *http.CrossOriginProtection
	// secureCookies is set when PublicURL is https; otherwise cookies are
	// Secure when the request came over TLS.
	secureCookies bool
}

// New returns the dashboard's handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), pages: pages, csrf: http.NewCrossOriginProtection()}
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Scheme == "https" {
		h.secureCookies = true
	}
	h.csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.renderError(w, r, nil, http.StatusForbidden, "This form was sent from another site, so it was refused. Open the dashboard and send it from there.")
	}))
	h.routes()
	return h, nil
}

// routes lists every route of the dashboard. Each page of a tenant's data
// is served twice: under /dashboard/ in the live environment and under
// /dashboard/test/ in the test environment, as Stripe's dashboard does, so
// that the environment is in every link and the switch is a link.
func (h *Handler) routes() {
	h.mux.HandleFunc("GET /dashboard/static/{file}", serveStatic)
	h.mux.Handle("GET /dashboard/login", h.public(h.loginPage))
	h.mux.Handle("POST /dashboard/login", h.public(h.loginWithKey))
	h.mux.Handle("GET /dashboard/login/link", h.public(h.linkPage))
	h.mux.Handle("POST /dashboard/login/link", h.public(h.loginWithLink))
	h.mux.Handle("POST /dashboard/logout", h.public(h.logout))

	h.page("GET /{$}", h.overview)

	h.page("GET /sessions", h.sessions)
	h.page("POST /sessions/end", h.endSessions)

	h.page("GET /keys", h.keys)
	h.page("POST /keys", h.createKey)
	h.page("GET /keys/{id}/revoke", h.confirmRevokeKey)
	h.page("POST /keys/{id}/revoke", h.revokeKey)

	h.page("GET /send", h.sendMessageForm)
	h.page("POST /send", h.sendMessage)
	h.page("GET /messages", h.messages)
	h.page("GET /messages/{id}", h.message)

	h.page("GET /templates", h.templates)
	h.page("POST /templates", h.createTemplate)
	h.page("GET /templates/{id}/delete", h.confirmDeleteTemplate)
	h.page("POST /templates/{id}/delete", h.deleteTemplate)

	h.page("GET /webhooks", h.webhooks)
	h.page("POST /webhooks", h.createWebhook)
	h.page("GET /webhooks/{id}", h.webhook)
	h.page("POST /webhooks/{id}", h.updateWebhook)
	h.fragment("GET /webhooks/{id}/log", h.webhookLog)
	h.page("POST /webhooks/{id}/secret", h.rotateSecret)
	h.page("POST /webhooks/{id}/test", h.sendTestEvent)
	h.page("POST /webhooks/{id}/recover", h.recoverDeliveries)
	h.page("GET /webhooks/{id}/delete", h.confirmDeleteWebhook)
	h.page("POST /webhooks/{id}/delete", h.deleteWebhook)
	h.page("POST /webhooks/{id}/deliveries/{delivery}/retry", h.retryDelivery)

	h.page("GET /phones", h.phones)
	h.page("POST /phones", h.addPhone)
	h.page("POST /phones/bind", h.bindPhone)
	h.page("GET /phones/{id}", h.phone)
	h.page("POST /phones/{id}", h.updatePhone)
	h.page("POST /phones/{id}/pairing", h.pairPhone)
	h.page("POST /phones/{id}/release", h.releasePhone)
	h.page("GET /phones/{id}/delete", h.confirmDeletePhone)
	h.page("POST /phones/{id}/delete", h.deletePhone)

	h.page("GET /contacts", h.contacts)
	h.page("POST /contacts", h.addContact)
	h.page("POST /contacts/import", h.importContacts)
	h.page("GET /contacts/{id}", h.contact)
	h.page("POST /contacts/{id}", h.updateContact)
	h.page("GET /contacts/{id}/delete", h.confirmDeleteContact)
	h.page("POST /contacts/{id}/delete", h.deleteContact)

	h.page("GET /campaigns", h.campaigns)
	h.page("POST /campaigns", h.createCampaign)
	h.page("GET /campaigns/{id}", h.campaign)
	h.fragment("GET /campaigns/{id}/progress", h.campaignProgress)
	h.page("POST /campaigns/{id}/launch", h.launchCampaign)
	h.page("GET /campaigns/{id}/cancel", h.confirmCancelCampaign)
	h.page("POST /campaigns/{id}/cancel", h.cancelCampaign)

	h.mux.Handle("/dashboard/", h.public(func(w http.ResponseWriter, r *http.Request) error {
		return errPageNotFound
	}))
}

// ServeHTTP serves a dashboard request: security headers, then the
// cross-origin check of every unsafe request, then the route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("X-Content-Type-Options", "nosniff")
	// No page may tell another site its address: a sign-in link carries
	// its token.
	hdr.Set("Referrer-Policy", "no-referrer")
	h.csrf.Handler(h.mux).ServeHTTP(w, r)
}

// handlerFunc is a page of a signed-in tenant.
type handlerFunc func(w http.ResponseWriter, r *http.Request, v *visit) error

// page serves h in the live environment at /dashboard/PATH and in the test
// environment at /dashboard/test/PATH.
func (h *Handler) page(pattern string, fn handlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	h.mux.Handle(method+" /dashboard"+path, h.signedIn(sb.Live, false, fn))
	h.mux.Handle(method+" /dashboard/test"+path, h.signedIn(sb.Test, false, fn))
}

// fragment is page for the parts of a page that the script refreshes: a
// visitor who is not signed in gets a bare 401, not the sign-in page.
func (h *Handler) fragment(pattern string, fn handlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	h.mux.Handle(method+" /dashboard"+path, h.signedIn(sb.Live, true, fn))
	h.mux.Handle(method+" /dashboard/test"+path, h.signedIn(sb.Test, true, fn))
}

// public adapts a handler that needs no session.
func (h *Handler) public(fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if err := fn(w, r); err != nil {
			h.fail(w, r, nil, err)
		}
	})
}

var errPageNotFound = sb.Errorf(sb.CodeNotFound, "There is no such page.")

// fail renders err as an error page: the one place that turns an error
// into a status for the dashboard. An *sb.Error shows its message; anything
// else is an internal failure, logged with the request id, of which the
// visitor learns only that id.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, v *visit, err error) {
	var e *sb.Error
	if !errors.As(err, &e) {
		id := w.Header().Get("X-Request-Id")
		if r.Context().Err() == nil {
			slog.Error("dashboard: internal error", "request_id", id, "method", r.Method, "path", r.URL.Path, "err", err)
		}
		h.renderError(w, r, v, http.StatusInternalServerError, "Something went wrong on our side. Quote request id "+id+" when contacting support.")
		return
	}
	status, msg := statusOf(e), e.Message
	if status == http.StatusNotFound {
		msg = "Not found: there is nothing here, or it is not yours to see."
	}
	h.renderError(w, r, v, status, msg)
}

// statusOf is the status of a page that answers e: a form re-shown with
// e's message, or the error page.
func statusOf(e *sb.Error) int {
	switch e.Code {
	case sb.CodeNotFound, sb.CodeContactNotFound, sb.CodeCampaignNotFound:
		return http.StatusNotFound
	case sb.CodeForbidden, sb.CodeTrialExpired, sb.CodeTenantSuspended:
		return http.StatusForbidden
	case sb.CodeCampaignNotDraft, sb.CodeDeliveryNotFailed, sb.CodeDuplicateContact, sb.CodeDuplicatePhone, sb.CodeDuplicateTemplate:
		return http.StatusConflict
	case sb.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case sb.CodeNoPhoneAvailable, sb.CodeDetectionUnavailable, sb.CodeChannelUnavailable, sb.CodeDatabaseUnavailable:
		return http.StatusServiceUnavailable
	case sb.CodeNewContactLimit, sb.CodeQuotaExceeded, sb.CodeRateLimitExceeded:
		return http.StatusTooManyRequests
	}
	return http.StatusBadRequest
}
