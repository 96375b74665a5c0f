package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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
	UpdateWebhook(ctx context.Context, tenantID string, env sb.Environment, id string, patch sb.WebhookPatch, now time.Time) (*sb.Webhook, error)
	RecoverDeliveries(ctx context.Context, tenantID string, env sb.Environment, webhookID string, since, until, now time.Time) (int, error)
	CreateTestDelivery(ctx context.Context, tenantID string, env sb.Environment, webhookID, event string, payload []byte, now time.Time) (*sb.Delivery, error)
}

type webhooksView struct {
	Webhooks []webhookRow
	Events   []string
	Form     webhookForm
	Error    string
}

type webhookRow struct {
	*sb.Webhook
	Failed, Retrying int
}

type webhookForm struct {
	URL         string
	Events      map[string]bool
	RetryPolicy string
}

func newWebhookForm(r *http.Request) webhookForm {
	f := webhookForm{URL: strings.TrimSpace(r.PostFormValue("url")), Events: map[string]bool{}, RetryPolicy: r.PostFormValue("retry_policy")}
	for _, e := range r.PostForm["events"] {
		f.Events[e] = true
	}
	return f
}

// events returns the form's events in the order of sb.EventTypes, and any
// unknown one after them (which the checks refuse).
func (f webhookForm) events() []string {
	var out []string
	for _, e := range sb.EventTypes {
		if f.Events[e] {
			out = append(out, e)
		}
	}
	for e := range f.Events {
		if !slices.Contains(sb.EventTypes, e) {
			out = append(out, e)
		}
	}
	return out
}

func formOfWebhook(wh *sb.Webhook) webhookForm {
	f := webhookForm{URL: wh.URL, Events: map[string]bool{}, RetryPolicy: wh.RetryPolicy}
	for _, e := range wh.Events {
		f.Events[e] = true
	}
	return f
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
		Form: webhookForm{Events: map[string]bool{}, RetryPolicy: sb.RetryStandard}})
}

// createWebhook registers an endpoint, with the API's rules. A secret left
// empty is made here and shown once, as Svix's and Stripe's dashboards do.
func (h *Handler) createWebhook(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	form := newWebhookForm(r)
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
		return h.render(w, r, v, statusOf(e), "webhooks", "Webhooks", webhooksView{Webhooks: rows, Events: sb.EventTypes,
			Form: form, Error: e.Message})
	}
	if err := sb.CheckWebhookURL(form.URL); err != nil {
		return invalid(err)
	}
	events, err := sb.CheckWebhookEvents(form.events())
	if err != nil {
		return invalid(sb.Invalid("events", "Choose at least one event."))
	}
	if err := sb.CheckRetryPolicy(form.RetryPolicy); err != nil {
		return invalid(err)
	}
	made := secret == ""
	if made {
		if secret, err = newSigningSecret(); err != nil {
			return err
		}
	}
	if err := sb.CheckWebhookSecret(secret); err != nil {
		return invalid(err)
	}
	if err := h.cfg.URLChecker.CheckURL(ctx, form.URL); err != nil {
		return invalid(sb.Invalid("url", "url is not allowed: %s.", err.Error()))
	}
	hook := &sb.Webhook{ID: sb.NewID(), TenantID: v.tenant.ID, Env: v.env, URL: form.URL, Events: events, Secret: secret,
		RetryPolicy: form.RetryPolicy, CreatedAt: v.now.UTC().Truncate(time.Microsecond)}
	if err := h.cfg.Store.CreateWebhook(ctx, hook); err != nil {
		return invalid(err)
	}
	if !made {
		return h.redirect(w, r, v, v.base()+"/webhooks/"+hook.ID+"?notice=webhook-created", nil)
	}
	return h.redirect(w, r, v, v.base()+"/webhooks/"+hook.ID, &flash{Notice: "The webhook was created.",
		Secret: &shownSecret{WebhookID: hook.ID, URL: hook.URL, Secret: secret}})
}

