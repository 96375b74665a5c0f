package delivery

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/sqlstore"
)

// flakyNodes is the real nodes table whose heartbeats fail while down is
// set: the database out of this node's reach.
type flakyNodes struct {
	*sqlstore.DB
	down bool
}

func (f *flakyNodes) Heartbeat(ctx context.Context, addr string) (string, bool, error) {
	if f.down {
		return "", false, errors.New("database unreachable")
	}
	return f.DB.Heartbeat(ctx, addr)
}

// A node that could not beat (the database out of its reach) does not
// judge the others as soon as it beats again: they may not have reached
// the database since either. It declares a silent node dead once it has
// itself beaten for DeadAfter. The beats are called one by one, so that
// the test depends on no timing.
func TestLivenessAfterOutage(t *testing.T) {
	url := dbtest.Postgres(t)
	ctx := context.Background()
	open := func() *sqlstore.DB {
		db, err := sqlstore.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	other := &Liveness{Store: open(), Addr: "a", Log: log}
	store := &flakyNodes{DB: open()}
	self := &Liveness{Store: store, Addr: "b", Log: log}
	for _, l := range []*Liveness{other, self} {
		if err := l.Register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	silence := func() { // the other node's last beat, a minute ago
		dbtest.Exec(t, url, `UPDATE nodes SET heartbeat_at = heartbeat_at - 60000000 WHERE id = ?`, other.Store.NodeID())
	}
	silence()
	// This node has beaten for less than DeadAfter since it registered.
	if err := self.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if by, wasDead, err := other.Store.Heartbeat(ctx, "a"); err != nil || wasDead {
		t.Fatalf("declared dead (by %q) by a node that had just started: %v", by, err)
	}

	// An outage: this node's beats fail, the other's too (silent).
	self.beating = time.Now().Add(-time.Hour)
	store.down = true
	if err := self.beat(ctx); err == nil {
		t.Fatal("beat during the outage succeeded")
	}
	silence()
	store.down = false
	if err := self.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if by, wasDead, err := other.Store.Heartbeat(ctx, "a"); err != nil || wasDead {
		t.Fatalf("declared dead (by %q) right after the outage: %v", by, err)
	}

	// Beating for DeadAfter, it judges: the silent node is dead.
	silence()
	self.beating = time.Now().Add(-self.DeadAfter)
	if err := self.beat(ctx); err != nil {
		t.Fatal(err)
	}
	if by, wasDead, err := other.Store.Heartbeat(ctx, "a"); err != nil || !wasDead || by != store.NodeID() {
		t.Fatalf("the silent node: declared dead %v by %q (%v); want by %s", wasDead, by, err, store.NodeID())
	}
}
