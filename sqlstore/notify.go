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

// phonesChannel payloads are "<node>:<phone id>": a phone's device has
// work (a message to take), sent by node.
const phonesChannel = "switchboard_phones"

// OnPhoneWork sets fn to be called whenever a phone's device has work: a
// message for it committed by this process, or, on PostgreSQL, by another
// node (see Listen). fn must not block.
func (db *DB) OnPhoneWork(fn func(phoneID string)) { db.phoneWork.Store(&fn) }

// PhoneWork tells every node (this one included) that a phone's device has
// work, outside any transaction: a wake-up that was scheduled for later.
func (db *DB) PhoneWork(ctx context.Context, phoneID string) error {
	db.phoneWorkHere(phoneID)
	if db.dialect != Postgres {
		return nil
	}
	_, err := db.exec(ctx, `SELECT pg_notify(?, ?)`, phonesChannel, db.node+":"+phoneID)
	return err
}

func (db *DB) phoneWorkHere(phoneID string) {
	if fn := db.phoneWork.Load(); fn != nil {
		(*fn)(phoneID)
	}
}

// notifyPhone tells this process, once the transaction has committed, and
// on PostgreSQL every other node (the notification is delivered at the
// commit), that phoneID's device has work.
func (t *Tx) notifyPhone(ctx context.Context, phoneID string) error {
	phoneID = t.deviceHolder(phoneID)
	t.afterCommit(func() { t.db.phoneWorkHere(phoneID) })
	if t.db.dialect != Postgres {
		return nil
	}
	_, err := t.exec(ctx, `SELECT pg_notify(?, ?)`, phonesChannel, t.db.node+":"+phoneID)
	return err
}

// deviceHolder is the phone whose device holds the event stream for the
// phone id: the one it shares a device with (another SIM), or itself, as
// far as the transaction's phone lists tell.
func (t *Tx) deviceHolder(id string) string {
	for _, tp := range t.phones {
		if i, ok := tp.index[id]; ok {
			if of := tp.uses[i].Phone.DeviceOf; of != "" {
				return of
			}
			return id
		}
	}
	return id
}

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
	_, err := db.exec(ctx, `SELECT pg_notify(?, ?)`, authChannel, payload)
	return err
}

// Invalidation tells a cache to forget a key (by hash) or a tenant (by id).
// Reset means notifications may have been lost and everything must go.
type Invalidation struct {
	KeyHash  string
	TenantID string
	Reset    bool
}

// Listen calls fn for every authentication change another process makes,
// and the OnPhoneWork function for every phone with work that another node
// announces, until ctx ends. On SQLite, where every writer is this process
// or an operator command, it returns at once and callers rely on their
// cache TTL. On PostgreSQL it LISTENs, reconnecting (with a Reset) after any
// failure.
func (db *DB) Listen(ctx context.Context, fn func(Invalidation)) {
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
	if _, err := conn.Exec(ctx, "LISTEN "+authChannel+"; LISTEN "+phonesChannel); err != nil {
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
		if n.Channel == phonesChannel {
			if node, phone, _ := strings.Cut(n.Payload, ":"); node != db.node {
				db.phoneWorkHere(phone)
			}
			continue
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