// newSigningSecret makes a webhook signing secret, in the whsec_ form of
// Svix's and Stripe's.
func newSigningSecret() (string, error) {
	s, err := sb.NewDashboardSecret()
	return "whsec_" + s, err
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
	// The forms of the page: the webhook's settings, and the error of
	// the form that failed.
	Form      webhookForm
	Error     string
	Events    []string
	Windows   []recoverWindow
	Secret    *shownSecret
	PrevUntil *time.Time
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
	out.Form, out.Events, out.Windows = formOfWebhook(hook), sb.EventTypes, recoverWindows
	if hook.PreviousSecretActive(v.now) {
		out.PrevUntil = hook.PreviousSecretExpiresAt
	}
	if f := v.flash; f != nil && f.Secret != nil && f.Secret.WebhookID == hook.ID {
		out.Secret = f.Secret
	}
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
	return h.redirect(w, r, v, v.base()+"/webhooks?notice=webhook-deleted", nil)
}

// webhookFormError shows the webhook's page again with a form's error.
func (h *Handler) webhookFormError(w http.ResponseWriter, r *http.Request, v *visit, form *webhookForm, err error) error {
	e, ok := err.(*sb.Error)
	if !ok || e.Code == sb.CodeNotFound {
		return err
	}
	out, perr := h.webhookPage(r, v)
	if perr != nil {
		return perr
	}
	if form != nil {
		out.Form = *form
	}
	out.Error = e.Message
	return h.render(w, r, v, statusOf(e), "webhook", "Webhook "+out.Webhook.URL, out)
}

// updateWebhook changes a webhook's url, events and retry policy, with the
// API's rules (PATCH /v1/webhooks/{id}).
func (h *Handler) updateWebhook(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx, id := r.Context(), r.PathValue("id")
	cur, err := h.cfg.Store.Webhook(ctx, v.tenant.ID, v.env, id)
	if err != nil {
		return err
	}
	form := newWebhookForm(r)
	check := func() error {
		if err := sb.CheckWebhookURL(form.URL); err != nil {
			return err
		}
		if _, err := sb.CheckWebhookEvents(form.events()); err != nil {
			return sb.Invalid("events", "Choose at least one event.")
		}
		if err := sb.CheckRetryPolicy(form.RetryPolicy); err != nil {
			return err
		}
		if form.URL != cur.URL {
			if err := h.cfg.URLChecker.CheckURL(ctx, form.URL); err != nil {
				return sb.Invalid("url", "url is not allowed: %s.", err.Error())
			}
		}
		return nil
	}
	if err := check(); err != nil {
		return h.webhookFormError(w, r, v, &form, err)
	}
	events, _ := sb.CheckWebhookEvents(form.events())
	patch := sb.WebhookPatch{URL: &form.URL, Events: events, RetryPolicy: &form.RetryPolicy}
	if _, err := h.cfg.Store.UpdateWebhook(ctx, v.tenant.ID, v.env, id, patch, v.now.UTC().Truncate(time.Microsecond)); err != nil {
		return h.webhookFormError(w, r, v, &form, err)
	}
	return h.redirect(w, r, v, v.base()+"/webhooks/"+id+"?notice=webhook-updated", nil)
}

// rotateSecret gives a webhook a new signing secret (the one typed, or one
// made here and shown once); the old one goes on signing beside it for
// sb.SecretOverlap, as with PATCH /v1/webhooks/{id}.
func (h *Handler) rotateSecret(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx, id := r.Context(), r.PathValue("id")
	secret := r.PostFormValue("secret")
	made := secret == ""
	var err error
	if made {
		if secret, err = newSigningSecret(); err != nil {
			return err
		}
	} else if err := sb.CheckWebhookSecret(secret); err != nil {
		return h.webhookFormError(w, r, v, nil, err)
	}
	hook, err := h.cfg.Store.UpdateWebhook(ctx, v.tenant.ID, v.env, id, sb.WebhookPatch{Secret: &secret}, v.now.UTC().Truncate(time.Microsecond))
	if err != nil {
		return h.webhookFormError(w, r, v, nil, err)
	}
	f := &flash{Notice: "The signing secret was changed. The old one goes on signing beside it for 24 hours: move your receiver to the new one within them."}
	if made {
		f.Secret = &shownSecret{WebhookID: hook.ID, URL: hook.URL, Secret: secret, Rotated: true}
	}
	return h.redirect(w, r, v, v.base()+"/webhooks/"+id, f)
}

