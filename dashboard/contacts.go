package dashboard

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/contactcsv"
)

// ContactStore is what the contacts page needs from storage.
type ContactStore interface {
	Contacts(ctx context.Context, tenantID string, env sb.Environment, f sb.ContactFilter, p sb.Page) ([]*sb.Contact, error)
	ImportContacts(ctx context.Context, tenantID string, env sb.Environment, rows []*sb.ImportRow, maxContacts int) error
}

// maxReportRows bounds the rows of an import report shown on the page;
// the counts cover every row.
const maxReportRows = 1000

type contactsView struct {
	Contacts    []*sb.Contact
	Query       string
	Next, First string
	Error       string
	Report      *importReport
}

type importReport struct {
	File                         string
	Created, Duplicates, Invalid int
	Rows                         []*sb.ImportRow
	// Hidden counts the rows past maxReportRows.
	Hidden int
}

// contacts lists the environment's contacts, newest first, with their
// opt-out state; q searches names and numbers.
func (h *Handler) contacts(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.contactList(r, v, strings.TrimSpace(r.URL.Query().Get("q")), r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "contacts", "Contacts", out)
}

func (h *Handler) contactList(r *http.Request, v *visit, q, after string) (*contactsView, error) {
	cs, err := h.cfg.Store.Contacts(r.Context(), v.tenant.ID, v.env, sb.ContactFilter{Search: q}, sb.Page{After: after, Limit: pageSize})
	if err != nil {
		return nil, err
	}
	out := &contactsView{Query: q}
	query := url.Values{}
	if q != "" {
		query.Set("q", q)
	}
	if len(cs) > pageSize {
		cs = cs[:pageSize]
		next := url.Values{"after": {cs[len(cs)-1].ID}}
		if q != "" {
			next.Set("q", q)
		}
		out.Next = v.base() + "/contacts?" + next.Encode()
	}
	if after != "" {
		out.First = v.base() + "/contacts?" + query.Encode()
	}
	out.Contacts = cs
	return out, nil
}

// importContacts imports an uploaded CSV file with the API's rules and
// shows what became of each row.
func (h *Handler) importContacts(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.contactList(r, v, "", "")
	if err != nil {
		return err
	}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		out.Error = "Choose a CSV file to import."
		return h.render(w, r, v, http.StatusBadRequest, "contacts", "Contacts", out)
	}
	defer file.Close()
	raw, err := io.ReadAll(io.LimitReader(file, contactcsv.MaxBytes+1))
	if err != nil {
		return err
	}
	if len(raw) > contactcsv.MaxBytes {
		out.Error = "The file is larger than 10 MiB; split it and import the parts."
		return h.render(w, r, v, http.StatusRequestEntityTooLarge, "contacts", "Contacts", out)
	}
	now := v.now.UTC().Truncate(time.Microsecond)
	rows, err := contactcsv.Parse(raw, func(c *sb.Contact) {
		c.ID, c.TenantID, c.Env, c.CreatedAt, c.UpdatedAt = sb.NewID(), v.tenant.ID, v.env, now, now
	})
	if err == nil {
		err = h.cfg.Store.ImportContacts(r.Context(), v.tenant.ID, v.env, rows, v.plan.MaxContacts)
	}
	if e, ok := err.(*sb.Error); ok {
		out.Error = "Nothing was imported: " + e.Message
		return h.render(w, r, v, http.StatusBadRequest, "contacts", "Contacts", out)
	}
	if err != nil {
		return err
	}
	rep := &importReport{File: hdr.Filename}
	for _, row := range rows {
		switch row.Status {
		case sb.ImportCreated:
			rep.Created++
		case sb.ImportDuplicate:
			rep.Duplicates++
		default:
			rep.Invalid++
		}
	}
	rep.Rows = rows
	if len(rows) > maxReportRows {
		rep.Rows, rep.Hidden = rows[:maxReportRows], len(rows)-maxReportRows
	}
	if out, err = h.contactList(r, v, "", ""); err != nil { // with the new contacts
		return err
	}
	out.Report = rep
	return h.render(w, r, v, http.StatusOK, "contacts", "Contacts", out)
}
