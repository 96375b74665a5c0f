package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// A contact's opt-out state is the recipient's: contacts are read joined
// with recipients by number, never copied.
const contactSelect = `SELECT c.id, c.tenant_id, c.environment, c.phone, c.name, c.fields, c.created_at, c.updated_at, COALESCE(r.opted_out, 0)
	FROM contacts c LEFT JOIN recipients r ON r.tenant_id = c.tenant_id AND r.environment = c.environment AND r.number = c.phone`

const contactCols = `id, tenant_id, environment, phone, name, fields, created_at, updated_at`

// contactSelectPlain reads contacts without their opt-out state (always
// false), for the campaign runner, which checks opt-outs when it stores a
// chunk.
const contactSelectPlain = `SELECT c.id, c.tenant_id, c.environment, c.phone, c.name, c.fields, c.created_at, c.updated_at, 0 FROM contacts c`

var errContactNotFound = sb.Errorf(sb.CodeContactNotFound, "No contact with this id exists.")

func scanContact(row interface{ Scan(...any) error }) (*sb.Contact, error) {
	var c sb.Contact
	var env, fields string
	var name sql.NullString
	var created, updated int64
	var opted int
	if err := row.Scan(&c.ID, &c.TenantID, &env, &c.Phone, &name, &fields, &created, &updated, &opted); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, errContactNotFound
		}
		return nil, err
	}
	c.Env, c.Name, c.OptedOut = sb.Environment(env), name.String, opted != 0
	c.CreatedAt, c.UpdatedAt = sb.FromMicros(created), sb.FromMicros(updated)
	if err := json.Unmarshal([]byte(fields), &c.Fields); err != nil {
		return nil, err
	}
	return &c, nil
}

