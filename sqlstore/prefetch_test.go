package sqlstore

import (
	"context"
	"fmt"
	"sync"
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
	db, err := OpenOptions(ctx, url, Options{MaxConns: 4, Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
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

	hold, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go db.Write(ctx, func(*Tx) error {
		once.Do(func() { close(held) })
		<-hold
		return nil
	})
	<-held
	prefetches, single := readStats.prefetches.Load(), readStats.single.Load()
	sends := make([]*sb.Send, 11)
	errs := make(chan error, len(sends))
	for i := range sends {
		sends[i] = testSend(tn.ID)
		sends[i].Message.To = number(i) // number(10) is new
		go func() { errs <- db.AcceptSend(ctx, sends[i]) }()
	}
	for deadline := time.Now().Add(10 * time.Second); len(db.batch.queue) < len(sends); {
		if time.Now().After(deadline) {
			t.Fatalf("%d sends queued behind the held writer, want %d", len(db.batch.queue), len(sends))
		}
		time.Sleep(time.Millisecond)
	}
	close(hold)
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
