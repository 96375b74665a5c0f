package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/tmpl"
)

const templateCols = `id, tenant_id, environment, name, body, created_at`

func scanTemplate(row interface{ Scan(...any) error }) (*sb.Template, error) {
	var t sb.Template
	var env string
	var created int64
	if err := row.Scan(&t.ID, &t.TenantID, &env, &t.Name, &t.Body, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, sb.ErrNotFound
		}
		return nil, err
	}
	t.Env, t.CreatedAt = sb.Environment(env), sb.FromMicros(created)
	t.Variables, _ = tmpl.Variables(t.Body)
	return &t, nil
}

// CreateTemplate stores t; a name already used in the tenant's environment
// is DUPLICATE_TEMPLATE, and an environment that holds maxTemplates
// templates already (when maxTemplates > 0) is VALIDATION_ERROR.
func (db *DB) CreateTemplate(ctx context.Context, t *sb.Template, maxTemplates int) error {
	return db.inTx(ctx, func(tx *Tx) error {
		if maxTemplates > 0 {
			if err := tx.lockTenant(ctx, t.TenantID); err != nil {
				return err
			}
			var n int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM templates WHERE tenant_id = ? AND environment = ?`,
				t.TenantID, string(t.Env)).Scan(&n); err != nil {
				return err
			}
			if n >= maxTemplates {
				return sb.Invalid("name", "This environment already holds the maximum of %d templates; delete one first.", maxTemplates)
			}
		}
		_, err := tx.exec(ctx, `INSERT INTO templates (`+templateCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
			t.ID, t.TenantID, string(t.Env), t.Name, t.Body, sb.Micros(t.CreatedAt))
		if isUniqueViolation(err) {
			return sb.Errorf(sb.CodeDuplicateTemplate, "A template named %q already exists.", t.Name)
		}
		return err
	})
}

// Templates lists the tenant's templates, newest first, one more than the
// page when more remain.
func (db *DB) Templates(ctx context.Context, tenantID string, env sb.Environment, p sb.Page) ([]*sb.Template, error) {
	q := `SELECT ` + templateCols + ` FROM templates WHERE tenant_id = ? AND environment = ?`
	args := []any{tenantID, string(env)}
	if p.After != "" {
		q += ` AND id < ?`
		args = append(args, p.After)
	}
	rows, err := db.query(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, p.Limit+1)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Template
	for rows.Next() {
		t, err := scanTemplate(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Template returns one template by id.
func (db *DB) Template(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Template, error) {
	return scanTemplate(db.queryRow(ctx, `SELECT `+templateCols+` FROM templates WHERE tenant_id = ? AND environment = ? AND id = ?`, tenantID, string(env), id))
}

// TemplateByName returns one template by name.
func (db *DB) TemplateByName(ctx context.Context, tenantID string, env sb.Environment, name string) (*sb.Template, error) {
	return scanTemplate(db.queryRow(ctx, `SELECT `+templateCols+` FROM templates WHERE tenant_id = ? AND environment = ? AND name = ?`, tenantID, string(env), name))
}

// DeleteTemplate deletes one template by id.
func (db *DB) DeleteTemplate(ctx context.Context, tenantID string, env sb.Environment, id string) error {
	res, err := db.exec(ctx, `DELETE FROM templates WHERE tenant_id = ? AND environment = ? AND id = ?`, tenantID, string(env), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sb.ErrNotFound
	}
	return nil
}