// queryContacts runs a query of contacts and scans them all.
func (db *DB) queryContacts(ctx context.Context, query string, args ...any) ([]*sb.Contact, error) {
	rows, err := db.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Contact
	for rows.Next() {
		c, err := scanContact(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func fieldsJSON(f map[string]string) string {
	if f == nil {
		return "{}"
	}
	b, _ := json.Marshal(f)
	return string(b)
}

func errDuplicateContact(existing string) error {
	return &sb.Error{Code: sb.CodeDuplicateContact, Message: "A contact with this phone number already exists.",
		Details: map[string]any{"existing_id": existing}}
}

// contactByPhone returns the id of the contact with phone, or "".
func (t *Tx) contactByPhone(ctx context.Context, tenantID string, env sb.Environment, phone string) (string, error) {
	var id string
	err := t.queryRow(ctx, `SELECT id FROM contacts WHERE tenant_id = ? AND environment = ? AND phone = ?`, tenantID, string(env), phone).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// CreateContact stores c; a phone already held by a contact of the tenant's
// environment is DUPLICATE_CONTACT with details.existing_id, and an
// environment that holds maxContacts contacts already (when maxContacts > 0)
// is VALIDATION_ERROR.
// c.OptedOut is set from the recipient's state.
func (db *DB) CreateContact(ctx context.Context, c *sb.Contact, maxContacts int) error {
	return db.Write(ctx, func(tx *Tx) error {
		if err := tx.lockTenant(ctx, c.TenantID); err != nil {
			return err
		}
		existing, err := tx.contactByPhone(ctx, c.TenantID, c.Env, c.Phone)
		if err != nil {
			return err
		}
		if existing != "" {
			return errDuplicateContact(existing)
		}
		if maxContacts > 0 {
			n, err := tx.contactCount(ctx, c.TenantID, c.Env)
			if err != nil {
				return err
			}
			if n >= maxContacts {
				return errTooManyContacts(maxContacts)
			}
		}
		rcp, err := tx.recipient(ctx, c.TenantID, c.Env, c.Phone)
		if err != nil {
			return err
		}
		c.OptedOut = rcp.optedOut
		res, err := tx.exec(ctx, `INSERT INTO contacts (`+contactCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant_id, environment, phone) DO NOTHING`,
			c.ID, c.TenantID, string(c.Env), c.Phone, nullStr(c.Name), fieldsJSON(c.Fields), sb.Micros(c.CreatedAt), sb.Micros(c.UpdatedAt))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 { // a concurrent insert won; nothing was written
			if existing, err = tx.contactByPhone(ctx, c.TenantID, c.Env, c.Phone); err != nil {
				return err
			}
			return errDuplicateContact(existing)
		}
		return tx.addContacts(ctx, c.TenantID, c.Env, 1)
	})
}

// Contact returns one contact, or CONTACT_NOT_FOUND.
func (db *DB) Contact(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Contact, error) {
	return scanContact(db.queryRow(ctx, contactSelect+` WHERE c.tenant_id = ? AND c.environment = ? AND c.id = ?`, tenantID, string(env), id))
}

// likeEscaper escapes the wildcards of LIKE (with ESCAPE '\').
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// Contacts lists the tenant's contacts, newest first, after the cursor; one
// more than the page when more remain.
func (db *DB) Contacts(ctx context.Context, tenantID string, env sb.Environment, f sb.ContactFilter, p sb.Page) ([]*sb.Contact, error) {
	q := contactSelect + ` WHERE c.tenant_id = ? AND c.environment = ?`
	args := []any{tenantID, string(env)}
	if f.Phone != "" {
		q += ` AND c.phone = ?`
		args = append(args, f.Phone)
	}
	if f.Search != "" {
		like := "%" + likeEscaper.Replace(strings.ToLower(f.Search)) + "%"
		q += ` AND (LOWER(COALESCE(c.name, '')) LIKE ? ESCAPE '\' OR c.phone LIKE ? ESCAPE '\')`
		args = append(args, like, like)
	}
	if p.After != "" {
		q += ` AND c.id < ?`
		args = append(args, p.After)
	}
	return db.queryContacts(ctx, q+` ORDER BY c.id DESC LIMIT ?`, append(args, p.Limit+1)...)
}

// UpdateContact applies patch to a contact and returns it; a new phone that
// another contact holds is DUPLICATE_CONTACT.
func (db *DB) UpdateContact(ctx context.Context, tenantID string, env sb.Environment, id string, patch sb.ContactPatch, now time.Time) (*sb.Contact, error) {
	var out *sb.Contact
	err := db.Write(ctx, func(tx *Tx) error {
		c, err := scanContact(tx.queryRow(ctx, contactSelect+` WHERE c.tenant_id = ? AND c.environment = ? AND c.id = ?`, tenantID, string(env), id))
		if err != nil {
			return err
		}
		if patch.Phone != nil && *patch.Phone != c.Phone {
			existing, err := tx.contactByPhone(ctx, tenantID, env, *patch.Phone)
			if err != nil {
				return err
			}
			if existing != "" {
				return errDuplicateContact(existing)
			}
			c.Phone = *patch.Phone
			rcp, err := tx.recipient(ctx, tenantID, env, c.Phone)
			if err != nil {
				return err
			}
			c.OptedOut = rcp.optedOut
		}
		if patch.Name != nil {
			c.Name = *patch.Name
		}
		if patch.Fields != nil {
			c.Fields = *patch.Fields
		}
		c.UpdatedAt = now
		// A concurrent insert of the same phone makes this fail on the
		// unique constraint; the batch is then run again, caller by caller,
		// and the check above answers DUPLICATE_CONTACT.
		if _, err := tx.exec(ctx, `UPDATE contacts SET phone = ?, name = ?, fields = ?, updated_at = ? WHERE id = ?`,
			c.Phone, nullStr(c.Name), fieldsJSON(c.Fields), sb.Micros(now), c.ID); err != nil {
			return err
		}
		out = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteContact deletes one contact, or answers CONTACT_NOT_FOUND. The
// recipient's state (opt-out, first contact) stays: it belongs to the number.
func (db *DB) DeleteContact(ctx context.Context, tenantID string, env sb.Environment, id string) error {
	return db.Write(ctx, func(tx *Tx) error {
		var found string
		err := tx.queryRow(ctx, `SELECT id FROM contacts WHERE tenant_id = ? AND environment = ? AND id = ?`, tenantID, string(env), id).Scan(&found)
		if errors.Is(err, sql.ErrNoRows) {
			return errContactNotFound
		}
		if err != nil {
			return err
		}
		if _, err = tx.exec(ctx, `DELETE FROM contacts WHERE id = ?`, id); err != nil {
			return err
		}
		return tx.addContacts(ctx, tenantID, env, -1)
	})
}

// importBatch is how many rows of an import one transaction stores.
const importBatch = 500

// ImportContacts stores the valid rows of an import whose phone no contact
// has yet, in file order, in transactions of importBatch rows. It sets each
// valid row's Status and ID: created (the new contact's id) or duplicate
// (the id of the contact that has the phone, possibly created by an earlier
// row of the same file). Once the environment holds maxContacts contacts
// (when maxContacts > 0), the rows that would create more are invalid, with
// an Error naming the cap. Invalid rows are left as they are.
func (db *DB) ImportContacts(ctx context.Context, tenantID string, env sb.Environment, rows []*sb.ImportRow, maxContacts int) error {
	first := map[string]*sb.ImportRow{} // phone -> its first valid row
	var todo []*sb.ImportRow
	var repeats []*sb.ImportRow
	for _, r := range rows {
		if r.Contact == nil {
			continue
		}
		if _, seen := first[r.Contact.Phone]; seen {
			repeats = append(repeats, r)
			continue
		}
		first[r.Contact.Phone] = r
		todo = append(todo, r)
	}
	for len(todo) > 0 {
		n := min(len(todo), importBatch)
		if err := db.importBatch(ctx, tenantID, env, todo[:n], maxContacts); err != nil {
			return err
		}
		todo = todo[n:]
	}
	for _, r := range repeats {
		if f := first[r.Contact.Phone]; f.Status == sb.ImportInvalid { // refused by the cap
			r.Status, r.Error = sb.ImportInvalid, f.Error
		} else {
			r.Status, r.ID = sb.ImportDuplicate, f.ID
		}
	}
	return nil
}

func (db *DB) importBatch(ctx context.Context, tenantID string, env sb.Environment, all []*sb.ImportRow, maxContacts int) error {
	return db.Write(ctx, func(tx *Tx) error {
		rows := all
		for _, r := range rows {
			r.Status, r.ID, r.Error = "", "", ""
		}
		if maxContacts > 0 {
			if err := tx.lockTenant(ctx, tenantID); err != nil {
				return err
			}
			n, err := tx.contactCount(ctx, tenantID, env)
			if err != nil {
				return err
			}
			if room := max(maxContacts-n, 0); room < len(rows) {
				// Not room for every row: the rows whose phone a contact
				// has take none; the new ones beyond the room are refused.
				if err := tx.markDuplicates(ctx, tenantID, env, rows); err != nil {
					return err
				}
				var fresh []*sb.ImportRow
				for _, r := range rows {
					if r.Status != sb.ImportDuplicate {
						fresh = append(fresh, r)
					}
				}
				for _, r := range fresh[min(room, len(fresh)):] {
					r.Status, r.Error = sb.ImportInvalid, errTooManyContacts(maxContacts).Message
				}
				if rows = fresh[:min(room, len(fresh))]; len(rows) == 0 {
					return nil
				}
			}
		}
		args := make([]any, 0, len(rows)*8)
		for _, r := range rows {
			c := r.Contact
			args = append(args, c.ID, c.TenantID, string(c.Env), c.Phone, nullStr(c.Name), fieldsJSON(c.Fields), sb.Micros(c.CreatedAt), sb.Micros(c.UpdatedAt))
		}
		// Insert first and look up only the phones that were taken: the
		// common import is of new contacts.
		res, err := tx.query(ctx, `INSERT INTO contacts (`+contactCols+`) VALUES `+valueRows(len(rows), 8)+`
			ON CONFLICT (tenant_id, environment, phone) DO NOTHING RETURNING id`, args...)
		if err != nil {
			return err
		}
		inserted := make(map[string]bool, len(rows))
		for res.Next() {
			var id string
			if err := res.Scan(&id); err != nil {
				res.Close()
				return err
			}
			inserted[id] = true
		}
		res.Close()
		if err := res.Err(); err != nil {
			return err
		}
		var taken []*sb.ImportRow
		for _, r := range rows {
			if inserted[r.Contact.ID] {
				r.Status, r.ID = sb.ImportCreated, r.Contact.ID
			} else {
				taken = append(taken, r)
			}
		}
		if err := tx.addContacts(ctx, tenantID, env, len(inserted)); err != nil {
			return err
		}
		if len(taken) == 0 {
			return nil
		}
		return tx.markDuplicates(ctx, tenantID, env, taken)
	})
}

// markDuplicates marks each of rows as a duplicate of the contact that has
// its phone.
func (t *Tx) markDuplicates(ctx context.Context, tenantID string, env sb.Environment, rows []*sb.ImportRow) error {
	byPhone := make(map[string]*sb.ImportRow, len(rows))
	phones := make([]string, len(rows))
	for i, r := range rows {
		byPhone[r.Contact.Phone] = r
		phones[i] = r.Contact.Phone
	}
	res, err := t.byNumbers(ctx, `id, phone`, `contacts`, `phone`, tenantID, env, phones)
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		var id, phone string
		if err := res.Scan(&id, &phone); err != nil {
			return err
		}
		if r := byPhone[phone]; r != nil {
			r.Status, r.ID = sb.ImportDuplicate, id
		}
	}
	return res.Err()
}

// valueRows returns "(?, ...), (?, ...)": rows groups of cols placeholders.
func valueRows(rows, cols int) string {
	one := "(" + placeholders(cols) + ")"
	return strings.TrimSuffix(strings.Repeat(one+",", rows), ",")
}

// ContactsByID returns the tenant's contacts among ids, by id, without their
// opt-out state; ids of no contact are absent.
func (db *DB) ContactsByID(ctx context.Context, tenantID string, env sb.Environment, ids []string) (map[string]*sb.Contact, error) {
	out := make(map[string]*sb.Contact, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), importBatch)
		args := []any{tenantID, string(env)}
		for _, id := range ids[:n] {
			args = append(args, id)
		}
		ids = ids[n:]
		cs, err := db.queryContacts(ctx, contactSelectPlain+` WHERE c.tenant_id = ? AND c.environment = ? AND c.id IN (`+placeholders(n)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			out[c.ID] = c
		}
	}
	return out, nil
}

// ContactsAfter returns up to limit contacts created at or before cutoff
// with ids greater than after, in id order, without their opt-out state:
// the pages of an all-contacts campaign.
func (db *DB) ContactsAfter(ctx context.Context, tenantID string, env sb.Environment, after string, cutoff time.Time, limit int) ([]*sb.Contact, error) {
	return db.queryContacts(ctx, contactSelectPlain+` WHERE c.tenant_id = ? AND c.environment = ? AND c.id > ? AND c.created_at <= ? ORDER BY c.id LIMIT ?`,
		tenantID, string(env), after, sb.Micros(cutoff), limit)
}
