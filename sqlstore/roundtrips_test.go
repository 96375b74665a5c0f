package sqlstore

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/tcpproxy"
)

// On PostgreSQL a batch of sends to recipients the node knows costs one
// round trip: its BEGIN, the check of the reads it took from what the node
// kept (keptreads.go), the deferred INSERT of its messages, recipients and
// counters, and its COMMIT (commitPostgres). A batch with a recipient the
// node does not know costs two: BEGIN goes with the statement that reads
// ahead for the batch (Tx.prefetch through start), and the INSERT with
// COMMIT. Through database/sql each statement was a round trip of its own,
// four in all. The store talks to PostgreSQL through a proxy that counts
// what the client sends; the only writer is held until a batch of sends
// waits behind it, each kind of batch three times first (to ready the
// statements on the connections), then once more, counted.
// Not counted: the ping database/sql may send when it takes a
// connection idle for over a second (pgx's ResetSession): a round slow
// enough for that is run again.
func TestBatchRoundTrips(t *testing.T) {
	ctx := context.Background()
	db, proxy, tenantID := proxiedStore(t) // the first rounds ready the statements on both connections

	batch := func(round int, known bool) (sends int64, took time.Duration) {
		t.Helper()
		start := time.Now()
		release := holdWriter(db)
		errs := make(chan error, 6)
		for i := range cap(errs) {
			s := testSend(tenantID)
			// Known recipients and, in each round, a new one.
			s.Message.To = fmt.Sprintf("+1500555%04d", 100+i%3)
			if i == 0 && !known {
				s.Message.To = fmt.Sprintf("+1500556%04d", round)
			}
			go func() { errs <- db.AcceptSend(ctx, s) }()
		}
		waitQueued(t, db, cap(errs))
		before := proxy.Sends()
		release()
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		return proxy.Sends() - before, time.Since(start)
	}
	for round := range 6 {
		batch(round, round%2 == 0)
	}
	// A round that took over a second may have found its connection idle
	// that long, and then database/sql's ping went first: such a round
	// proves nothing, and another is run.
	rounds := 6
	counted := func(known bool, want int64, what string) {
		t.Helper()
		for ; rounds < 12; rounds++ {
			n, took := batch(rounds, known)
			if took > 900*time.Millisecond {
				t.Logf("round %d took %v: not counted", rounds, took)
				continue
			}
			if n != want {
				t.Errorf("%s reached PostgreSQL in %d sends, want %d", what, n, want)
			}
			rounds++
			return
		}
		t.Fatal("no round finished within a second")
	}
	counted(false, 2, "a batch of sends with a new recipient (BEGIN with the read-ahead, the INSERT with COMMIT)")
	counted(true, 1, "a batch of sends to known recipients (BEGIN, the check, the INSERT and COMMIT)")
	var n int
	if err := db.queryRow(ctx, `SELECT COUNT(*) FROM messages WHERE tenant_id = ?`, tenantID).Scan(&n); err != nil || n != 6*rounds {
		t.Errorf("%d messages stored (%v), want %d", n, err, 6*rounds)
	}
}

// A connection that broke while it sat in the pool (PostgreSQL restarted,
// a proxy dropped it) is found broken when the transaction sends its first
// statement with BEGIN; nothing of the transaction has run, so start takes
// another connection and sends it all again: the caller never sees it.
func TestBrokenConnectionReplaced(t *testing.T) {
	ctx := context.Background()
	db, proxy, tenantID := proxiedStore(t)
	send := func(to string) error {
		s := testSend(tenantID)
		s.Message.To = to
		return db.AcceptSend(ctx, s)
	}
	if err := send("+15005550100"); err != nil {
		t.Fatal(err)
	}
	accepted := proxy.Accepted()
	// Every connection the pool holds breaks; new ones go through.
	proxy.SetMode(tcpproxy.Drop)
	proxy.SetMode(tcpproxy.Forward)
	if err := send("+15005550101"); err != nil {
		t.Fatalf("a send after the pool's connections broke: %v", err)
	}
	if proxy.Accepted() == accepted {
		t.Error("no new connection was opened: the broken one was not found")
	}
	var n int
	if err := db.queryRow(ctx, `SELECT COUNT(*) FROM messages WHERE tenant_id = ?`, tenantID).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d messages stored (%v), want 2", n, err)
	}
}

// proxiedStore opens a fresh PostgreSQL schema through a proxy, with one
// writer and two connections (a send may take a second one for a moment),
// and writes a tenant with a phone in it.
func proxiedStore(t *testing.T) (*DB, *tcpproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(testPostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.New(t, u.Host)
	u.Host = proxy.Addr()
	db := openTestDBOptions(t, u.String(), Options{MaxConns: 2, Writers: 1})
	tn := writeTestTenant(t, db)
	writeTestPhone(t, db, tn.ID, 0)
	return db, proxy, tn.ID
}
