package dashboard

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/contactcsv"
	"github.com/switchboard/switchboard/phonenum"
)

// ContactStore is what the contacts pages need from storage.
type ContactStore interface {
	Contacts(ctx context.Context, tenantID string, env sb.Environment, f sb.ContactFilter, p sb.Page) ([]*sb.Contact, error)
	Contact(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Contact, error)
	CreateContact(ctx context.Context, c *sb.Contact, maxContacts int) error
	UpdateContact(ctx context.Context, tenantID string, env sb.Environment, id string, patch sb.ContactPatch, now time.Time) (*sb.Contact, error)
	DeleteContact(ctx context.Context, tenantID string, env sb.Environment, id string) error
	ImportContacts(ctx context.Context, tenantID string, env sb.Environment, rows []*sb.ImportRow, maxContacts int) error
}

// maxReportRows bounds the rows of an import report shown on the page;
// the counts cover every row.
const maxReportRows = 1000

type contactsView struct {
	Contacts    []*sb.Contact
	Query       string
	Next, First string
	// Error is the import form's, FormError the add form's.
	Error     string
	Form      contactForm
	FormError string
	Report    *importReport
}

type importReport struct {
	File                         string
	Created, Duplicates, Invalid int
	Rows                         []reportRow
	// Hidden counts the rows past maxReportRows.
	Hidden int
}

// reportRow is what became of one row of an import.
type reportRow struct {
	Row        int
	Status, ID string
	Error      string `json:",omitempty"`
}

// contactForm is the add and edit forms of a contact: fields one
// "name=value" a line.
type contactForm struct {
	Phone, Name, Fields string
}

// contacts lists the environment's contacts, newest first, with their
// opt-out state; q searches names and numbers.
func (h *Handler) contacts(w http.ResponseWriter, r *http.Request, v *visit) error {
	out, err := h.contactList(r, v, strings.TrimSpace(r.URL.Query().Get("q")), r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	if v.flash != nil {
		out.Report = v.flash.Report
	}
	return h.render(w, r, v, http.StatusOK, "contacts", "Contacts", out)
}

// contactInput checks a contact form as the API checks a contact: a phone
// (written with or without spaces, as in an import), a name of at most
// sb.MaxContactName characters, fields with names a template can use.
func contactInput(f contactForm) (phone, name string, fields map[string]string, err error) {
	phone, ok := phonenum.Compact(f.Phone)
	if !ok {
		return "", "", nil, sb.InvalidPhone("phone", "The phone must be an E.164 number: + and the country code, then 10 to 15 digits in all.")
	}
	name = strings.TrimSpace(f.Name)
	if utf8.RuneCountInString(name) > sb.MaxContactName {
		return "", "", nil, sb.Invalid("name", "The name must be at most %d characters.", sb.MaxContactName)
	}
	if fields, err = parseData(f.Fields); err != nil {
		return "", "", nil, sb.Invalid("fields", "A line of the fields is not name=value.")
	}
	if len(fields) > sb.MaxContactFields {
		return "", "", nil, sb.Invalid("fields", "A contact has at most %d fields.", sb.MaxContactFields)
	}
	for k, val := range fields {
		if err := contactcsv.CheckFieldName("fields", k); err != nil {
			return "", "", nil, err
		}
		if utf8.RuneCountInString(val) > sb.MaxContactFieldValue {
			return "", "", nil, sb.Invalid("fields", "%s", contactcsv.FieldTooLong(k))
		}
	}
	if fields == nil {
		fields = map[string]string{}
	}
	return phone, name, fields, nil
}

// addContact adds a contact from the form on the contacts page.
func (h *Handler) addContact(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	form := contactForm{Phone: r.PostFormValue("phone"), Name: r.PostFormValue("name"), Fields: r.PostFormValue("fields")}
	phone, name, fields, err := contactInput(form)
	var c *sb.Contact
	if err == nil {
		now := v.now.UTC().Truncate(time.Microsecond)
		c = &sb.Contact{ID: sb.NewID(), TenantID: v.tenant.ID, Env: v.env, Phone: phone, Name: name, Fields: fields, CreatedAt: now, UpdatedAt: now}
		err = h.cfg.Store.CreateContact(ctx, c, v.plan.MaxContacts)
	}
	var e *sb.Error
	if errors.As(err, &e) {
		out, lerr := h.contactList(r, v, "", "")
		if lerr != nil {
			return lerr
		}
		out.Form, out.FormError = form, e.Message
		if id, ok := e.Details["existing_id"].(string); ok {
			out.FormError = "A contact already has this phone: " + id + "."
		}
		return h.render(w, r, v, statusOf(e), "contacts", "Contacts", out)
	}
	if err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/contacts/"+c.ID+"?notice=contact-created", nil)
}

type contactView struct {
	Contact *sb.Contact
	Form    contactForm
	Error   string
}

func formOf(c *sb.Contact) contactForm {
	keys := slices.Sorted(maps.Keys(c.Fields))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + c.Fields[k] + "\n")
	}
	return contactForm{Phone: c.Phone, Name: c.Name, Fields: b.String()}
}

