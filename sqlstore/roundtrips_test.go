package sqlstore

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
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

// On PostgreSQL a batch of delivered outcomes that begins its transaction
// costs two round trips: BEGIN with finish_delivered_hooks, which makes
// the messages final and returns the webhooks of their tenants (migration
// 0022), and COMMIT. Before, BEGIN, the update and the read of the
// webhooks were a round trip each: four in all. A webhook subscribed to
// message.delivered adds the insert of its delivery; one deleted adds
// nothing, and gets no delivery.
func TestOutcomeRoundTrips(t *testing.T) {
	ctx := context.Background()
	db, proxy, tenantID := proxiedStore(t)
	now := time.Now().UTC()
	hook := func(deleted bool) string {
		t.Helper()
		h := &sb.Webhook{ID: sb.NewID(), TenantID: tenantID, Env: sb.Live, URL: "http://127.0.0.1:1/h", Events: []string{sb.EventDelivered},
			Secret: "0123456789abcdef", CreatedAt: now}
		if err := db.CreateWebhook(ctx, h); err != nil {
			t.Fatal(err)
		}
		if deleted {
			if err := db.DeleteWebhook(ctx, tenantID, sb.Live, h.ID, now); err != nil {
				t.Fatal(err)
			}
		}
		return h.ID
	}
	// outcome records one delivered outcome alone in its transaction (the
	// only writer held until it waits) and counts what reached PostgreSQL.
	outcome := func() (string, int64, time.Duration) {
		t.Helper()
		s := testSend(tenantID)
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		release := holdWriter(db)
		errc := make(chan error, 1)
		go func() {
			errc <- db.RecordOutcomes(ctx, []sb.Outcome{{MessageID: s.Message.ID, Delivered: true, At: time.Now().UTC()}})
		}()
		waitQueued(t, db, 1)
		before := proxy.Sends()
		release()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return s.Message.ID, proxy.Sends() - before, time.Since(start)
	}
	// counted runs outcome until a round finishes within a second (a
	// connection idle for longer gets database/sql's ping first).
	counted := func(want int64, what string) string {
		t.Helper()
		for range 5 {
			outcome() // readies the statements on both connections
		}
		for range 5 {
			id, n, took := outcome()
			if took > 900*time.Millisecond {
				continue
			}
			if n != want {
				t.Errorf("%s reached PostgreSQL in %d sends, want %d", what, n, want)
			}
			return id
		}
		t.Fatal("no round finished within a second")
		return ""
	}
	counted(2, "an outcome batch for a tenant without webhooks (BEGIN with finish_delivered_hooks, COMMIT)")
	hook(true)
	counted(2, "an outcome batch for a tenant with a deleted webhook")
	live := hook(false)
	id := counted(3, "an outcome batch for a tenant with a webhook (and the insert of its delivery)")
	var hooks []string
	rows, err := db.write.QueryContext(ctx, `SELECT webhook_id FROM webhook_deliveries WHERE message_id = $1 AND event = $2`, id, sb.EventDelivered)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		hooks = append(hooks, h)
	}
	if len(hooks) != 1 || hooks[0] != live {
		t.Errorf("deliveries of message.delivered to webhooks %v, want one to %s", hooks, live)
	}
	if m, err := db.Message(ctx, tenantID, sb.Live, id); err != nil || m.Status != sb.StatusDelivered {
		t.Errorf("message after its outcome: %+v, %v; want delivered", m, err)
	}
}
