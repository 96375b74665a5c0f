package switchboard

import "time"

// Contact is an entry of a tenant's address book in one environment. Its
// opt-out state is not stored with it: it is the state of the recipient with
// the same number (see Recipient), so STOP and START apply at once.
type Contact struct {
	ID       string
	TenantID string
	Env      Environment
	Phone    string
	// Name is empty when the contact has none.
	Name string
	// Fields are free-form values usable as template variables.
	Fields    map[string]string
	OptedOut  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Limits of a contact's fields.
const (
	MaxContactFields     = 50
	MaxContactFieldValue = 500
	MaxContactName       = 256
)

// ContactFilter narrows a contact list.
type ContactFilter struct {
	Phone string
	// Search keeps contacts whose name (case-insensitively, for ASCII
	// letters) or phone number contains it.
	Search string
}

// ContactPatch is a partial update of a contact: nil fields stay as they are.
type ContactPatch struct {
	Phone *string
	// Name set to "" clears the name.
	Name   *string
	Fields *map[string]string
}

// ImportRow is one data row of a contact import and, after the import, what
// became of it.
type ImportRow struct {
	// Row is the row's number in the file, the header being row 1.
	Row     int
	Contact *Contact // nil when the row is invalid
	Status  string   // ImportCreated, ImportDuplicate or ImportInvalid
	// ID is the created contact (created) or the one that already had the
	// phone (duplicate).
	ID    string
	Error string // why the row is invalid
}

// Outcomes of an imported row.
const (
	ImportCreated   = "created"
	ImportDuplicate = "duplicate"
	ImportInvalid   = "invalid"
)
