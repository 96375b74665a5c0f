package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/contactcsv"
)

// SessionStore is what sign-in and sessions need from storage.
type SessionStore interface {
	Tenant(ctx context.Context, id string) (*sb.Tenant, error)
	UseDashboardLink(ctx context.Context, tokenHash string, now time.Time) (string, error)
	CreateDashboardSession(ctx context.Context, s *sb.DashboardSession) error
	DashboardSessions(ctx context.Context, tenantID string, now time.Time) ([]*sb.DashboardSession, error)
	EndDashboardSession(ctx context.Context, tenantID, idHash, reason string) error
	EndDashboardSessionsExcept(ctx context.Context, tenantID, keep, reason string) error
	DashboardSession(ctx context.Context, idHash string, now time.Time) (*sb.DashboardSession, error)
	DeleteDashboardSession(ctx context.Context, idHash string) error
	EndDashboardSessions(ctx context.Context, tenantID, reason string) error
	Keys(ctx context.Context, tenantID string) ([]*sb.APIKey, error)
}

// cookieName holds the session id. The cookie holds nothing else: not the
// key a session was opened with, nor the tenant.
const cookieName = "switchboard_session"

// visit is a request of a signed-in tenant: the session, the tenant and
// its plan, and the environment of the page.
type visit struct {
	session *sb.DashboardSession
	tenant  *sb.Tenant
	plan    sb.Plan
	env     sb.Environment
	// csrf is the token every form of the session carries.
	csrf string
	now  time.Time
	// sid is the session id the browser sent, which seals its flashes;
	// flash is the one the page's address named, if any.
	sid   string
	flash *flash
}

// base is the path the pages of the visit's environment live under.
func (v *visit) base() string {
	if v.env == sb.Test {
		return "/dashboard/test"
	}
	return "/dashboard"
}

// csrfToken is the session's form token: an HMAC of the constant "csrf"
// keyed with the session id, which only the browser holding the cookie
// knows. It needs no storage and is the same on every node.
func csrfToken(sessionID string) string {
	m := hmac.New(sha256.New, []byte(sessionID))
	m.Write([]byte("switchboard dashboard csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// Body limits of a dashboard form: an import file, or anything else.
const (
	maxUploadBytes = contactcsv.MaxBytes + 64<<10
	maxFormBytes   = 1 << 20
)

// signedIn adapts a page of a signed-in tenant in env. A visitor without
// a valid session goes to the sign-in page (a fragment answers 401). A
// session of a suspended tenant is ended; a session opened with a key
// ends when the key is revoked or deactivated; a session opened with a
// test key sees only the test environment. Every unsafe request must carry
// the session's form token.
func (h *Handler) signedIn(env sb.Environment, fragment bool, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		v, sid, ended, err := h.visitOf(r, env)
		if err != nil {
			h.fail(w, r, nil, err)
			return
		}
		if v == nil {
			if sid != "" {
				h.clearCookie(w, r)
			}
			if fragment {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			q := url.Values{}
			if ended != "" {
				q.Set("ended", ended)
			}
			if r.Method == http.MethodGet {
				q.Set("next", r.URL.RequestURI())
			}
			http.Redirect(w, r, "/dashboard/login?"+q.Encode(), http.StatusSeeOther)
			return
		}
		if err := v.tenant.Access(v.now); err != nil {
			// A trial that ended: the pages refuse, as the API does.
			h.fail(w, r, nil, err)
			return
		}
		if env == sb.Live && v.session.TestOnly {
			h.renderError(w, r, v, http.StatusForbidden, "You signed in with a test key, so this session sees the test environment only. Sign in with a live key or a sign-in link to see live data.")
			return
		}
		if r.Method == http.MethodGet {
			if v.flash, err = h.takeFlash(r, v); err != nil {
				h.fail(w, r, v, err)
				return
			}
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			limit := int64(maxFormBytes)
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
				limit = maxUploadBytes
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			if err := parseForm(r); err != nil {
				h.fail(w, r, v, err)
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(v.csrf)) != 1 {
				h.renderError(w, r, v, http.StatusForbidden, "This form is out of date or did not come from your dashboard, so it was refused. Reload the page and send it again.")
				return
			}
		}
		if err := fn(w, r, v); err != nil {
			h.fail(w, r, v, err)
		}
	})
}

// parseForm reads an urlencoded or multipart form.
func parseForm(r *http.Request) error {
	var err error
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		err = r.ParseMultipartForm(8 << 20)
	} else {
		err = r.ParseForm()
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return sb.Errorf(sb.CodePayloadTooLarge, "The form is larger than %d bytes.", mbe.Limit)
	}
	if err != nil {
		return sb.Errorf(sb.CodeValidation, "The form could not be read.")
	}
	return nil
}

// visitOf finds the request's session. It returns a nil visit when there
// is none, with the session id the cookie held (to clear) and, when the
// session was ended by a rule, why ("suspended" or "key").
func (h *Handler) visitOf(r *http.Request, env sb.Environment) (v *visit, sid, ended string, err error) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil, "", "", nil
	}
	sid = c.Value
	ctx, now := r.Context(), h.cfg.Now()
	s, err := h.cfg.Store.DashboardSession(ctx, sb.HashSecret(sid), now)
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return nil, sid, "", nil
	}
	if err != nil {
		return nil, sid, "", err
	}
	// The lookup was by hash; compare again in constant time, as the API's
	// key check does.
	if subtle.ConstantTimeCompare([]byte(s.IDHash), []byte(sb.HashSecret(sid))) != 1 {
		return nil, sid, "", nil
	}
	if s.Ended != "" {
		if err := h.cfg.Store.DeleteDashboardSession(ctx, s.IDHash); err != nil {
			return nil, sid, "", err
		}
		return nil, sid, s.Ended, nil
	}
	t, err := h.cfg.Store.Tenant(ctx, s.TenantID)
	if err != nil {
		return nil, sid, "", err
	}
	if t.Status == sb.TenantSuspended {
		// Suspended by a node that has not ended the sessions yet, or
		// by an older version: end them now.
		if err := h.cfg.Store.EndDashboardSessions(ctx, t.ID, sb.SessionEndedSuspended); err != nil {
			return nil, sid, "", err
		}
		if err := h.cfg.Store.DeleteDashboardSession(ctx, s.IDHash); err != nil {
			return nil, sid, "", err
		}
		return nil, sid, sb.SessionEndedSuspended, nil
	}
	if s.Method == sb.SignInKey {
		alive, err := h.keyAlive(ctx, s)
		if err != nil {
			return nil, sid, "", err
		}
		if !alive {
			if err := h.cfg.Store.DeleteDashboardSession(ctx, s.IDHash); err != nil {
				return nil, sid, "", err
			}
			return nil, sid, sb.SessionEndedKey, nil
		}
	}
	return &visit{session: s, tenant: t, plan: h.cfg.Plans[t.Plan], env: env, csrf: csrfToken(sid), now: now, sid: sid}, sid, "", nil
}

