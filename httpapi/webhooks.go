package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
)

// WebhookStore is what the webhook routes need from storage.
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w *sb.Webhook) error
	Webhooks(ctx context.Context, tenantID string, env sb.Environment) ([]*sb.Webhook, error)
	Webhook(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Webhook, error)
	UpdateWebhook(ctx context.Context, tenantID string, env sb.Environment, id string, patch sb.WebhookPatch, now time.Time) (*sb.Webhook, error)
	DeleteWebhook(ctx context.Context, tenantID string, env sb.Environment, id string, now time.Time) error
	Deliveries(ctx context.Context, tenantID string, env sb.Environment, webhookID string, p sb.Page) ([]*sb.Delivery, error)
	Delivery(ctx context.Context, tenantID string, env sb.Environment, webhookID, id string) (*sb.Delivery, error)
	RetryDelivery(ctx context.Context, tenantID string, env sb.Environment, webhookID, id string, now time.Time) (*sb.Delivery, error)
	RecoverDeliveries(ctx context.Context, tenantID string, env sb.Environment, webhookID string, since, until, now time.Time) (int, error)
}

// URLChecker vets a webhook url against SSRF at registration.
type URLChecker interface {
	CheckURL(ctx context.Context, raw string) error
}

type webhookJSON struct {
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Environment string   `json:"environment"`
	RetryPolicy string   `json:"retry_policy"`
	// PreviousSecretExpiresAt is set while the secret a rotation replaced
	// still signs deliveries.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	CreatedAt               time.Time  `json:"created_at"`
}

func toWebhookJSON(w *sb.Webhook, now time.Time) webhookJSON {
	out := webhookJSON{ID: w.ID, URL: w.URL, Events: w.Events, Environment: string(w.Env), RetryPolicy: w.RetryPolicy, CreatedAt: w.CreatedAt}
	if w.PreviousSecretActive(now) {
		out.PreviousSecretExpiresAt = w.PreviousSecretExpiresAt
	}
	return out
}

type createWebhookRequest struct {
	URL    *string  `json:"url"`
	Events []string `json:"events"`
	Secret *string  `json:"secret"`
	// RetryPolicy is optional (default standard), but not null.
	RetryPolicy json.RawMessage `json:"retry_policy"`
}

