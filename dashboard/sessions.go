package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	sb "github.com/switchboard/switchboard"
)

// The sessions page: every browser signed in to the tenant's dashboard,
// how each signed in, and a way to sign any of them out, or all of them.
// The sessions are the account's, the same in both environments; a session
// opened with a test key sees test data only and manages no other session.

type sessionsView struct {
	Sessions []sessionRow
}

type sessionRow struct {
	*sb.DashboardSession
	// Ref names the session in the page's forms: its stored hash, which
	// opens nothing (the browser's cookie holds the id itself).
	Ref string
	// How says how it signed in: "sign-in link", or the key's name and
	// hint.
	How     string
	Current bool
}

// errTestOnlySessions is the answer to a session opened with a test key.
const errTestOnlySessions = "You signed in with a test key: this session cannot see or sign out the account's other sessions. Sign in with a live key or a sign-in link to manage them."

func (h *Handler) sessions(w http.ResponseWriter, r *http.Request, v *visit) error {
	if v.session.TestOnly {
		h.renderError(w, r, v, http.StatusForbidden, errTestOnlySessions)
		return nil
	}
	ctx := r.Context()
	list, err := h.cfg.Store.DashboardSessions(ctx, v.tenant.ID, v.now)
	if err != nil {
		return err
	}
	keys, err := h.cfg.Store.Keys(ctx, v.tenant.ID)
	if err != nil {
		return err
	}
	names := map[string]string{}
	for _, k := range keys {
		names[k.ID] = "the " + string(k.Environment) + " key “" + k.Name + "” (" + k.Hint + ")"
	}
	rows := make([]sessionRow, len(list))
	for i, s := range list {
		how := "a sign-in link"
		if s.Method == sb.SignInKey {
			how = names[s.KeyID]
			if how == "" {
				how = "an API key"
			}
		}
		rows[i] = sessionRow{DashboardSession: s, Ref: s.IDHash, How: how, Current: s.IDHash == v.session.IDHash}
	}
	return h.render(w, r, v, http.StatusOK, "sessions", "Sessions", sessionsView{Sessions: rows})
}

// endSessions signs out the session the form names (end=REF), every other
// session (end=others), or every session, this one included (end=all).
// The sessions signed out learn why when their browser comes back.
func (h *Handler) endSessions(w http.ResponseWriter, r *http.Request, v *visit) error {
	if v.session.TestOnly {
		h.renderError(w, r, v, http.StatusForbidden, errTestOnlySessions)
		return nil
	}
	ctx := r.Context()
	switch which := r.PostFormValue("end"); which {
	case "all":
		if err := h.cfg.Store.EndDashboardSessionsExcept(ctx, v.tenant.ID, "", sb.SessionEndedElsewhere); err != nil {
			return err
		}
		h.clearCookie(w, r)
		http.Redirect(w, r, "/dashboard/login?ended=signed-out-everywhere", http.StatusSeeOther)
		return nil
	case "others":
		if err := h.cfg.Store.EndDashboardSessionsExcept(ctx, v.tenant.ID, v.session.IDHash, sb.SessionEndedElsewhere); err != nil {
			return err
		}
		http.Redirect(w, r, v.base()+"/sessions?notice=sessions-ended", http.StatusSeeOther)
		return nil
	default:
		if which == v.session.IDHash || strings.TrimSpace(which) == "" {
			h.renderError(w, r, v, http.StatusBadRequest, "Choose another session to sign out; sign this one out with Sign out.")
			return nil
		}
		err := h.cfg.Store.EndDashboardSession(ctx, v.tenant.ID, which, sb.SessionEndedElsewhere)
		if sb.ErrorCode(err) == sb.CodeNotFound {
			http.Redirect(w, r, v.base()+"/sessions?notice=session-gone", http.StatusSeeOther)
			return nil
		}
		if err != nil {
			return err
		}
		http.Redirect(w, r, v.base()+"/sessions?notice=session-ended", http.StatusSeeOther)
		return nil
	}
}

// afterSignIn is where a new session goes: next, with a notice when other
// sessions of the tenant are open (a full session can review them).
func (h *Handler) afterSignIn(r *http.Request, s *sb.DashboardSession, next string) string {
	if s.TestOnly {
		return next
	}
	open, err := h.cfg.Store.DashboardSessions(r.Context(), s.TenantID, h.cfg.Now())
	if err != nil || len(open) < 2 {
		return next
	}
	u, err := url.Parse(next)
	if err != nil {
		return next
	}
	q := u.Query()
	q.Set("notice", "other-sessions")
	u.RawQuery = q.Encode()
	return u.String()
}
