package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/phonenum"
)

// MessageStore is what the message pages need from storage.
type MessageStore interface {
	Message(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Message, error)
	Messages(ctx context.Context, tenantID string, env sb.Environment, f sb.MessageFilter, p sb.Page) ([]*sb.Message, error)
	MessageDeliveries(ctx context.Context, tenantID string, env sb.Environment, messageID string) ([]*sb.Delivery, error)
	Webhooks(ctx context.Context, tenantID string, env sb.Environment) ([]*sb.Webhook, error)
}

// pageSize is the rows of a list page.
const pageSize = 50

var messageStatuses = []string{sb.StatusQueued, sb.StatusSent, sb.StatusDelivered, sb.StatusFailed, sb.StatusReceived}

type messagesView struct {
	Messages []*sb.Message
	Filter   messageFilter
	Statuses []string
	Error    string
	// Next is the link to the next page, First to the first, when they
	// exist.
	Next, First string
}

type messageFilter struct {
	Status, Number, From, To string
}

// query is the filter as a query string, without paging.
func (f messageFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "number": f.Number, "from": f.From, "to": f.To} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// parse turns the filter into the store's, or says what is wrong with it.
// Dates are UTC days; "to" includes its day.
func (f messageFilter) parse() (sb.MessageFilter, error) {
	out := sb.MessageFilter{Status: f.Status, Number: f.Number}
	if f.Status != "" && !contains(messageStatuses, f.Status) {
		return out, sb.Invalid("status", "Choose a status from the list.")
	}
	if f.Number != "" && !phonenum.Valid(f.Number) {
		return out, sb.Invalid("number", "The number must be in E.164 form: + and 10 to 15 digits, such as +15005550006.")
	}
	if f.From != "" {
		d, err := time.Parse("2006-01-02", f.From)
		if err != nil {
			return out, sb.Invalid("from", "The first day must be a date such as 2026-01-31.")
		}
		out.Since = d
	}
	if f.To != "" {
		d, err := time.Parse("2006-01-02", f.To)
		if err != nil {
			return out, sb.Invalid("to", "The last day must be a date such as 2026-01-31.")
		}
		out.Until = d.AddDate(0, 0, 1)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// messages lists the environment's messages, newest first, by status,
// number (either direction) and date.
func (h *Handler) messages(w http.ResponseWriter, r *http.Request, v *visit) error {
	q := r.URL.Query()
	f := messageFilter{Status: q.Get("status"), Number: strings.TrimSpace(q.Get("number")), From: q.Get("from"), To: q.Get("to")}
	out := messagesView{Filter: f, Statuses: messageStatuses}
	sf, err := f.parse()
	if err != nil {
		out.Error = err.(*sb.Error).Message
		return h.render(w, r, v, http.StatusBadRequest, "messages", "Messages", out)
	}
	after := q.Get("after")
	ms, err := h.cfg.Store.Messages(r.Context(), v.tenant.ID, v.env, sf, sb.Page{After: after, Limit: pageSize})
	if err != nil {
		return err
	}
	base := f.query()
	if len(ms) > pageSize {
		ms = ms[:pageSize]
		next := f.query()
		next.Set("after", ms[len(ms)-1].ID)
		out.Next = v.base() + "/messages?" + next.Encode()
	}
	if after != "" {
		out.First = v.base() + "/messages?" + base.Encode()
	}
	out.Messages = ms
	return h.render(w, r, v, http.StatusOK, "messages", "Messages", out)
}

type messageView struct {
	Message    *sb.Message
	Timeline   []timelineStep
	Deliveries []deliveryRow
}

type timelineStep struct {
	What string
	At   time.Time
	// Failed marks the step that ended in failure.
	Failed bool
}

type deliveryRow struct {
	*sb.Delivery
	Webhook *sb.Webhook
}

// message shows one message: its fields, its timeline, why it failed and
// the webhook deliveries it caused. Another tenant's or environment's id
// is not found.
func (h *Handler) message(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	m, err := h.cfg.Store.Message(ctx, v.tenant.ID, v.env, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := messageView{Message: m}
	step := func(what string, at *time.Time, failed bool) {
		if at != nil {
			out.Timeline = append(out.Timeline, timelineStep{What: what, At: *at, Failed: failed})
		}
	}
	if m.Direction == sb.Inbound {
		step("Received", &m.CreatedAt, false)
	} else {
		step("Accepted and queued", &m.CreatedAt, false)
		step("Scheduled to go out after quiet hours", m.ScheduledAt, false)
		step("Sent to the provider", m.SentAt, false)
		step("Delivered", m.DeliveredAt, false)
		step("Read", m.ReadAt, false)
		step("Failed", m.FailedAt, true)
	}
	ds, err := h.cfg.Store.MessageDeliveries(ctx, v.tenant.ID, v.env, m.ID)
	if err != nil {
		return err
	}
	if len(ds) > 0 {
		hooks, err := h.cfg.Store.Webhooks(ctx, v.tenant.ID, v.env)
		if err != nil {
			return err
		}
		byID := map[string]*sb.Webhook{}
		for _, wh := range hooks {
			byID[wh.ID] = wh
		}
		for _, d := range ds {
			out.Deliveries = append(out.Deliveries, deliveryRow{Delivery: d, Webhook: byID[d.WebhookID]})
		}
	}
	return h.render(w, r, v, http.StatusOK, "message", "Message "+m.ID, out)
}
