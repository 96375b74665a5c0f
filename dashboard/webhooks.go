package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// WebhookStore is what the webhook pages need from storage.
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w *sb.Webhook) error
	Webhooks(ctx context.Context, tenantID string, env sb.Environment) ([]*sb.Webhook, error)
	Webhook(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Webhook, error)
	DeleteWebhook(ctx context.Context, tenantID string, env sb.Environment, id string, now time.Time) error
	Deliveries(ctx context.Context, tenantID string, env sb.Environment, webhookID string, p sb.Page) ([]*sb.Delivery, error)
	RetryDelivery(ctx context.Context, tenantID string, env sb.Environment, webhookID, id string, now time.Time) (*sb.Delivery, error)
	WebhookHealth(ctx context.Context, tenantID string, env sb.Environment, webhookIDs []string, since time.Time) ([]sb.WebhookHealth, error)
}

type webhooksView struct {
	Webhooks []webhookRow
	Events   []string
	Form     webhookForm
	Error    string
	// Secret is a secret the dashboard made for the webhook just created,
	// shown this once.
	Created *sb.Webhook
	Secret  string
}

type webhookRow struct {
	*sb.Webhook
	Failed, Retrying int
}

type webhookForm struct {
	URL    string
	Events map[string]bool
}

func (h *Handler) webhookRows(ctx context.Context, v *visit) ([]webhookRow, error) {
	hooks, err := h.cfg.Store.Webhooks(ctx, v.tenant.ID, v.env)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(hooks))
	for i, wh := range hooks {
		ids[i] = wh.ID
	}
	health, err := h.cfg.Store.WebhookHealth(ctx, v.tenant.ID, v.env, ids, v.now.Add(-failingHookDays*24*time.Hour))
	if err != nil {
		return nil, err
	}
	byID := map[string]sb.WebhookHealth{}
	for _, hh := range health {
		byID[hh.WebhookID] = hh
	}
	out := make([]webhookRow, len(hooks))
	for i, wh := range hooks {
		out[i] = webhookRow{Webhook: wh, Failed: byID[wh.ID].Failed, Retrying: byID[wh.ID].Retrying}
	}
	return out, nil
}

func (h *Handler) webhooks(w http.ResponseWriter, r *http.Request, v *visit) error {
	rows, err := h.webhookRows(r.Context(), v)
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "webhooks", "Webhooks", webhooksView{Webhooks: rows, Events: sb.EventTypes,
		Form: webhookForm{Events: map[string]bool{}}})
}

// createWebhook registers an endpoint, with the API's rules. A secret left
// empty is made here and shown once, as Svix's and Stripe's dashboards do.
func (h *Handler) createWebhook(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	form := webhookForm{URL: strings.TrimSpace(r.PostFormValue("url")), Events: map[string]bool{}}
	events := r.PostForm["events"]
	for _, e := range events {
		form.Events[e] = true
	}
	secret := r.PostFormValue("secret")
	invalid := func(err error) error {
		e, ok := err.(*sb.Error)
		if !ok {
			return err
		}
		rows, lerr := h.webhookRows(ctx, v)
		if lerr != nil {
			return lerr
		}
		return h.render(w, r, v, http.StatusBadRequest, "webhooks", "Webhooks", webhooksView{Webhooks: rows, Events: sb.EventTypes, Form: form, Error: e.Message})
	}
	if err := sb.CheckWebhookURL(form.URL); err != nil {
		return invalid(err)
	}
	events, err := sb.CheckWebhookEvents(events)
	if err != nil {
		return invalid(sb.Invalid("events", "Choose at least one event."))
	}
	made := ""
	if secret == "" {
		s, err := sb.NewDashboardSecret()
		if err != nil {
			return err
		}
		secret, made = "whsec_"+s, "whsec_"+s
	}
	if err := sb.CheckWebhookSecret(secret); err != nil {
		return invalid(err)
	}
	if err := h.cfg.URLChecker.CheckURL(ctx, form.URL); err != nil {
		return invalid(sb.Invalid("url", "url is not allowed: %s.", err.Error()))
	}
	hook := &sb.Webhook{ID: sb.NewID(), TenantID: v.tenant.ID, Env: v.env, URL: form.URL, Events: events, Secret: secret,
		CreatedAt: v.now.UTC().Truncate(time.Microsecond)}
	if err := h.cfg.Store.CreateWebhook(ctx, hook); err != nil {
		return invalid(err)
	}
	if made == "" {
		http.Redirect(w, r, v.base()+"/webhooks/"+hook.ID+"?notice=webhook-created", http.StatusSeeOther)
		return nil
	}
	rows, err := h.webhookRows(ctx, v)
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusCreated, "webhooks", "Webhooks", webhooksView{Webhooks: rows, Events: sb.EventTypes,
		Form: webhookForm{Events: map[string]bool{}}, Created: hook, Secret: made})
}