// vetWebhookURL checks the address a webhook url resolves to (SSRF).
func (s *Server) vetWebhookURL(ctx context.Context, raw string) error {
	if err := s.cfg.URLChecker.CheckURL(ctx, raw); err != nil {
		return sb.Invalid("url", "url is not allowed: %s.", err.Error())
	}
	return nil
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var req createWebhookRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.URL == nil {
		return sb.Invalid("url", "url is required.")
	}
	if err := sb.CheckWebhookURL(*req.URL); err != nil {
		return err
	}
	events, err := sb.CheckWebhookEvents(req.Events)
	if err != nil {
		return err
	}
	if req.Secret == nil {
		return sb.Invalid("secret", "secret is required: %d to %d characters.", sb.MinSecretLength, sb.MaxSecretLength)
	}
	if err := sb.CheckWebhookSecret(*req.Secret); err != nil {
		return err
	}
	policy := sb.RetryStandard
	if req.RetryPolicy != nil {
		if err := json.Unmarshal(req.RetryPolicy, &policy); err != nil || string(req.RetryPolicy) == "null" {
			return sb.CheckRetryPolicy("")
		}
		if err := sb.CheckRetryPolicy(policy); err != nil {
			return err
		}
	}
	if err := s.vetWebhookURL(r.Context(), *req.URL); err != nil {
		return err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	hook := &sb.Webhook{ID: sb.NewID(), TenantID: p.Tenant.ID, Env: p.Env, URL: *req.URL, Events: events, Secret: *req.Secret,
		RetryPolicy: policy, CreatedAt: now}
	if err := s.cfg.Store.CreateWebhook(r.Context(), hook); err != nil {
		return err
	}
	writeData(w, http.StatusCreated, toWebhookJSON(hook, now))
	return nil
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	hook, err := s.cfg.Store.Webhook(r.Context(), p.Tenant.ID, p.Env, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, toWebhookJSON(hook, s.now()))
	return nil
}

type updateWebhookRequest struct {
	URL         json.RawMessage `json:"url"`
	Events      json.RawMessage `json:"events"`
	Secret      json.RawMessage `json:"secret"`
	RetryPolicy json.RawMessage `json:"retry_policy"`
}

// updateWebhook changes a webhook's url, events, secret or retry policy; the fields left
// out stay as they are, and none of them may be null. A new secret signs
// every delivery from now on, and the one it replaces goes on signing
// beside it for sb.SecretOverlap (24 hours), so that the receiver can
// switch to the new secret at any moment in between.
func (s *Server) updateWebhook(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var req updateWebhookRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	var patch sb.WebhookPatch
	str := func(field string, raw json.RawMessage) (*string, error) {
		var v *string
		if err := json.Unmarshal(raw, &v); err != nil || v == nil {
			return nil, sb.Invalid(field, "%s must be a string; it cannot be null (leave it out to keep it).", field)
		}
		return v, nil
	}
	var err error
	if req.URL != nil {
		if patch.URL, err = str("url", req.URL); err != nil {
			return err
		}
		if err := sb.CheckWebhookURL(*patch.URL); err != nil {
			return err
		}
	}
	if req.Events != nil {
		var list []string
		if err := json.Unmarshal(req.Events, &list); err != nil || list == nil {
			return sb.Invalid("events", "events must be an array of event types; it cannot be null (leave it out to keep it).")
		}
		if patch.Events, err = sb.CheckWebhookEvents(list); err != nil {
			return err
		}
	}
	if req.Secret != nil {
		if patch.Secret, err = str("secret", req.Secret); err != nil {
			return err
		}
		if err := sb.CheckWebhookSecret(*patch.Secret); err != nil {
			return err
		}
	}
	if req.RetryPolicy != nil {
		if patch.RetryPolicy, err = str("retry_policy", req.RetryPolicy); err != nil {
			return err
		}
		if err := sb.CheckRetryPolicy(*patch.RetryPolicy); err != nil {
			return err
		}
	}
	ctx, id := r.Context(), r.PathValue("id")
	if patch.URL != nil {
		// Only a url that changes is vetted again: the one the webhook has
		// was vetted at registration (and is at every connection).
		cur, err := s.cfg.Store.Webhook(ctx, p.Tenant.ID, p.Env, id)
		if err != nil {
			return err
		}
		if *patch.URL != cur.URL {
			if err := s.vetWebhookURL(ctx, *patch.URL); err != nil {
				return err
			}
		}
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	hook, err := s.cfg.Store.UpdateWebhook(ctx, p.Tenant.ID, p.Env, id, patch, now)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, toWebhookJSON(hook, now))
	return nil
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	hooks, err := s.cfg.Store.Webhooks(r.Context(), p.Tenant.ID, p.Env)
	if err != nil {
		return err
	}
	out := make([]webhookJSON, len(hooks))
	now := s.now()
	for i, h := range hooks {
		out[i] = toWebhookJSON(h, now)
	}
	writeData(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	id := r.PathValue("id")
	if err := s.cfg.Store.DeleteWebhook(r.Context(), p.Tenant.ID, p.Env, id, s.now()); err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
	return nil
}

type attemptJSON struct {
	At         time.Time `json:"at"`
	StatusCode *int      `json:"status_code"`
	Error      *string   `json:"error"`
	DurationMS int64     `json:"duration_ms"`
}

type deliveryJSON struct {
	ID            string        `json:"id"`
	Event         string        `json:"event"`
	MessageID     *string       `json:"message_id"`
	PhoneID       *string       `json:"phone_id"`
	Status        string        `json:"status"`
	Attempts      []attemptJSON `json:"attempts"`
	NextAttemptAt *time.Time    `json:"next_attempt_at"`
	CreatedAt     time.Time     `json:"created_at"`
}

func toDeliveryJSON(d *sb.Delivery) deliveryJSON {
	out := deliveryJSON{ID: d.ID, Event: d.Event, MessageID: strOrNil(d.MessageID), PhoneID: strOrNil(d.PhoneID), Status: d.Status, Attempts: make([]attemptJSON, len(d.Log)), CreatedAt: d.CreatedAt}
	if d.Status == sb.DeliveryPending {
		out.NextAttemptAt = d.NextAttemptAt
	}
	for i, a := range d.Log {
		aj := attemptJSON{At: a.At, Error: strOrNil(a.Error), DurationMS: a.Duration.Milliseconds()}
		if a.StatusCode != 0 {
			code := a.StatusCode
			aj.StatusCode = &code
		}
		out.Attempts[i] = aj
	}
	return out
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	pg, err := page(r)
	if err != nil {
		return err
	}
	hookID := r.PathValue("id")
	if _, err := s.cfg.Store.Webhook(r.Context(), p.Tenant.ID, p.Env, hookID); err != nil {
		return err
	}
	ds, err := s.cfg.Store.Deliveries(r.Context(), p.Tenant.ID, p.Env, hookID, pg)
	if err != nil {
		return err
	}
	ds = setNextLink(w, r, pg, ds, func(d *sb.Delivery) string { return d.ID })
	out := make([]deliveryJSON, len(ds))
	for i, d := range ds {
		out[i] = toDeliveryJSON(d)
	}
	writeData(w, http.StatusOK, out)
	return nil
}

// getDelivery answers one delivery of a webhook with its attempts.
func (s *Server) getDelivery(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	ctx := r.Context()
	hookID, id := r.PathValue("id"), r.PathValue("delivery_id")
	if _, err := s.cfg.Store.Webhook(ctx, p.Tenant.ID, p.Env, hookID); err != nil {
		return err
	}
	d, err := s.cfg.Store.Delivery(ctx, p.Tenant.ID, p.Env, hookID, id)
	if err == sb.ErrNotFound {
		return errNoDelivery
	}
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, toDeliveryJSON(d))
	return nil
}

// retryDelivery sends a failed delivery again now, with a fresh cycle of
// retries; any other is DELIVERY_NOT_FAILED (409).
func (s *Server) retryDelivery(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := noBody(w, r); err != nil {
		return err
	}
	ctx := r.Context()
	hookID, id := r.PathValue("id"), r.PathValue("delivery_id")
	if _, err := s.cfg.Store.Webhook(ctx, p.Tenant.ID, p.Env, hookID); err != nil {
		return err
	}
	d, err := s.cfg.Store.RetryDelivery(ctx, p.Tenant.ID, p.Env, hookID, id, s.now())
	if err == sb.ErrNotFound {
		return errNoDelivery
	}
	if err != nil {
		return err
	}
	writeData(w, http.StatusAccepted, toDeliveryJSON(d))
	return nil
}

type recoverRequest struct {
	Since *string `json:"since"`
	Until *string `json:"until"`
}

type recoverJSON struct {
	WebhookID string    `json:"webhook_id"`
	Since     time.Time `json:"since"`
	Until     time.Time `json:"until"`
	Recovered int       `json:"recovered"`
}

// recoverDeliveries sends again, each with a fresh cycle of retries, every
// failed delivery of the webhook whose event happened at or after since
// (and before until, default now), as Svix's "recover" does; pending and
// succeeded deliveries are left alone. It answers 202 with how many.
func (s *Server) recoverDeliveries(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var req recoverRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	if req.Since == nil {
		return sb.Invalid("since", "since is required: the time (RFC 3339) from which failed deliveries are sent again.")
	}
	since, err := time.Parse(time.RFC3339Nano, *req.Since)
	if err != nil {
		return sb.Invalid("since", "since must be a time in RFC 3339 form, such as 2026-01-31T12:00:00Z.")
	}
	until := now
	if req.Until != nil {
		if until, err = time.Parse(time.RFC3339Nano, *req.Until); err != nil {
			return sb.Invalid("until", "until must be a time in RFC 3339 form, such as 2026-01-31T12:00:00Z.")
		}
	}
	since, until = since.UTC(), until.UTC()
	if !since.Before(until) {
		return sb.Invalid("since", "since must be before until (default: now).")
	}
	n, err := s.cfg.Store.RecoverDeliveries(r.Context(), p.Tenant.ID, p.Env, r.PathValue("id"), since, until, now)
	if err != nil {
		return err
	}
	writeData(w, http.StatusAccepted, recoverJSON{WebhookID: r.PathValue("id"), Since: since, Until: until, Recovered: n})
	return nil
}

// errNoDelivery is the NOT_FOUND of a delivery id the webhook does not have.
var errNoDelivery = sb.Errorf(sb.CodeNotFound, "The webhook has no delivery with this id.")
