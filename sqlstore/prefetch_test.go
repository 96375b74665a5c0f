package sqlstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// On PostgreSQL a batch of sends reads its recipients and its tenants'
// phones' versions in one statement (Tx.prefetch), not one round trip per
// recipient. The only writer is held by a first caller until eleven sends
// wait behind it, ten to known recipients and one to a new one: they then
// run in one transaction that reads once ahead and never one recipient at a
// time, and each send sees its recipient as it is: a known recipient keeps
// the phone that first wrote to it, the new one is recorded.
func TestBatchReadsAhead(t *testing.T) {
	url := testPostgresURL(t)
	ctx := context.Background()
	db := openTestDBOptions(t, url, Options{MaxConns: 4, Writers: 1})
	tn := writeTestTenant(t, db)
	first := writeTestPhone(t, db, tn.ID, 0)
	number := func(i int) string { return fmt.Sprintf("+1500555%04d", 100+i) }
	for i := range 10 {
		s := testSend(tn.ID)
		s.Message.To = number(i)
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// A second phone: a known recipient stays with the first (sticky), so
	// a send that misread its recipient as new could go out on this one.
	writeTestPhone(t, db, tn.ID, 0)

	release := holdWriter(db)
	prefetches, single := readStats.prefetches.Load(), readStats.single.Load()
	sends := make([]*sb.Send, 11)
	errs := make(chan error, len(sends))
	for i := range sends {
		sends[i] = testSend(tn.ID)
		sends[i].Message.To = number(i) // number(10) is new
		go func() { errs <- db.AcceptSend(ctx, sends[i]) }()
	}
	waitQueued(t, db, len(sends))
	release()
	for range sends {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := readStats.prefetches.Load() - prefetches; n != 1 {
		t.Errorf("%d statements read ahead for the batch, want 1", n)
	}
	if n := readStats.single.Load() - single; n != 0 {
		t.Errorf("%d recipients read one at a time, want 0", n)
	}
	for i, s := range sends[:10] {
		if s.Message.PhoneID != first.ID {
			t.Errorf("send %d to known recipient %s went out on phone %s, want the first, %s", i, s.Message.To, s.Message.PhoneID, first.ID)
		}
	}
	if known, _, err := db.Recipient(ctx, tn.ID, sb.Live, number(10)); err != nil || !known {
		t.Errorf("new recipient %s: known %v, %v", number(10), known, err)
	}
}

// On PostgreSQL a new recipient's row waits for the commit's statement
// (insertRecipient), but a statement of the same transaction that names
// recipients sees it, and work that fails takes its rows back (undo).
func TestDeferredRecipients(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, testPostgresURL(t))
	tn := writeTestTenant(t, db)
	k := func(n string) rcpKey { return rcpKey{tn.ID, sb.Live, n} }
	count := func(q interface {
		queryRow(context.Context, string, ...any) row
	}, n string) int {
		t.Helper()
		var c int
		if err := q.queryRow(ctx, `SELECT COUNT(*) FROM recipients WHERE tenant_id = ? AND number = ?`, tn.ID, n).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	err := db.inTx(ctx, func(tx *Tx) error {
		now := time.Now()
		if err := tx.insertRecipient(ctx, k("+15005550101"), "", now); err != nil {
			return err
		}
		if len(tx.newRecipients) != 1 {
			t.Errorf("%d rows deferred, want 1", len(tx.newRecipients))
		}
		if c := count(tx, "+15005550101"); c != 1 {
			t.Errorf("a statement naming recipients saw %d rows of the recipient inserted before it, want 1", c)
		}
		m := tx.mark()
		if err := tx.insertRecipient(ctx, k("+15005550102"), "", now); err != nil {
			return err
		}
		tx.undo(m)
		if len(tx.newRecipients) != 0 || tx.recipients != nil {
			t.Errorf("after undo: %d rows deferred, recipients read %v", len(tx.newRecipients), tx.recipients)
		}
		return tx.insertRecipient(ctx, k("+15005550103"), "", now) // inserted by the commit
	})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]int{"+15005550101": 1, "+15005550102": 0, "+15005550103": 1} {
		if c := count(db, n); c != want {
			t.Errorf("%s: %d rows after the commit, want %d", n, c, want)
		}
	}
}
