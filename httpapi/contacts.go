package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"time"
	"unicode/utf8"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/contactcsv"
	"github.com/switchboard/switchboard/phonenum"
)

// ContactStore is what the contact routes need from storage.
type ContactStore interface {
	CreateContact(ctx context.Context, c *sb.Contact, maxContacts int) error
	Contact(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Contact, error)
	Contacts(ctx context.Context, tenantID string, env sb.Environment, f sb.ContactFilter, p sb.Page) ([]*sb.Contact, error)
	UpdateContact(ctx context.Context, tenantID string, env sb.Environment, id string, patch sb.ContactPatch, now time.Time) (*sb.Contact, error)
	DeleteContact(ctx context.Context, tenantID string, env sb.Environment, id string) error
	ImportContacts(ctx context.Context, tenantID string, env sb.Environment, rows []*sb.ImportRow, maxContacts int) error
}

type contactJSON struct {
	ID        string            `json:"id"`
	Phone     string            `json:"phone"`
	Name      *string           `json:"name"`
	Fields    map[string]string `json:"fields"`
	OptedOut  bool              `json:"opted_out"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

func toContactJSON(c *sb.Contact) contactJSON {
	fields := c.Fields
	if fields == nil {
		fields = map[string]string{}
	}
	return contactJSON{ID: c.ID, Phone: c.Phone, Name: strOrNil(c.Name), Fields: fields, OptedOut: c.OptedOut,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

// checkFieldName returns a VALIDATION_ERROR on field unless key can name a
// contact field.
func checkFieldName(field, key string) error { return contactcsv.CheckFieldName(field, key) }

func fieldTooLong(field string) string { return contactcsv.FieldTooLong(field) }

func checkName(name string) error {
	if name == "" || utf8.RuneCountInString(name) > sb.MaxContactName {
		return sb.Invalid("name", "name must be 1 to %d characters, or null.", sb.MaxContactName)
	}
	return nil
}

// contactFields decodes and checks the fields object: at most
// sb.MaxContactFields keys that are variable names, with string values of at
// most sb.MaxContactFieldValue characters. JSON null is no fields.
func contactFields(raw json.RawMessage) (map[string]string, error) {
	out := map[string]string{}
	if raw == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return out, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, sb.Invalid("fields", "fields must be an object of strings.")
	}
	if len(obj) > sb.MaxContactFields {
		return nil, sb.Invalid("fields", "fields may have at most %d keys.", sb.MaxContactFields)
	}
	for k, v := range obj {
		if err := checkFieldName("fields", k); err != nil {
			return nil, err
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, sb.Invalid("fields."+k, "fields.%s must be a string.", k)
		}
		if utf8.RuneCountInString(s) > sb.MaxContactFieldValue {
			return nil, sb.Invalid("fields."+k, "%s", fieldTooLong("fields."+k))
		}
		out[k] = s
	}
	return out, nil
}

type createContactRequest struct {
	Phone  *string         `json:"phone"`
	Name   *string         `json:"name"`
	Fields json.RawMessage `json:"fields"`
}

func (s *Server) createContact(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var req createContactRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Phone == nil || *req.Phone == "" {
		return sb.Invalid("phone", "phone is required.")
	}
	c := &sb.Contact{ID: sb.NewID(), TenantID: p.Tenant.ID, Env: p.Env, Phone: *req.Phone}
	if req.Name != nil {
		if err := checkName(*req.Name); err != nil {
			return err
		}
		c.Name = *req.Name
	}
	fields, err := contactFields(req.Fields)
	if err != nil {
		return err
	}
	c.Fields = fields
	if !phonenum.Valid(c.Phone) {
		return sb.InvalidPhone("phone", "phone must be an E.164 number: + and 10 to 15 digits.")
	}
	c.CreatedAt = s.now().UTC().Truncate(time.Microsecond)
	c.UpdatedAt = c.CreatedAt
	if err := s.cfg.Store.CreateContact(r.Context(), c, p.Plan.MaxContacts); err != nil {
		return err
	}
	writeData(w, http.StatusCreated, toContactJSON(c))
	return nil
}

func (s *Server) listContacts(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	pg, err := page(r)
	if err != nil {
		return err
	}
	var f sb.ContactFilter
	if f.Phone, err = phoneParam(r, "phone"); err != nil {
		return err
	}
	cs, err := s.cfg.Store.Contacts(r.Context(), p.Tenant.ID, p.Env, f, pg)
	if err != nil {
		return err
	}
	cs = setNextLink(w, r, pg, cs, func(c *sb.Contact) string { return c.ID })
	out := make([]contactJSON, len(cs))
	for i, c := range cs {
		out[i] = toContactJSON(c)
	}
	writeData(w, http.StatusOK, out)
	return nil
}

func (s *Server) getContact(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	c, err := s.cfg.Store.Contact(r.Context(), p.Tenant.ID, p.Env, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, toContactJSON(c))
	return nil
}

type updateContactRequest struct {
	Phone  json.RawMessage `json:"phone"`
	Name   json.RawMessage `json:"name"`
	Fields json.RawMessage `json:"fields"`
}

// updateContact changes the fields given: phone (checked for duplicates),
// name (null clears it) and fields (replaced as a whole; null clears them).
func (s *Server) updateContact(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	var req updateContactRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	var patch sb.ContactPatch
	if req.Phone != nil {
		// A contact always has a phone: null cannot remove it, and must
		// not be mistaken for leaving it out.
		var phone *string
		if err := json.Unmarshal(req.Phone, &phone); err != nil || phone == nil {
			return sb.Invalid("phone", "phone must be an E.164 number; it cannot be null (leave it out to keep the phone).")
		}
		if *phone == "" {
			return sb.Invalid("phone", "phone cannot be empty.")
		}
		patch.Phone = phone
	}
	if req.Name != nil {
		var name *string
		if err := json.Unmarshal(req.Name, &name); err != nil {
			return sb.Invalid("name", "name must be a string or null.")
		}
		if name == nil {
			name = new(string)
		} else if err := checkName(*name); err != nil {
			return err
		}
		patch.Name = name
	}
	if req.Fields != nil {
		fields, err := contactFields(req.Fields)
		if err != nil {
			return err
		}
		patch.Fields = &fields
	}
	if patch.Phone != nil && !phonenum.Valid(*patch.Phone) {
		return sb.InvalidPhone("phone", "phone must be an E.164 number: + and 10 to 15 digits.")
	}
	ctx, id := r.Context(), r.PathValue("id")
	var c *sb.Contact
	var err error
	if patch == (sb.ContactPatch{}) {
		c, err = s.cfg.Store.Contact(ctx, p.Tenant.ID, p.Env, id)
	} else {
		c, err = s.cfg.Store.UpdateContact(ctx, p.Tenant.ID, p.Env, id, patch, s.now().UTC().Truncate(time.Microsecond))
	}
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, toContactJSON(c))
	return nil
}

func (s *Server) deleteContact(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	id := r.PathValue("id")
	if err := s.cfg.Store.DeleteContact(r.Context(), p.Tenant.ID, p.Env, id); err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
	return nil
}

// Limits of a contact import.
const (
	MaxImportBytes = contactcsv.MaxBytes
	MaxImportRows  = contactcsv.MaxRows
)

type importRowJSON struct {
	Row        int    `json:"row"`
	Status     string `json:"status"`
	ID         string `json:"id,omitempty"`
	ExistingID string `json:"existing_id,omitempty"`
	Error      string `json:"error,omitempty"`
}

type importJSON struct {
	Created    int             `json:"created"`
	Duplicates int             `json:"duplicates"`
	Invalid    int             `json:"invalid"`
	Rows       []importRowJSON `json:"rows"`
}

// importContacts creates contacts from a CSV file (text/csv): a header row
// naming a phone column, optionally name, and any other columns, which
// become fields. Every data row is reported: created, duplicate (of a
// contact that existed, or of an earlier row) or invalid. Valid rows are
// stored even when others are not.
func (s *Server) importContacts(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "text/csv" {
		return sb.Invalid("Content-Type", "Send the file as text/csv.")
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxImportBytes)
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return sb.Errorf(sb.CodePayloadTooLarge, "The file is larger than %d bytes.", MaxImportBytes)
		}
		return sb.Invalid("body", "The request body could not be read.")
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	rows, err := contactcsv.Parse(raw, func(c *sb.Contact) {
		c.ID, c.TenantID, c.Env, c.CreatedAt, c.UpdatedAt = sb.NewID(), p.Tenant.ID, p.Env, now, now
	})
	if err != nil {
		return err
	}
	if err := s.cfg.Store.ImportContacts(r.Context(), p.Tenant.ID, p.Env, rows, p.Plan.MaxContacts); err != nil {
		return err
	}
	out := importJSON{Rows: make([]importRowJSON, len(rows))}
	for i, row := range rows {
		j := importRowJSON{Row: row.Row, Status: row.Status, Error: row.Error}
		switch row.Status {
		case sb.ImportCreated:
			out.Created++
			j.ID = row.ID
		case sb.ImportDuplicate:
			out.Duplicates++
			j.ExistingID = row.ID
		default:
			out.Invalid++
		}
		out.Rows[i] = j
	}
	writeData(w, http.StatusOK, out)
	return nil
}
