package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"time"

	sb "github.com/switchboard/switchboard"
)

const keyCols = `id, tenant_id, name, key_hash, key_hint, environment, status, rate_limit, last_used_at, created_at`

func scanKey(row interface{ Scan(...any) error }) (*sb.APIKey, error) {
	var k sb.APIKey
	var env string
	var limit, used sql.NullInt64
	var created int64
	if err := row.Scan(&k.ID, &k.TenantID, &k.Name, &k.Hash, &k.Hint, &env, &k.Status, &limit, &used, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, sb.ErrNotFound
		}
		return nil, err
	}
	k.Environment = sb.Environment(env)
	k.RateLimit = int(limit.Int64)
	if used.Valid {
		t := sb.FromMicros(used.Int64)
		k.LastUsedAt = &t
	}
	k.CreatedAt = sb.FromMicros(created)
	return &k, nil
}

func nullInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// CreateKey stores k unless the tenant already has sb.MaxKeysPerTenant
// unrevoked keys, which is a VALIDATION_ERROR. The count and the insert are
// one transaction, serialized per tenant on PostgreSQL.
func (db *DB) CreateKey(ctx context.Context, k *sb.APIKey) error {
	err := db.inTx(ctx, func(tx *Tx) error {
		if db.dialect == Postgres {
			if _, err := tx.exec(ctx, `SELECT id FROM tenants WHERE id = ? FOR UPDATE`, k.TenantID); err != nil {
				return err
			}
		}
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM api_keys WHERE tenant_id = ? AND status <> 'revoked'`, k.TenantID).Scan(&n); err != nil {
			return err
		}
		if n >= sb.MaxKeysPerTenant {
			return sb.Invalid("name", "A tenant can have at most %d API keys; revoke one first.", sb.MaxKeysPerTenant)
		}
		_, err := tx.exec(ctx, `INSERT INTO api_keys (`+keyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)`,
			k.ID, k.TenantID, k.Name, k.Hash, k.Hint, string(k.Environment), k.Status, nullInt(k.RateLimit), sb.Micros(k.CreatedAt))
		return err
	})
	if err != nil {
		return err
	}
	return db.notifyKeys(ctx, k.TenantID)
}

// KeyByHash finds an unrevoked key by the hash of its text. It is the one
// lookup not scoped to a tenant: it is how a request finds its tenant.
func (db *DB) KeyByHash(ctx context.Context, hash string) (*sb.APIKey, error) {
	return scanKey(db.queryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE key_hash = ? AND status <> 'revoked'`, hash))
}

// keyListTTL bounds how stale a cached key list may be. Changes through
// this node (and, on PostgreSQL, through any node) clear it at once; the
// bound covers last_used_at, which is written every half second, so a use
// shows within about a second (the API promises 2).
const keyListTTL = 500 * time.Millisecond

type keyList struct {
	keys    []*sb.APIKey
	fetched time.Time
}

// Keys lists the tenant's unrevoked keys, oldest first, from a short-lived
// cache (listing keys is the most frequent call of a dashboard).
func (db *DB) Keys(ctx context.Context, tenantID string) ([]*sb.APIKey, error) {
	if v, ok := db.keyLists.Load(tenantID); ok {
		if l := v.(*keyList); time.Since(l.fetched) < keyListTTL {
			return l.keys, nil
		}
	}
	fetched, gen := time.Now(), db.keyListGen.Load()
	keys, err := db.keys(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	// A list read while a key changed may predate the change: cache it
	// only if no invalidation happened meanwhile.
	if db.keyListGen.Load() == gen {
		db.keyLists.Store(tenantID, &keyList{keys: keys, fetched: fetched})
	}
	return keys, nil
}

// forgetKeyList drops a tenant's cached key list, and keeps lists read
// before now from being cached.
func (db *DB) forgetKeyList(tenantID string) {
	db.keyListGen.Add(1)
	db.keyLists.Delete(tenantID)
}

func (db *DB) keys(ctx context.Context, tenantID string) ([]*sb.APIKey, error) {
	rows, err := db.query(ctx, `SELECT `+keyCols+` FROM api_keys WHERE tenant_id = ? AND status <> 'revoked' ORDER BY id`, tenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]*sb.APIKey, 0, 4)
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// MaxRevokedListed bounds the revoked keys RevokedKeys lists.
const MaxRevokedListed = 100

// RevokedKeys lists the tenant's revoked keys, most recently revoked first,
// at most MaxRevokedListed.
func (db *DB) RevokedKeys(ctx context.Context, tenantID string) ([]*sb.APIKey, error) {
	rows, err := db.query(ctx, `SELECT `+keyCols+`, revoked_at FROM api_keys WHERE tenant_id = ? AND status = 'revoked'
		ORDER BY revoked_at DESC, id DESC LIMIT ?`, tenantID, MaxRevokedListed)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.APIKey
	for rows.Next() {
		var revoked sql.NullInt64
		k, err := scanKey(scanTail{rows, &revoked})
		if err != nil {
			return nil, err
		}
		k.RevokedAt = optTime(revoked)
		out = append(out, k)
	}
	return out, rows.Err()
}

// scanTail scans a row into a scanner's columns and then into tail: a row
// of more columns than the scanner knows.
type scanTail struct {
	row  interface{ Scan(...any) error }
	tail any
}

func (s scanTail) Scan(dest ...any) error { return s.row.Scan(append(dest, s.tail)...) }

// Key returns one unrevoked key of the tenant, or sb.ErrNotFound.
func (db *DB) Key(ctx context.Context, tenantID, id string) (*sb.APIKey, error) {
	return scanKey(db.queryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE tenant_id = ? AND id = ? AND status <> 'revoked'`, tenantID, id))
}

// RevokeKey revokes the tenant's key id for good and tells every node to
// forget it. A key that is absent, of another tenant or already revoked is
// sb.ErrNotFound.
func (db *DB) RevokeKey(ctx context.Context, tenantID, id string, now time.Time) (*sb.APIKey, error) {
	k, err := db.Key(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	res, err := db.exec(ctx, `UPDATE api_keys SET status = 'revoked', revoked_at = ? WHERE tenant_id = ? AND id = ? AND status <> 'revoked'`, sb.Micros(now), tenantID, id)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, sb.ErrNotFound
	}
	return k, db.notifyKey(ctx, k.TenantID, k.Hash)
}

// SetKeyStatus activates or deactivates a key (an operator command, so by
// key id alone) and tells every node.
func (db *DB) SetKeyStatus(ctx context.Context, id, status string) (*sb.APIKey, error) {
	res, err := db.exec(ctx, `UPDATE api_keys SET status = ? WHERE id = ? AND status <> 'revoked'`, status, id)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, sb.ErrNotFound
	}
	k, err := scanKey(db.queryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = ?`, id))
	if err != nil {
		return nil, err
	}
	return k, db.notifyKey(ctx, k.TenantID, k.Hash)
}

// TouchKeys records last use times, at most one write per key. The rows
// are updated in the order of their ids, so that nodes flushing the same
// keys at once lock them in the same order and never deadlock.
func (db *DB) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(used))
	return db.inTx(ctx, func(tx *Tx) error {
		for _, id := range ids {
			us := sb.Micros(used[id])
			if _, err := tx.exec(ctx, `UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`, us, id, us); err != nil {
				return err
			}
		}
		return nil
	})
}
