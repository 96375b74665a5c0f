package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/tmpl"
)

// TemplateStore is what the template routes need from storage.
type TemplateStore interface {
	CreateTemplate(ctx context.Context, t *sb.Template, maxTemplates int) error
	Templates(ctx context.Context, tenantID string, env sb.Environment, p sb.Page) ([]*sb.Template, error)
	Template(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Template, error)
	TemplateByName(ctx context.Context, tenantID string, env sb.Environment, name string) (*sb.Template, error)
	DeleteTemplate(ctx context.Context, tenantID string, env sb.Environment, id string) error
}

type templateJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Body      string    `json:"body"`
	Variables []string  `json:"variables"`
	CreatedAt time.Time `json:"created_at"`
}

func toTemplateJSON(t *sb.Template) templateJSON {
	vars := t.Variables
	if vars == nil {
		vars = []string{}
	}
	return templateJSON{ID: t.ID, Name: t.Name, Body: t.Body, Variables: vars, CreatedAt: t.CreatedAt}
}

type createTemplateRequest struct {
	Name *string `json:"name"`
	Body *string `json:"body"`
}

func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var req createTemplateRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return sb.Invalid("name", "name is required: 1 to 64 characters of a-z, 0-9, _ and -.")
	}
	if err := sb.CheckTemplateName(*req.Name); err != nil {
		return err
	}
	if req.Body == nil || *req.Body == "" {
		return sb.Invalid("body", "body is required: 1 to %d characters.", sb.MaxBodyLength)
	}
	if utf8.RuneCountInString(*req.Body) > sb.MaxBodyLength {
		return sb.Invalid("body", "body must be at most %d characters.", sb.MaxBodyLength)
	}
	parsed, err := tmpl.Parse(*req.Body)
	if err != nil {
		var se *tmpl.SyntaxError
		if errors.As(err, &se) {
			return sb.Invalid("body", "body is not a valid template: %s.", se.Describe(*req.Body))
		}
		return err
	}
	t := &sb.Template{ID: sb.NewID(), TenantID: p.Tenant.ID, Env: p.Env, Name: *req.Name, Body: *req.Body,
		Variables: parsed.Variables(), CreatedAt: s.now().UTC().Truncate(time.Microsecond)}
	if err := s.cfg.Store.CreateTemplate(r.Context(), t, p.Plan.MaxTemplates); err != nil {
		return err
	}
	writeData(w, http.StatusCreated, toTemplateJSON(t))
	return nil
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	pg, err := page(r)
	if err != nil {
		return err
	}
	ts, err := s.cfg.Store.Templates(r.Context(), p.Tenant.ID, p.Env, pg)
	if err != nil {
		return err
	}
	ts = setNextLink(w, r, pg, ts, func(t *sb.Template) string { return t.ID })
	out := make([]templateJSON, len(ts))
	for i, t := range ts {
		out[i] = toTemplateJSON(t)
	}
	writeData(w, http.StatusOK, out)
	return nil
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	t, err := s.cfg.Store.Template(r.Context(), p.Tenant.ID, p.Env, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, toTemplateJSON(t))
	return nil
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	id := r.PathValue("id")
	if err := s.cfg.Store.DeleteTemplate(r.Context(), p.Tenant.ID, p.Env, id); err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
	return nil
}
