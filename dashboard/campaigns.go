package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/tmpl"
)

// CampaignStore is what the campaign pages need from storage.
type CampaignStore interface {
	CreateCampaign(ctx context.Context, c *sb.Campaign, maxOpen int) error
	Campaign(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Campaign, error)
	Campaigns(ctx context.Context, tenantID string, env sb.Environment, p sb.Page) ([]*sb.Campaign, error)
	LaunchCampaign(ctx context.Context, tenantID string, env sb.Environment, id string, now time.Time) (*sb.Campaign, error)
	CancelCampaign(ctx context.Context, tenantID string, env sb.Environment, id string, now time.Time) (*sb.Campaign, error)
	Templates(ctx context.Context, tenantID string, env sb.Environment, p sb.Page) ([]*sb.Template, error)
	TemplateByName(ctx context.Context, tenantID string, env sb.Environment, name string) (*sb.Template, error)
}

type campaignsView struct {
	Campaigns   []campaignRow
	Templates   []*sb.Template
	Form        campaignForm
	Error       string
	Next, First string
}

type campaignRow struct {
	*sb.Campaign
	// Done is the recipients reached: a message created or a skip.
	Done int
}

func newCampaignRow(c *sb.Campaign) campaignRow {
	return campaignRow{Campaign: c, Done: c.Total - c.Pending()}
}

type campaignForm struct {
	Name, Body, Template, Channel, Audience, Numbers string
}

// maxTemplateChoices bounds the templates offered in the form.
const maxTemplateChoices = 100

func (h *Handler) campaignList(r *http.Request, v *visit) (*campaignsView, error) {
	ctx := r.Context()
	after := r.URL.Query().Get("after")
	cs, err := h.cfg.Store.Campaigns(ctx, v.tenant.ID, v.env, sb.Page{After: after, Limit: pageSize})
	if err != nil {
		return nil, err
	}
	out := &campaignsView{Form: campaignForm{Channel: sb.ChannelAuto, Audience: sb.AudienceAllContacts}}
	if len(cs) > pageSize {
		cs = cs[:pageSize]
		out.Next = v.base() + "/campaigns?" + url.Values{"after": {cs[len(cs)-1].ID}}.Encode()
	}
	if after != "" {
		out.First = v.base() + "/campaigns"
	}
	for _, c := range cs {
		out.Campaigns = append(out.Campaigns, newCampaignRow(c))
	}
	ts, err := h.cfg.Store.Templates(ctx, v.tenant.ID, v.env, sb.Page{Limit: maxTemplateChoices})
	if err != nil {
		return nil, err
	}
	out.Templates = ts
	return out, nil
}

func (h *Handler) campaigns(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.campaignList(r, v)
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "campaigns", "Campaigns", out)
}

// createCampaign creates a draft from the form, with the API's rules: a
// name, a message or a template, a channel, and all contacts or a list of
// numbers.
func (h *Handler) createCampaign(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	form := campaignForm{Name: strings.TrimSpace(r.PostFormValue("name")), Body: r.PostFormValue("body"), Template: r.PostFormValue("template"),
		Channel: r.PostFormValue("channel"), Audience: r.PostFormValue("audience"), Numbers: r.PostFormValue("numbers")}
	c, err := h.draft(ctx, v, form)
	if err == nil {
		err = h.cfg.Store.CreateCampaign(ctx, c, v.plan.MaxOpenCampaigns)
	}
	var e *sb.Error
	if errors.As(err, &e) {
		out, lerr := h.campaignList(r, v)
		if lerr != nil {
			return lerr
		}
		out.Form, out.Error = form, e.Message
		return h.render(w, r, v, http.StatusBadRequest, "campaigns", "Campaigns", out)
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, v.base()+"/campaigns/"+c.ID+"?notice=campaign-created", http.StatusSeeOther)
	return nil
}

