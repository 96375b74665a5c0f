package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/phonenum"
)

// CampaignStore is what the campaign routes need from storage.
type CampaignStore interface {
	CreateCampaign(ctx context.Context, c *sb.Campaign, maxOpen int) error
	Campaign(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Campaign, error)
	Campaigns(ctx context.Context, tenantID string, env sb.Environment, p sb.Page) ([]*sb.Campaign, error)
	LaunchCampaign(ctx context.Context, tenantID string, env sb.Environment, id string, now time.Time) (*sb.Campaign, error)
	CancelCampaign(ctx context.Context, tenantID string, env sb.Environment, id string, now time.Time) (*sb.Campaign, error)
	ContactsByID(ctx context.Context, tenantID string, env sb.Environment, ids []string) (map[string]*sb.Contact, error)
}

// Limits of a campaign.
const (
	MaxCampaignName = sb.MaxCampaignName
	MaxCampaignList = sb.MaxCampaignList
)

type campaignCountsJSON struct {
	Total              int `json:"total"`
	Pending            int `json:"pending"`
	Queued             int `json:"queued"`
	Sent               int `json:"sent"`
	Delivered          int `json:"delivered"`
	Failed             int `json:"failed"`
	Canceled           int `json:"canceled"`
	SkippedOptedOut    int `json:"skipped_opted_out"`
	SkippedInvalid     int `json:"skipped_invalid"`
	DeferredQuietHours int `json:"deferred_quiet_hours"`
	DeferredLimits     int `json:"deferred_limits"`
}

type campaignJSON struct {
	ID          string             `json:"id"`
	Name        string             `json:"name"`
	Status      string             `json:"status"`
	Body        *string            `json:"body"`
	Template    *string            `json:"template"`
	Data        map[string]string  `json:"data"`
	Channel     string             `json:"channel"`
	Audience    string             `json:"audience"`
	Counts      campaignCountsJSON `json:"counts"`
	CreatedAt   time.Time          `json:"created_at"`
	LaunchedAt  *time.Time         `json:"launched_at"`
	CompletedAt *time.Time         `json:"completed_at"`
	CanceledAt  *time.Time         `json:"canceled_at"`
}

func toCampaignJSON(c *sb.Campaign) campaignJSON {
	m := c.Messages
	return campaignJSON{ID: c.ID, Name: c.Name, Status: c.Status, Body: strOrNil(c.Body), Template: strOrNil(c.Template),
		Data: c.Data, Channel: c.Channel, Audience: c.Audience,
		Counts: campaignCountsJSON{Total: c.Total, Pending: c.Pending(), Queued: m.Queued, Sent: m.Sent, Delivered: m.Delivered,
			Failed: m.Failed, Canceled: m.Canceled, SkippedOptedOut: c.SkippedOptedOut, SkippedInvalid: c.SkippedInvalid,
			DeferredQuietHours: c.DeferredQuiet, DeferredLimits: c.DeferredLimits},
		CreatedAt: c.CreatedAt, LaunchedAt: c.LaunchedAt, CompletedAt: c.CompletedAt, CanceledAt: c.CanceledAt}
}

type createCampaignRequest struct {
	Name        *string                    `json:"name"`
	Body        *string                    `json:"body"`
	Template    *string                    `json:"template"`
	Data        map[string]json.RawMessage `json:"data"`
	Channel     *string                    `json:"channel"`
	ContactIDs  *[]string                  `json:"contact_ids"`
	To          *[]string                  `json:"to"`
	AllContacts *bool                      `json:"all_contacts"`
}

