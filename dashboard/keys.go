package dashboard

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// KeyStore is what the API keys page needs from storage.
type KeyStore interface {
	CreateKey(ctx context.Context, k *sb.APIKey) error
	Keys(ctx context.Context, tenantID string) ([]*sb.APIKey, error)
	RevokedKeys(ctx context.Context, tenantID string) ([]*sb.APIKey, error)
	RevokeKey(ctx context.Context, tenantID, id string, now time.Time) (*sb.APIKey, error)
}

type keysView struct {
	Keys []keyRow
	// Revoked are the environment's revoked keys, most recent first.
	Revoked []*sb.APIKey
	// Created is the key just created, shown this once (from the flash
	// of the form's redirect).
	Created *createdKey
	Form    keyForm
	Error   string
}

type keyRow struct {
	*sb.APIKey
	// Limit is the limit in force (0: none), Own whether it is the key's
	// own or the plan's.
	Limit int
	Own   bool
	// Current marks the key this session was opened with.
	Current bool
}

type keyForm struct {
	Name, RateLimit string
}

// envKeys lists the unrevoked keys of the page's environment, oldest
// first.
func (h *Handler) envKeys(ctx context.Context, v *visit) ([]keyRow, error) {
	keys, err := h.cfg.Store.Keys(ctx, v.tenant.ID)
	if err != nil {
		return nil, err
	}
	var out []keyRow
	for _, k := range keys {
		if k.Environment != v.env {
			continue
		}
		out = append(out, keyRow{APIKey: k, Limit: k.EffectiveRateLimit(v.plan), Own: k.RateLimit > 0,
			Current: v.session.Method == sb.SignInKey && v.session.KeyID == k.ID})
	}
	return out, nil
}

// keysPage reads the keys page: the environment's keys and its revoked
// ones.
func (h *Handler) keysPage(ctx context.Context, v *visit) (*keysView, error) {
	rows, err := h.envKeys(ctx, v)
	if err != nil {
		return nil, err
	}
	revoked, err := h.cfg.Store.RevokedKeys(ctx, v.tenant.ID)
	if err != nil {
		return nil, err
	}
	out := &keysView{Keys: rows}
	for _, k := range revoked {
		if k.Environment == v.env {
			out.Revoked = append(out.Revoked, k)
		}
	}
	return out, nil
}

func (h *Handler) keys(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.keysPage(r.Context(), v)
	if err != nil {
		return err
	}
	if v.flash != nil && v.flash.Key != nil && v.flash.Key.Environment == string(v.env) {
		out.Created = v.flash.Key
	}
	return h.render(w, r, v, http.StatusOK, "keys", "API keys", out)
}

// createKey creates a key of the page's environment and redirects to the
// keys page, which shows its text this once: only its hash is stored.
func (h *Handler) createKey(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	form := keyForm{Name: r.PostFormValue("name"), RateLimit: strings.TrimSpace(r.PostFormValue("rate_limit"))}
	invalid := func(err error) error {
		e, ok := err.(*sb.Error)
		if !ok {
			return err
		}
		out, lerr := h.keysPage(ctx, v)
		if lerr != nil {
			return lerr
		}
		out.Form, out.Error = form, e.Message
		return h.render(w, r, v, http.StatusBadRequest, "keys", "API keys", out)
	}
	if err := sb.CheckKeyName(form.Name); err != nil {
		return invalid(err)
	}
	limit := 0
	if form.RateLimit != "" {
		n, err := strconv.Atoi(form.RateLimit)
		if err != nil {
			return invalid(sb.Invalid("rate_limit", "The rate limit must be a whole number of requests per minute."))
		}
		if err := sb.CheckKeyRateLimit(n, v.plan); err != nil {
			return invalid(err)
		}
		limit = n
	}
	text, err := sb.NewKeyText(v.env)
	if err != nil {
		return err
	}
	k := &sb.APIKey{ID: sb.NewID(), TenantID: v.tenant.ID, Name: form.Name, Hash: sb.HashKey(text), Hint: sb.KeyHint(text),
		Environment: v.env, Status: sb.KeyActive, RateLimit: limit, CreatedAt: v.now.UTC().Truncate(time.Microsecond)}
	if err := h.cfg.Store.CreateKey(ctx, k); err != nil {
		return invalid(err)
	}
	return h.redirect(w, r, v, v.base()+"/keys", &flash{Key: &createdKey{ID: k.ID, Name: k.Name, Environment: string(k.Environment), Text: text}})
}

// envKey returns a key of the page's environment; a key of the other
// environment, or of another tenant, is not found.
func (h *Handler) envKey(ctx context.Context, v *visit, id string) (*keyRow, error) {
	rows, err := h.envKeys(ctx, v)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if rows[i].ID == id {
			return &rows[i], nil
		}
	}
	return nil, sb.ErrNotFound
}

type revokeView struct {
	*keyRow
	// LastLive is set when the key is the tenant's last active live key:
	// revoking it leaves no key that reaches live data.
	LastLive bool
}

func (h *Handler) confirmRevokeKey(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	k, err := h.envKey(ctx, v, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := revokeView{keyRow: k}
	if k.Environment == sb.Live && k.Status == sb.KeyActive {
		all, err := h.cfg.Store.Keys(ctx, v.tenant.ID)
		if err != nil {
			return err
		}
		out.LastLive = true
		for _, o := range all {
			if o.ID != k.ID && o.Environment == sb.Live && o.Status == sb.KeyActive {
				out.LastLive = false
			}
		}
	}
	return h.render(w, r, v, http.StatusOK, "revoke", "Revoke "+k.Name, out)
}

// revokeKey revokes a key for good; this node forgets it at once, and the
// others as the API's revocation makes them.
func (h *Handler) revokeKey(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	if _, err := h.envKey(ctx, v, r.PathValue("id")); err != nil {
		return err
	}
	k, err := h.cfg.Store.RevokeKey(ctx, v.tenant.ID, r.PathValue("id"), v.now)
	if err != nil {
		return err
	}
	h.cfg.Auth.ForgetKey(k.Hash)
	http.Redirect(w, r, v.base()+"/keys?notice=key-revoked", http.StatusSeeOther)
	return nil
}