// deliveryPageSize is the deliveries of a page of a webhook's log.
const deliveryPageSize = 25

type webhookView struct {
	Webhook    *sb.Webhook
	Deliveries []*sb.Delivery
	// Live is set on the first page, where new deliveries appear: the
	// log refreshes.
	Live        bool
	Next, First string
	After       string
}

// webhookLog reads a page of a webhook's delivery log.
func (h *Handler) webhookLog(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.webhookPage(r, v)
	if err != nil {
		return err
	}
	return h.renderFragment(w, r, v, "webhook", "log", out)
}

func (h *Handler) webhookPage(r *http.Request, v *visit) (*webhookView, error) {
	ctx := r.Context()
	hook, err := h.cfg.Store.Webhook(ctx, v.tenant.ID, v.env, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	after := r.URL.Query().Get("after")
	ds, err := h.cfg.Store.Deliveries(ctx, v.tenant.ID, v.env, hook.ID, sb.Page{After: after, Limit: deliveryPageSize})
	if err != nil {
		return nil, err
	}
	out := &webhookView{Webhook: hook, After: after}
	if len(ds) > deliveryPageSize {
		ds = ds[:deliveryPageSize]
		out.Next = v.base() + "/webhooks/" + hook.ID + "?" + url.Values{"after": {ds[len(ds)-1].ID}}.Encode()
	}
	if after != "" {
		out.First = v.base() + "/webhooks/" + hook.ID
	}
	out.Live = after == ""
	out.Deliveries = ds
	return out, nil
}

// webhook shows an endpoint and its delivery log, newest first, each
// delivery with its attempts: status code, error and duration.
func (h *Handler) webhook(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.webhookPage(r, v)
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "webhook", "Webhook "+out.Webhook.URL, out)
}

func (h *Handler) confirmDeleteWebhook(w http.ResponseWriter, r *http.Request, v *visit) error {
	hook, err := h.cfg.Store.Webhook(r.Context(), v.tenant.ID, v.env, r.PathValue("id"))
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "deletewebhook", "Delete webhook", hook)
}

func (h *Handler) deleteWebhook(w http.ResponseWriter, r *http.Request, v *visit) error {
	if err := h.cfg.Store.DeleteWebhook(r.Context(), v.tenant.ID, v.env, r.PathValue("id"), v.now); err != nil {
		return err
	}
	http.Redirect(w, r, v.base()+"/webhooks?notice=webhook-deleted", http.StatusSeeOther)
	return nil
}

// retryDelivery sends a failed delivery again with a fresh cycle of
// retries, as the API's retry does; the page it returns to shows the new
// attempt when it is made.
func (h *Handler) retryDelivery(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx, hookID := r.Context(), r.PathValue("id")
	if _, err := h.cfg.Store.Webhook(ctx, v.tenant.ID, v.env, hookID); err != nil {
		return err
	}
	if _, err := h.cfg.Store.RetryDelivery(ctx, v.tenant.ID, v.env, hookID, r.PathValue("delivery"), v.now); err != nil {
		return err
	}
	back := v.base() + "/webhooks/" + hookID + "?notice=delivery-retried"
	if m := r.PostFormValue("back"); m != "" && strings.HasPrefix(m, v.base()+"/messages/") && !strings.ContainsAny(m, "?#\\") {
		back = m + "?notice=delivery-retried"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}