// validate applies the field rules, every VALIDATION_ERROR before
// INVALID_PHONE_NUMBER as for a send, and returns the campaign they
// describe (recipients deduplicated).
func (req *createCampaignRequest) validate() (*sb.Campaign, error) {
	if req.Name == nil || *req.Name == "" || utf8.RuneCountInString(*req.Name) > MaxCampaignName {
		return nil, sb.Invalid("name", "name is required: 1 to %d characters.", MaxCampaignName)
	}
	// body, template and data follow the rules of a send.
	content := sendRequest{Body: req.Body, Template: req.Template, Data: req.Data, Channel: req.Channel}
	data, err := content.validateContent()
	if err != nil {
		return nil, err
	}
	c := &sb.Campaign{Name: *req.Name, Channel: sb.ChannelAuto, Status: sb.CampaignDraft}
	if req.Channel != nil {
		c.Channel = *req.Channel
	}
	if req.Body != nil {
		c.Body = *req.Body
	} else {
		c.Template, c.Data = *req.Template, data
	}
	given := 0
	for _, set := range []bool{req.ContactIDs != nil, req.To != nil, req.AllContacts != nil} {
		if set {
			given++
		}
	}
	if given != 1 {
		return nil, sb.Invalid("contact_ids", "Give exactly one of contact_ids, to and all_contacts.")
	}
	list := func(field string, items []string, check func(int, string) error) ([]string, error) {
		if len(items) == 0 || len(items) > MaxCampaignList {
			return nil, sb.Invalid(field, "%s must hold 1 to %d items.", field, MaxCampaignList)
		}
		out := make([]string, 0, len(items))
		seen := make(map[string]bool, len(items))
		for i, it := range items {
			if err := check(i, it); err != nil {
				return nil, err
			}
			if !seen[it] {
				seen[it] = true
				out = append(out, it)
			}
		}
		return out, nil
	}
	switch {
	case req.AllContacts != nil:
		if !*req.AllContacts {
			return nil, sb.Invalid("all_contacts", "all_contacts must be true when given.")
		}
		c.Audience = sb.AudienceAllContacts
	case req.ContactIDs != nil:
		c.Audience = sb.AudienceContactIDs
		c.Recipients, err = list("contact_ids", *req.ContactIDs, func(i int, id string) error {
			if id == "" {
				return sb.Invalid(fmt.Sprintf("contact_ids[%d]", i), "contact_ids[%d] is empty.", i)
			}
			return nil
		})
	default:
		c.Audience = sb.AudienceTo
		c.Recipients, err = list("to", *req.To, func(i int, n string) error {
			if !phonenum.Valid(n) {
				return sb.InvalidPhone(fmt.Sprintf("to[%d]", i), "to[%d] must be an E.164 number: + and 10 to 15 digits.", i)
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	c.Total = len(c.Recipients)
	return c, nil
}

// createCampaign stores a draft. Checks run in the order of a send: fields,
// then the template (INVALID_TEMPLATE; MISSING_TEMPLATE_VAR for a `to`
// list, whose variables are all known now), then the contacts
// (CONTACT_NOT_FOUND).
func (s *Server) createCampaign(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	ctx := r.Context()
	var req createCampaignRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	c, err := req.validate()
	if err != nil {
		return err
	}
	c.ID, c.TenantID, c.Env = sb.NewID(), p.Tenant.ID, p.Env
	c.CreatedAt = s.now().UTC().Truncate(time.Microsecond)
	if c.Template != "" {
		t, err := s.cfg.Store.TemplateByName(ctx, p.Tenant.ID, p.Env, c.Template)
		if sb.ErrorCode(err) == sb.CodeNotFound {
			return errNoTemplate(c.Template, p.Env)
		}
		if err != nil {
			return err
		}
		c.TemplateBody = t.Body
		if c.Audience == sb.AudienceTo {
			if _, err := s.render(ctx, p, c.Template, sb.RecipientVariables(c.Data, c.Recipients[0], nil)); err != nil {
				return err
			}
		}
	}
	if c.Audience == sb.AudienceContactIDs {
		found, err := s.cfg.Store.ContactsByID(ctx, p.Tenant.ID, p.Env, c.Recipients)
		if err != nil {
			return err
		}
		for i, id := range c.Recipients {
			if found[id] == nil {
				return &sb.Error{Code: sb.CodeContactNotFound, Message: fmt.Sprintf("No contact with id %q exists.", id),
					Details: map[string]any{"field": fmt.Sprintf("contact_ids[%d]", i)}}
			}
		}
	}
	if err := s.cfg.Store.CreateCampaign(ctx, c, p.Plan.MaxOpenCampaigns); err != nil {
		return err
	}
	if c.Audience == sb.AudienceAllContacts { // its total is the contacts there are now
		if c, err = s.cfg.Store.Campaign(ctx, p.Tenant.ID, p.Env, c.ID); err != nil {
			return err
		}
	}
	writeData(w, http.StatusCreated, toCampaignJSON(c))
	return nil
}

func (s *Server) listCampaigns(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	pg, err := page(r)
	if err != nil {
		return err
	}
	cs, err := s.cfg.Store.Campaigns(r.Context(), p.Tenant.ID, p.Env, pg)
	if err != nil {
		return err
	}
	cs = setNextLink(w, r, pg, cs, func(c *sb.Campaign) string { return c.ID })
	out := make([]campaignJSON, len(cs))
	for i, c := range cs {
		out[i] = toCampaignJSON(c)
	}
	writeData(w, http.StatusOK, out)
	return nil
}

func (s *Server) getCampaign(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	c, err := s.cfg.Store.Campaign(r.Context(), p.Tenant.ID, p.Env, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, toCampaignJSON(c))
	return nil
}

// launchCampaign starts a draft: 202, the runner creates its messages.
func (s *Server) launchCampaign(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := noBody(w, r); err != nil {
		return err
	}
	c, err := s.cfg.Store.LaunchCampaign(r.Context(), p.Tenant.ID, p.Env, r.PathValue("id"), s.now().UTC().Truncate(time.Microsecond))
	if err != nil {
		return err
	}
	s.log.Info("campaign launched", "tenant_id", c.TenantID, "environment", string(c.Env), "campaign_id", c.ID,
		"audience", c.Audience, "recipients", c.Total, "request_id", w.Header().Get("X-Request-Id"))
	writeData(w, http.StatusAccepted, toCampaignJSON(c))
	return nil
}

func (s *Server) cancelCampaign(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := noBody(w, r); err != nil {
		return err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	c, err := s.cfg.Store.CancelCampaign(r.Context(), p.Tenant.ID, p.Env, r.PathValue("id"), now)
	if err != nil {
		return err
	}
	if c.CanceledAt != nil && c.CanceledAt.Equal(now) { // this request canceled it
		s.log.Info("campaign canceled", "tenant_id", c.TenantID, "environment", string(c.Env), "campaign_id", c.ID,
			"request_id", w.Header().Get("X-Request-Id"))
	}
	writeData(w, http.StatusOK, toCampaignJSON(c))
	return nil
}
