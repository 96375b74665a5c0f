package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/tmpl"
)

// TemplateStore is what the templates page needs from storage.
type TemplateStore interface {
	CreateTemplate(ctx context.Context, t *sb.Template, maxTemplates int) error
	Templates(ctx context.Context, tenantID string, env sb.Environment, p sb.Page) ([]*sb.Template, error)
	Template(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Template, error)
	DeleteTemplate(ctx context.Context, tenantID string, env sb.Environment, id string) error
}

type templatesView struct {
	Templates   []*sb.Template
	Next, First string
	Form        templateForm
	Error       string
}

type templateForm struct {
	Name, Body string
}

func (h *Handler) templateList(r *http.Request, v *visit) (*templatesView, error) {
	after := r.URL.Query().Get("after")
	ts, err := h.cfg.Store.Templates(r.Context(), v.tenant.ID, v.env, sb.Page{After: after, Limit: pageSize})
	if err != nil {
		return nil, err
	}
	out := &templatesView{}
	if len(ts) > pageSize {
		ts = ts[:pageSize]
		out.Next = v.base() + "/templates?" + url.Values{"after": {ts[len(ts)-1].ID}}.Encode()
	}
	if after != "" {
		out.First = v.base() + "/templates"
	}
	out.Templates = ts
	return out, nil
}

// templates lists the environment's templates, newest first, with a form
// for a new one.
func (h *Handler) templates(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.templateList(r, v)
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "templates", "Templates", out)
}

// createTemplate creates a template with the API's rules.
func (h *Handler) createTemplate(w http.ResponseWriter, r *http.Request, v *visit) error {
	form := templateForm{Name: strings.TrimSpace(r.PostFormValue("name")), Body: r.PostFormValue("body")}
	t, err := newTemplate(v, form)
	if err == nil {
		err = h.cfg.Store.CreateTemplate(r.Context(), t, v.plan.MaxTemplates)
	}
	var e *sb.Error
	if errors.As(err, &e) {
		out, lerr := h.templateList(r, v)
		if lerr != nil {
			return lerr
		}
		out.Form, out.Error = form, e.Message
		return h.render(w, r, v, statusOf(e), "templates", "Templates", out)
	}
	if err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/templates?notice=template-created", nil)
}

// newTemplate checks the form as POST /v1/templates checks its body.
func newTemplate(v *visit, f templateForm) (*sb.Template, error) {
	if err := sb.CheckTemplateName(f.Name); err != nil {
		return nil, err
	}
	if f.Body == "" || utf8.RuneCountInString(f.Body) > sb.MaxBodyLength {
		return nil, sb.Invalid("body", "The template's text must be 1 to %d characters.", sb.MaxBodyLength)
	}
	parsed, err := tmpl.Parse(f.Body)
	var se *tmpl.SyntaxError
	if errors.As(err, &se) {
		return nil, sb.Invalid("body", "The text is not a valid template: %s.", se.Describe(f.Body))
	}
	if err != nil {
		return nil, err
	}
	return &sb.Template{ID: sb.NewID(), TenantID: v.tenant.ID, Env: v.env, Name: f.Name, Body: f.Body,
		Variables: parsed.Variables(), CreatedAt: v.now.UTC().Truncate(time.Microsecond)}, nil
}

func (h *Handler) confirmDeleteTemplate(w http.ResponseWriter, r *http.Request, v *visit) error {
	t, err := h.cfg.Store.Template(r.Context(), v.tenant.ID, v.env, r.PathValue("id"))
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "deletetemplate", "Delete template "+t.Name, t)
}

func (h *Handler) deleteTemplate(w http.ResponseWriter, r *http.Request, v *visit) error {
	if err := h.cfg.Store.DeleteTemplate(r.Context(), v.tenant.ID, v.env, r.PathValue("id")); err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/templates?notice=template-deleted", nil)
}