// contact shows a contact with a form that changes it.
func (h *Handler) contact(w http.ResponseWriter, r *http.Request, v *visit) error {
	c, err := h.cfg.Store.Contact(r.Context(), v.tenant.ID, v.env, r.PathValue("id"))
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "contact", "Contact "+c.Phone, contactView{Contact: c, Form: formOf(c)})
}

// updateContact saves the edit form: phone, name (empty clears it) and
// fields (replaced as a whole).
func (h *Handler) updateContact(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx, id := r.Context(), r.PathValue("id")
	c, err := h.cfg.Store.Contact(ctx, v.tenant.ID, v.env, id)
	if err != nil {
		return err
	}
	form := contactForm{Phone: r.PostFormValue("phone"), Name: r.PostFormValue("name"), Fields: r.PostFormValue("fields")}
	phone, name, fields, err := contactInput(form)
	if err == nil {
		_, err = h.cfg.Store.UpdateContact(ctx, v.tenant.ID, v.env, id, sb.ContactPatch{Phone: &phone, Name: &name, Fields: &fields},
			v.now.UTC().Truncate(time.Microsecond))
	}
	var e *sb.Error
	if errors.As(err, &e) {
		msg := e.Message
		if other, ok := e.Details["existing_id"].(string); ok {
			msg = "Another contact already has this phone: " + other + "."
		}
		return h.render(w, r, v, statusOf(e), "contact", "Contact "+c.Phone, contactView{Contact: c, Form: form, Error: msg})
	}
	if err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/contacts/"+id+"?notice=contact-saved", nil)
}

func (h *Handler) confirmDeleteContact(w http.ResponseWriter, r *http.Request, v *visit) error {
	c, err := h.cfg.Store.Contact(r.Context(), v.tenant.ID, v.env, r.PathValue("id"))
	if err != nil {
		return err
	}
	return h.render(w, r, v, http.StatusOK, "deletecontact", "Delete contact "+c.Phone, c)
}

func (h *Handler) deleteContact(w http.ResponseWriter, r *http.Request, v *visit) error {
	if err := h.cfg.Store.DeleteContact(r.Context(), v.tenant.ID, v.env, r.PathValue("id")); err != nil {
		return err
	}
	return h.redirect(w, r, v, v.base()+"/contacts?notice=contact-deleted", nil)
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
	for i, row := range rows {
		switch row.Status {
		case sb.ImportCreated:
			rep.Created++
		case sb.ImportDuplicate:
			rep.Duplicates++
		default:
			rep.Invalid++
		}
		if i < maxReportRows {
			rep.Rows = append(rep.Rows, reportRow{Row: row.Row, Status: row.Status, ID: row.ID, Error: row.Error})
		}
	}
	rep.Hidden = max(0, len(rows)-maxReportRows)
	return h.redirect(w, r, v, v.base()+"/contacts", &flash{Report: rep})
}
