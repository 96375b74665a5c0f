package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	sb "github.com/switchboard/switchboard"
)

const tenantCols = `id, name, plan, status, trial_ends_at, created_at`

func scanTenant(row interface{ Scan(...any) error }) (*sb.Tenant, error) {
	var t sb.Tenant
	var trial, created int64
	if err := row.Scan(&t.ID, &t.Name, &t.Plan, &t.Status, &trial, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, sb.ErrNotFound
		}
		return nil, err
	}
	t.TrialEndsAt, t.CreatedAt = sb.FromMicros(trial), sb.FromMicros(created)
	return &t, nil
}

// CreateTenant stores a new tenant.
func (db *DB) CreateTenant(ctx context.Context, t *sb.Tenant) error {
	_, err := db.exec(ctx, `INSERT INTO tenants (`+tenantCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
		t.ID, t.Name, t.Plan, t.Status, sb.Micros(t.TrialEndsAt), sb.Micros(t.CreatedAt))
	return err
}

// Tenant returns the tenant with id, or sb.ErrNotFound.
func (db *DB) Tenant(ctx context.Context, id string) (*sb.Tenant, error) {
	return scanTenant(db.queryRow(ctx, `SELECT `+tenantCols+` FROM tenants WHERE id = ?`, id))
}

// Tenants returns every tenant, oldest first: for operators, never for a
// tenant's request.
func (db *DB) Tenants(ctx context.Context) ([]*sb.Tenant, error) {
	rows, err := db.query(ctx, `SELECT `+tenantCols+` FROM tenants ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetTenantPlan moves the tenant to plan.
func (db *DB) SetTenantPlan(ctx context.Context, id, plan string) error {
	return db.updateTenant(ctx, `UPDATE tenants SET plan = ? WHERE id = ?`, plan, id)
}

// SetTenantStatus sets the tenant's status (active or suspended).
// Suspending a tenant also ends its dashboard sessions: resuming it does
// not bring them back.
func (db *DB) SetTenantStatus(ctx context.Context, id, status string) error {
	if err := db.updateTenant(ctx, `UPDATE tenants SET status = ? WHERE id = ?`, status, id); err != nil {
		return err
	}
	if status == sb.TenantSuspended {
		return db.EndDashboardSessions(ctx, id, sb.SessionEndedSuspended)
	}
	return nil
}

// SetTrialEnd moves the end of the tenant's trial.
func (db *DB) SetTrialEnd(ctx context.Context, id string, ends time.Time) error {
	return db.updateTenant(ctx, `UPDATE tenants SET trial_ends_at = ? WHERE id = ?`, sb.Micros(ends), id)
}

func (db *DB) updateTenant(ctx context.Context, query string, args ...any) error {
	res, err := db.exec(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sb.ErrNotFound
	}
	return db.notifyTenant(ctx, args[len(args)-1].(string))
}

// AddUsage adds calls to the tenant's counters for each month and returns
// the new totals of the same months.
func (db *DB) AddUsage(ctx context.Context, tenantID string, month string, calls int64) (int64, error) {
	var total int64
	err := db.inTx(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `INSERT INTO usage_monthly (tenant_id, month, calls) VALUES (?, ?, ?)
			ON CONFLICT (tenant_id, month) DO UPDATE SET calls = usage_monthly.calls + excluded.calls`, tenantID, month, calls); err != nil {
			return err
		}
		return tx.queryRow(ctx, `SELECT calls FROM usage_monthly WHERE tenant_id = ? AND month = ?`, tenantID, month).Scan(&total)
	})
	return total, err
}

// Usage returns the tenant's counted API calls in month ("2006-01").
func (db *DB) Usage(ctx context.Context, tenantID, month string) (int64, error) {
	var n int64
	err := db.queryRow(ctx, `SELECT calls FROM usage_monthly WHERE tenant_id = ? AND month = ?`, tenantID, month).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}
