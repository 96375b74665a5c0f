package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	sb "github.com/switchboard/switchboard"
)

// The caps of the plan table on what one environment of a tenant holds
// (max_contacts, max_templates, max_open_campaigns) are checked in the
// transaction that adds to it, before its first write. On PostgreSQL the
// tenant's row is locked first, so that concurrent transactions of one
// tenant count one after the other; FOR NO KEY UPDATE leaves the foreign-key
// checks of other inserts (FOR KEY SHARE) unblocked. SQLite has one writer.

// lockTenant serializes the transactions that count a tenant's objects.
func (t *Tx) lockTenant(ctx context.Context, tenantID string) error {
	if t.db.dialect != Postgres {
		return nil
	}
	_, err := t.exec(ctx, `SELECT id FROM tenants WHERE id = ? FOR NO KEY UPDATE`, tenantID)
	return err
}

// contactCount returns how many contacts the environment holds.
func (t *Tx) contactCount(ctx context.Context, tenantID string, env sb.Environment) (int, error) {
	var n int
	err := t.queryRow(ctx, `SELECT n FROM contact_counts WHERE tenant_id = ? AND environment = ?`, tenantID, string(env)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// addContacts adds delta (which may be negative) to the environment's
// contact count.
func (t *Tx) addContacts(ctx context.Context, tenantID string, env sb.Environment, delta int) error {
	if delta == 0 {
		return nil
	}
	_, err := t.exec(ctx, `INSERT INTO contact_counts (tenant_id, environment, n) VALUES (?, ?, ?)
		ON CONFLICT (tenant_id, environment) DO UPDATE SET n = contact_counts.n + excluded.n`, tenantID, string(env), delta)
	return err
}

func errTooManyContacts(max int) *sb.Error {
	return sb.Invalid("phone", "This environment already holds the maximum of %d contacts; delete some first.", max)
}
