package client

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// Contact is a person the tenant writes to.
type Contact struct {
	ID string `json:"id"`
	// Phone is E.164, unique among the contacts of the environment.
	Phone string  `json:"phone"`
	Name  *string `json:"name"`
	// Fields are the contact's template variables.
	Fields map[string]string `json:"fields"`
	// OptedOut is true after the number sent STOP (and not START since).
	OptedOut  bool      `json:"opted_out"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CreateContactParams are the fields of a new contact.
type CreateContactParams struct {
	// Phone is required, E.164.
	Phone string `json:"phone"`
	// Name is optional, 1 to 256 characters.
	Name string `json:"name,omitempty"`
	// Fields are optional template variables: at most 50 strings of at
	// most 500 characters.
	Fields map[string]string `json:"fields,omitempty"`
}

// CreateContact creates a contact (POST /v1/contacts). A phone another
// contact has is 409 DUPLICATE_CONTACT, with that contact's id in
// Error.Details.ExistingID.
func (c *Client) CreateContact(ctx context.Context, p CreateContactParams) (*Contact, error) {
	var ct Contact
	if err := c.call(ctx, http.MethodPost, p, &ct, "v1", "contacts"); err != nil {
		return nil, err
	}
	return &ct, nil
}

// GetContact returns a contact (GET /v1/contacts/{id}); an unknown id is 404
// CONTACT_NOT_FOUND.
func (c *Client) GetContact(ctx context.Context, id string) (*Contact, error) {
	var ct Contact
	if err := c.call(ctx, http.MethodGet, nil, &ct, "v1", "contacts", id); err != nil {
		return nil, err
	}
	return &ct, nil
}

// UpdateContactParams are the changes of a contact: only the fields set
// change.
type UpdateContactParams struct {
	// Phone, when not empty, is the contact's new number.
	Phone string `json:"phone,omitempty"`
	// Name: Value sets it, Null removes it.
	Name Nullable[string] `json:"name,omitzero"`
	// Fields: Value replaces every field, Null removes them all.
	Fields Nullable[map[string]string] `json:"fields,omitzero"`
}

// UpdateContact changes a contact (PATCH /v1/contacts/{id}) and returns it.
func (c *Client) UpdateContact(ctx context.Context, id string, p UpdateContactParams) (*Contact, error) {
	var ct Contact
	if err := c.call(ctx, http.MethodPatch, p, &ct, "v1", "contacts", id); err != nil {
		return nil, err
	}
	return &ct, nil
}

// DeleteContact deletes a contact (DELETE /v1/contacts/{id}). The number's
// own state (opt-out) stays.
func (c *Client) DeleteContact(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, nil, nil, "v1", "contacts", id)
}

// ListContactsParams filter a list of contacts.
type ListContactsParams struct {
	ListParams
	Phone string // only the contact with this E.164 number
}

// ListContacts iterates over the contacts of the key's environment, newest
// first (GET /v1/contacts). p may be nil.
func (c *Client) ListContacts(ctx context.Context, p *ListContactsParams) iter.Seq2[*Contact, error] {
	q := url.Values{}
	if p != nil {
		if p.Phone != "" {
			q.Set("phone", p.Phone)
		}
		q = p.ListParams.values(q)
	}
	return list[Contact](ctx, c, q, "v1", "contacts")
}

// ImportRowStatus is what became of one row of an import.
type ImportRowStatus string

// The import row statuses.
const (
	RowCreated   ImportRowStatus = "created"
	RowDuplicate ImportRowStatus = "duplicate"
	RowInvalid   ImportRowStatus = "invalid"
)

// ImportReport reports every row of an import.
type ImportReport struct {
	Created    int `json:"created"`
	Duplicates int `json:"duplicates"`
	Invalid    int `json:"invalid"`
	// Rows are every data row, in file order.
	Rows []ImportRow `json:"rows"`
}

// ImportRow is the outcome of one data row.
type ImportRow struct {
	// Row is the line of the file where the row starts; the header is line
	// 1.
	Row    int             `json:"row"`
	Status ImportRowStatus `json:"status"`
	// ID is the new contact (RowCreated).
	ID string `json:"id,omitempty"`
	// ExistingID is the contact that has the phone (RowDuplicate).
	ExistingID string `json:"existing_id,omitempty"`
	// Error says why the row is RowInvalid.
	Error string `json:"error,omitempty"`
}

// MaxImportBytes is the largest CSV file the server imports.
const MaxImportBytes = 10 << 20

// ImportContacts creates contacts from a CSV file (POST /v1/contacts/import):
// a header row with a phone column, optionally name, and any other columns,
// which become fields. It reads csv to its end first (at most
// MaxImportBytes), so that a retry sends the same file; existing contacts
// are never changed, so a retried import reports what the first stored as
// duplicates.
func (c *Client) ImportContacts(ctx context.Context, csv io.Reader) (*ImportReport, error) {
	data, err := io.ReadAll(io.LimitReader(csv, MaxImportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("switchboard: reading the CSV file: %w", err)
	}
	if len(data) > MaxImportBytes {
		return nil, fmt.Errorf("switchboard: the CSV file is larger than %d bytes, the most the server imports", MaxImportBytes)
	}
	u, err := c.endpoint(nil, "v1", "contacts", "import")
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, &request{method: http.MethodPost, url: u, body: data, contentType: "text/csv"})
	if err != nil {
		return nil, err
	}
	var rep ImportReport
	if _, err := resp.decode(&rep); err != nil {
		return nil, err
	}
	return &rep, nil
}