// draft checks the form and returns the campaign it describes.
func (h *Handler) draft(ctx context.Context, v *visit, f campaignForm) (*sb.Campaign, error) {
	if f.Name == "" || utf8.RuneCountInString(f.Name) > sb.MaxCampaignName {
		return nil, sb.Invalid("name", "The name is required: 1 to %d characters.", sb.MaxCampaignName)
	}
	c := &sb.Campaign{ID: sb.NewID(), TenantID: v.tenant.ID, Env: v.env, Name: f.Name, Status: sb.CampaignDraft,
		CreatedAt: v.now.UTC().Truncate(time.Microsecond)}
	switch f.Channel {
	case sb.ChannelAuto, sb.ChannelSMS, sb.ChannelChat:
		c.Channel = f.Channel
	default:
		return nil, sb.Invalid("channel", "Choose a channel from the list.")
	}
	switch {
	case f.Body != "" && f.Template != "":
		return nil, sb.Invalid("body", "Write a message or choose a template, not both.")
	case f.Body == "" && f.Template == "":
		return nil, sb.Invalid("body", "Write a message or choose a template.")
	case utf8.RuneCountInString(f.Body) > sb.MaxBodyLength:
		return nil, sb.Invalid("body", "The message must be at most %d characters.", sb.MaxBodyLength)
	}
	c.Body = f.Body
	switch f.Audience {
	case sb.AudienceAllContacts:
		c.Audience = sb.AudienceAllContacts
	case sb.AudienceTo:
		c.Audience = sb.AudienceTo
		seen := map[string]bool{}
		for _, n := range strings.FieldsFunc(f.Numbers, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\n' || r == '\r' || r == '\t' }) {
			if !phonenum.Valid(n) {
				return nil, sb.Errorf(sb.CodeInvalidPhoneNumber, "%q is not a number in E.164 form (+ and 10 to 15 digits).", n)
			}
			if !seen[n] {
				seen[n] = true
				c.Recipients = append(c.Recipients, n)
			}
		}
		if len(c.Recipients) == 0 || len(c.Recipients) > sb.MaxCampaignList {
			return nil, sb.Invalid("to", "List 1 to %d numbers, one a line.", sb.MaxCampaignList)
		}
		c.Total = len(c.Recipients)
	default:
		return nil, sb.Invalid("audience", "Choose who receives the campaign.")
	}
	if f.Template != "" {
		t, err := h.cfg.Store.TemplateByName(ctx, v.tenant.ID, v.env, f.Template)
		if sb.ErrorCode(err) == sb.CodeNotFound {
			return nil, sb.Errorf(sb.CodeInvalidTemplate, "No template named %q exists.", f.Template)
		}
		if err != nil {
			return nil, err
		}
		c.Template, c.TemplateBody, c.Data = t.Name, t.Body, map[string]string{}
		if c.Audience == sb.AudienceTo {
			// Every variable of a list of numbers is known now.
			parsed, err := tmpl.Parse(t.Body)
			if err != nil {
				return nil, fmt.Errorf("stored template %s does not parse: %w", t.ID, err)
			}
			_, err = parsed.Render(sb.RecipientVariables(nil, c.Recipients[0], nil))
			var missing *tmpl.MissingVarError
			if errors.As(err, &missing) {
				return nil, sb.Errorf(sb.CodeMissingTemplateVar, "The template needs {{%s}}, which a list of numbers cannot give: choose all contacts, or another template.", missing.Name)
			}
		}
	}
	return c, nil
}

type campaignView struct {
	campaignRow
	// Live is set while the campaign runs: its progress refreshes.
	Live bool
}

func (h *Handler) campaignPage(r *http.Request, v *visit) (*campaignView, error) {
	c, err := h.cfg.Store.Campaign(r.Context(), v.tenant.ID, v.env, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return &campaignView{campaignRow: newCampaignRow(c), Live: c.Status == sb.CampaignRunning}, nil
}

// campaign shows a campaign: what it sends to whom, its progress (which
// refreshes while it runs), and launch and cancel.
func (h *Handler) campaign(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.campaignPage(r, v)
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "campaign", "Campaign "+out.Name, out)
}

func (h *Handler) campaignProgress(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.campaignPage(r, v)
	if err != nil {
		return err
	}
	return h.renderFragment(w, r, v, "campaign", "progress", out)
}

func (h *Handler) launchCampaign(w http.ResponseWriter, r *http.Request, v *visit) error {
	c, err := h.cfg.Store.LaunchCampaign(r.Context(), v.tenant.ID, v.env, r.PathValue("id"), v.now.UTC().Truncate(time.Microsecond))
	if err != nil {
		return err
	}
	http.Redirect(w, r, v.base()+"/campaigns/"+c.ID+"?notice=campaign-launched", http.StatusSeeOther)
	return nil
}

func (h *Handler) confirmCancelCampaign(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.campaignPage(r, v)
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "cancelcampaign", "Cancel "+out.Name, out)
}

func (h *Handler) cancelCampaign(w http.ResponseWriter, r *http.Request, v *visit) error {
	c, err := h.cfg.Store.CancelCampaign(r.Context(), v.tenant.ID, v.env, r.PathValue("id"), v.now.UTC().Truncate(time.Microsecond))
	if err != nil {
		return err
	}
	http.Redirect(w, r, v.base()+"/campaigns/"+c.ID+"?notice=campaign-canceled", http.StatusSeeOther)
	return nil
}
