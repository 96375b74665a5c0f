package sqlstore

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Invalidation channel payloads are "key:<tenant id>:<hash>" (a key
// changed), "keys:<tenant id>" (a key was added) and "tenant:<id>".
const authChannel = "switchboard_auth"

// notifyKey tells every node that a key changed, and forgets this node's
// cached key list of its tenant.
func (db *DB) notifyKey(ctx context.Context, tenantID, hash string) error {
	db.forgetKeyList(tenantID)
	return db.notify(ctx, "key:"+tenantID+":"+hash)
}

// notifyKeys tells every node that a tenant has a new key.
func (db *DB) notifyKeys(ctx context.Context, tenantID string) error {
	db.forgetKeyList(tenantID)
	return db.notify(ctx, "keys:"+tenantID)
}

func (db *DB) notifyTenant(ctx context.Context, id string) error {
	return db.notify(ctx, "tenant:"+id)
}

func (db *DB) notify(ctx context.Context, payload string) error {
	if db.dialect != Postgres {
		return nil
	}
	_, err := db.write.ExecContext(ctx, `SELECT pg_notify($1, $2)`, authChannel, payload)
	return err
}

// Invalidation tells a cache to forget a key (by hash) or a tenant (by id).
// Reset means notifications may have been lost and everything must go.
type Invalidation struct {
	KeyHash  string
	TenantID string
	Reset    bool
}

// ListenAuth calls fn for every authentication change another process makes,
// until ctx ends. On SQLite, where every writer is this process or an
// operator command, it returns at once and callers rely on their cache TTL.
// On PostgreSQL it LISTENs, reconnecting (with a Reset) after any failure.
func (db *DB) ListenAuth(ctx context.Context, fn func(Invalidation)) {
	if db.dialect != Postgres {
		return
	}
	for ctx.Err() == nil {
		err := db.listenOnce(ctx, fn)
		if ctx.Err() != nil {
			return
		}
		slog.Warn("auth invalidation listener failed; reconnecting", "err", err)
		fn(Invalidation{Reset: true})
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (db *DB) listenOnce(ctx context.Context, fn func(Invalidation)) error {
	conn, err := pgx.Connect(ctx, db.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+authChannel); err != nil {
		return err
	}
	db.keyListGen.Add(1)
	db.keyLists.Clear()
	fn(Invalidation{Reset: true}) // anything cached before LISTEN may be stale
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		kind, rest, _ := strings.Cut(n.Payload, ":")
		switch kind {
		case "key":
			tenant, hash, _ := strings.Cut(rest, ":")
			db.forgetKeyList(tenant)
			fn(Invalidation{KeyHash: hash})
		case "keys":
			db.forgetKeyList(rest)
		case "tenant":
			fn(Invalidation{TenantID: rest})
		}
	}
}