// testPayload is the body of a test event: a message between numbers of
// the simulator's, whose id names no message.
func testPayload(event string, now time.Time) []byte {
	if sb.IsPhoneEvent(event) {
		return sb.NewPhoneEventPayload(sb.PhoneEvent{Event: event, PhoneID: sb.NewID(), Number: "+15550100001",
			Reason: "test event: no phone changed"}, now)
	}
	m := &sb.Message{ID: sb.NewID(), From: "+15550100001", To: "+15005550006", Channel: sb.ChannelSMS}
	switch event {
	case sb.EventReceived:
		m.From, m.To, m.Body = m.To, m.From, "This is a test event sent from the Switchboard dashboard."
	case sb.EventFailed:
		m.FailureReason, m.ErrorCode = "test event: no message failed", string(sb.CodeDeliveryFailed)
	}
	return sb.NewEventPayload(event, m, now)
}

// sendTestEvent queues a delivery of a test event of the chosen type to
// the webhook: the same request as a real event's, signed and retried the
// same way, whose message_id names no message.
func (h *Handler) sendTestEvent(w http.ResponseWriter, r *http.Request, v *visit) error {
	event := r.PostFormValue("event")
	if !slices.Contains(sb.EventTypes, event) {
		return h.webhookFormError(w, r, v, nil, sb.Invalid("event", "Choose an event type."))
	}
	now := v.now.UTC().Truncate(time.Microsecond)
	if _, err := h.cfg.Store.CreateTestDelivery(r.Context(), v.tenant.ID, v.env, r.PathValue("id"), event, testPayload(event, now), now); err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/webhooks/"+r.PathValue("id")+"?notice=test-sent", nil)
}

// recoverWindow is a choice of the recover form: how far back it reaches.
type recoverWindow struct {
	Value, Label string
	Span         time.Duration
}

var recoverWindows = []recoverWindow{
	{"1h", "the last hour", time.Hour}, {"6h", "the last 6 hours", 6 * time.Hour}, {"24h", "the last 24 hours", 24 * time.Hour},
	{"7d", "the last 7 days", 7 * 24 * time.Hour}, {"30d", "the last 30 days", 30 * 24 * time.Hour},
}

// recoverDeliveries sends again every failed delivery of the webhook whose
// event happened within the chosen window, as POST
// /v1/webhooks/{id}/recover does.
func (h *Handler) recoverDeliveries(w http.ResponseWriter, r *http.Request, v *visit) error {
	var span time.Duration
	for _, rw := range recoverWindows {
		if rw.Value == r.PostFormValue("since") {
			span = rw.Span
		}
	}
	if span == 0 {
		return h.webhookFormError(w, r, v, nil, sb.Invalid("since", "Choose how far back to recover."))
	}
	now := v.now.UTC().Truncate(time.Microsecond)
	n, err := h.cfg.Store.RecoverDeliveries(r.Context(), v.tenant.ID, v.env, r.PathValue("id"), now.Add(-span), now, now)
	if err != nil {
		return err
	}
	notice := "No failed delivery in that time: nothing to send again."
	switch {
	case n == 1:
		notice = "1 failed delivery is being sent again."
	case n > 1:
		notice = strconv.Itoa(n) + " failed deliveries are being sent again."
	}
	return h.redirect(w, r, v, v.base()+"/webhooks/"+r.PathValue("id"), &flash{Notice: notice})
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
	return h.redirect(w, r, v, back, nil)
}