// keyAlive reports whether the key a session was opened with is still
// active.
func (h *Handler) keyAlive(ctx context.Context, s *sb.DashboardSession) (bool, error) {
	keys, err := h.cfg.Store.Keys(ctx, s.TenantID)
	if err != nil {
		return false, err
	}
	for _, k := range keys {
		if k.ID == s.KeyID {
			return k.Status == sb.KeyActive, nil
		}
	}
	return false, nil
}

// startSession opens a session for tenant and sets its cookie.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, s *sb.DashboardSession) error {
	sid, err := sb.NewDashboardSecret()
	if err != nil {
		return err
	}
	now := h.cfg.Now().UTC().Truncate(time.Microsecond)
	s.IDHash, s.CreatedAt, s.ExpiresAt = sb.HashSecret(sid), now, now.Add(sb.DashboardSessionTTL)
	if err := h.cfg.Store.CreateDashboardSession(r.Context(), s); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: sid, Path: Prefix, MaxAge: int(sb.DashboardSessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: h.secure(r)})
	return nil
}

func (h *Handler) clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: h.secure(r)})
}

// secure reports whether cookies must be Secure: served over TLS, or
// behind a proxy that terminates it (an https --public-url).
func (h *Handler) secure(r *http.Request) bool { return r.TLS != nil || h.secureCookies }

// loginView is the sign-in page.
type loginView struct {
	Next  string
	Error string
	Ended string
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	return h.render(w, r, nil, http.StatusOK, "login", "Sign in", loginView{Next: safeNext(q.Get("next")), Ended: q.Get("ended")})
}

// safeNext returns next when it is a dashboard page of this site, else "".
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.ContainsAny(next, "\\\r\n") || strings.Contains(next, "//") ||
		strings.HasPrefix(next, "/dashboard/login") {
		return ""
	}
	return next
}

