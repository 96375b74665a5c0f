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
	RevokeKey(ctx context.Context, tenantID, id string, now time.Time) (*sb.APIKey, error)
}

type keysView struct {
	Keys []keyRow
	// Created is the key just created, shown this once.
	Created *keyRow
	Text    string
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

func (h *Handler) keys(w http.ResponseWriter, r *http.Request, v *visit) error {
	rows, err := h.envKeys(r.Context(), v)
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "keys", "API keys", keysView{Keys: rows})
}

// createKey creates a key of the page's environment and shows its text,
// this once: only its hash is stored.
func (h *Handler) createKey(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	form := keyForm{Name: r.PostFormValue("name"), RateLimit: strings.TrimSpace(r.PostFormValue("rate_limit"))}
	invalid := func(err error) error {
		e, ok := err.(*sb.Error)
		if !ok {
			return err
		}
		rows, lerr := h.envKeys(ctx, v)
		if lerr != nil {
			return lerr
		}
		return h.render(w, r, v, http.StatusBadRequest, "keys", "API keys", keysView{Keys: rows, Form: form, Error: e.Message})
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
	rows, err := h.envKeys(ctx, v)
	if err != nil {
		return err
	}
	created := keyRow{APIKey: k, Limit: k.EffectiveRateLimit(v.plan), Own: limit > 0}
	return h.render(w, r, v, http.StatusCreated, "keys", "API keys", keysView{Keys: rows, Created: &created, Text: text})
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

func (h *Handler) confirmRevokeKey(w http.ResponseWriter, r *http.Request, v *visit) error {
	k, err := h.envKey(r.Context(), v, r.PathValue("id"))
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "revoke", "Revoke "+k.Name, k)
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
