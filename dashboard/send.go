package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
)

// SendInput is a message the send form asks for; empty strings are fields
// left out.
type SendInput struct {
	To, Body, Template string
	Data               map[string]string
	Channel, From      string
}

// Sender accepts a message exactly as POST /v1/messages does: the same
// checks in the same order, the same errors, the same phone choice.
type Sender func(ctx context.Context, p *auth.Principal, in SendInput) (*sb.Message, error)

type sendView struct {
	Form      sendForm
	Error     string
	Phones    []phoneRow
	Templates []*sb.Template
}

type sendForm struct {
	To, Body, Template, Data, Channel, From string
}

func (h *Handler) sendPage(ctx context.Context, v *visit, f sendForm) (*sendView, error) {
	phones, err := h.phoneRows(ctx, v)
	if err != nil {
		return nil, err
	}
	ts, err := h.cfg.Store.Templates(ctx, v.tenant.ID, v.env, sb.Page{Limit: maxTemplateChoices})
	if err != nil {
		return nil, err
	}
	if len(ts) > maxTemplateChoices {
		ts = ts[:maxTemplateChoices]
	}
	return &sendView{Form: f, Phones: phones, Templates: ts}, nil
}

// sendForm shows the form that sends one message; ?to= and ?template=
// fill it in.
func (h *Handler) sendMessageForm(w http.ResponseWriter, r *http.Request, v *visit) error {
	q := r.URL.Query()
	out, err := h.sendPage(r.Context(), v, sendForm{To: q.Get("to"), Template: q.Get("template"), Channel: sb.ChannelAuto})
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "send", "Send a message", out)
}

// sendMessage sends the form's message with the API's rules and goes to
// the message's page, where its status and timeline follow it.
func (h *Handler) sendMessage(w http.ResponseWriter, r *http.Request, v *visit) error {
	f := sendForm{To: strings.TrimSpace(r.PostFormValue("to")), Body: r.PostFormValue("body"), Template: r.PostFormValue("template"),
		Data: r.PostFormValue("data"), Channel: r.PostFormValue("channel"), From: r.PostFormValue("from")}
	ctx := r.Context()
	data, err := parseData(f.Data)
	if err == nil && len(data) > 0 && f.Template == "" {
		err = sb.Invalid("data", "Values are for a template's variables: choose a template, or leave them empty.")
	}
	var m *sb.Message
	if err == nil {
		p := &auth.Principal{Tenant: v.tenant, Plan: v.plan, Env: v.env}
		m, err = h.cfg.Sender(ctx, p, SendInput{To: f.To, Body: f.Body, Template: f.Template, Data: data, Channel: f.Channel, From: f.From})
	}
	var e *sb.Error
	if errors.As(err, &e) {
		out, lerr := h.sendPage(ctx, v, f)
		if lerr != nil {
			return lerr
		}
		out.Error = e.Message
		return h.render(w, r, v, statusOf(e), "send", "Send a message", out)
	}
	if err != nil {
		return err
	}
	notice := "message-sent"
	if m.ScheduledAt != nil {
		notice = "message-quiet"
	}
	return h.redirect(w, r, v, v.base()+"/messages/"+m.ID+"?notice="+notice, nil)
}

// parseData reads a template's values, one "name=value" (or "name: value")
// a line.
func parseData(text string) (map[string]string, error) {
	var data map[string]string
	for i, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, val, ok := strings.Cut(line, "=")
		if !ok {
			k, val, ok = strings.Cut(line, ":")
		}
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, sb.Invalid("data", "Line %d of the values is not name=value.", i+1)
		}
		if data == nil {
			data = map[string]string{}
		}
		data[k] = strings.TrimSpace(val)
	}
	return data, nil
}