// loginWithKey exchanges a pasted API key for a session. The key goes
// through the API's authentication (with its throttling of failed
// attempts per client address) and is never kept: the session remembers
// the key's id, and ends when the key is revoked or deactivated.
func (h *Handler) loginWithKey(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := parseForm(r); err != nil {
		return err
	}
	next := safeNext(r.PostFormValue("next"))
	key := strings.TrimSpace(r.PostFormValue("key"))
	refuse := func(status int, msg string) error {
		return h.render(w, r, nil, status, "login", "Sign in", loginView{Next: next, Error: msg})
	}
	if _, ok := sb.ParseKeyText(key); !ok {
		return refuse(http.StatusUnauthorized, "That is not an API key: keys begin svc_live_ or svc_test_ and have 32 more letters and digits.")
	}
	p, err := h.cfg.Auth.Authenticate(r.Context(), "Bearer "+key, clientAddr(r))
	if err != nil {
		var th *auth.Throttled
		switch {
		case errors.As(err, &th):
			w.Header().Set("Retry-After", strconv.Itoa(th.RetryAfter))
			return refuse(http.StatusTooManyRequests, "Too many failed attempts from your address. Try again in "+strconv.Itoa(th.RetryAfter)+" seconds.")
		case sb.ErrorCode(err) == sb.CodeInvalidAPIKey:
			return refuse(http.StatusUnauthorized, "That key is not valid: it may have been revoked, or mistyped.")
		case sb.ErrorCode(err) == sb.CodeKeyInactive:
			return refuse(http.StatusForbidden, "That key is deactivated.")
		case sb.ErrorCode(err) == sb.CodeTenantSuspended, sb.ErrorCode(err) == sb.CodeTrialExpired:
			return refuse(http.StatusForbidden, err.(*sb.Error).Message)
		}
		return err
	}
	s := &sb.DashboardSession{TenantID: p.Tenant.ID, Method: sb.SignInKey, KeyID: p.Key.ID, TestOnly: p.Env == sb.Test}
	if err := h.startSession(w, r, s); err != nil {
		return err
	}
	if next == "" || (s.TestOnly && !strings.HasPrefix(next, "/dashboard/test/")) {
		next = "/dashboard/"
		if s.TestOnly {
			next = "/dashboard/test/"
		}
	}
	http.Redirect(w, r, h.afterSignIn(r, s, next), http.StatusSeeOther)
	return nil
}

// linkView is the page a sign-in link opens: a button that signs in. The
// link itself changes nothing, so a mail scanner or a preview that fetches
// it does not use it up.
type linkView struct {
	Token string
	Error string
}

func (h *Handler) linkPage(w http.ResponseWriter, r *http.Request) error {
	return h.render(w, r, nil, http.StatusOK, "link", "Sign in", linkView{Token: r.URL.Query().Get("token")})
}

var errBadLink = "This sign-in link is not valid: it was already used, it expired (links last 15 minutes), or it was mistyped. Ask your operator for a new one, or sign in with an API key."

func (h *Handler) loginWithLink(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := parseForm(r); err != nil {
		return err
	}
	ctx, now := r.Context(), h.cfg.Now().UTC()
	token := r.PostFormValue("token")
	tenantID, err := h.cfg.Store.UseDashboardLink(ctx, sb.HashSecret(token), now)
	if sb.ErrorCode(err) == sb.CodeNotFound || token == "" {
		return h.render(w, r, nil, http.StatusUnauthorized, "link", "Sign in", linkView{Error: errBadLink})
	}
	if err != nil {
		return err
	}
	t, err := h.cfg.Store.Tenant(ctx, tenantID)
	if err != nil {
		return err
	}
	if err := t.Access(now); err != nil {
		return h.render(w, r, nil, http.StatusForbidden, "link", "Sign in", linkView{Error: err.(*sb.Error).Message})
	}
	s := &sb.DashboardSession{TenantID: t.ID, Method: sb.SignInLink}
	if err := h.startSession(w, r, s); err != nil {
		return err
	}
	http.Redirect(w, r, h.afterSignIn(r, s, "/dashboard/"), http.StatusSeeOther)
	return nil
}

// logout ends the session. It needs the session's form token, so that
// another site cannot sign a visitor out.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := parseForm(r); err != nil {
		return err
	}
	if c, err := r.Cookie(cookieName); err == nil && c.Value != "" {
		if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(csrfToken(c.Value))) != 1 {
			h.renderError(w, r, nil, http.StatusForbidden, "This form is out of date or did not come from your dashboard, so it was refused.")
			return nil
		}
		if err := h.cfg.Store.DeleteDashboardSession(r.Context(), sb.HashSecret(c.Value)); err != nil {
			return err
		}
	}
	h.clearCookie(w, r)
	http.Redirect(w, r, "/dashboard/login?ended=signed-out", http.StatusSeeOther)
	return nil
}

// clientAddr is the address of the client that sent r (see httpapi).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	return host
}
