package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// claimState reads a message's or a delivery's claim: its node and when
// it is due (for a claimed message, when its claim ends).
func claimState(t *testing.T, db *DB, table, id string) (claimer string, due int64) {
	t.Helper()
	query := `SELECT claimed_by, next_attempt_at FROM webhook_deliveries WHERE id = ?`
	if table == "messages" {
		query = `SELECT COALESCE(c.node, m.claimed_by), COALESCE(c.until, m.run_at)
			FROM messages m LEFT JOIN message_claims c ON c.message_id = m.id WHERE m.id = ?`
	}
	var c sql.NullString
	var d sql.NullInt64
	if err := db.queryRow(context.Background(), query, id).Scan(&c, &d); err != nil {
		t.Fatal(err)
	}
	return c.String, d.Int64
}

// A node that stops beating is declared dead by one live node, once, and
// its claimed messages (queued, or sent and waiting for their outcome) and
// leased webhook deliveries become due at once and unclaimed; other nodes'
// claims, and work nobody claimed, stay as they are. The dead node learns
// it at its next beat and is registered again. Claims that lapse are
// counted as lease redeliveries, taken-over ones as takeovers.
func TestTakeOverDead(t *testing.T) {
	// The dead-after limit is far longer than this test takes on a loaded
	// machine: with 3 s, b and c (which never beat after registering) were
	// once found dead by the second look, the test having taken 6 s to get
	// there under CI's load.
	const deadAfter = 10 * time.Minute
	url := testPostgresURL(t)
	a, b, c := openTestDB(t, url), openTestDB(t, url), openTestDB(t, url)
	ctx := context.Background()
	for _, n := range []*DB{a, b, c} {
		if err := n.RegisterNode(ctx, "127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
	}
	tn := writeTestTenant(t, a)
	writeTestPhone(t, a, tn.ID, 0)
	var ids []string
	for range 5 {
		s := testSend(tn.ID)
		if err := a.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.Message.ID)
	}
	sched := testSend(tn.ID)
	later := time.Now().Add(time.Hour).UTC()
	sched.Message.ScheduledAt = &later
	if err := a.AcceptSend(ctx, sched); err != nil {
		t.Fatal(err)
	}
	// a claims three: one stays queued, one is sent (waiting for its
	// outcome), one is delivered; b claims the other two, and delivers one.
	got, err := a.ClaimDue(ctx, time.Now(), time.Minute, 3)
	if err != nil || len(got) != 3 {
		t.Fatalf("a.ClaimDue = %d, %v", len(got), err)
	}
	queued, sent, done := got[0].ID, got[1].ID, got[2].ID
	if got, err := b.ClaimDue(ctx, time.Now(), time.Minute, 3); err != nil || len(got) != 2 {
		t.Fatalf("b.ClaimDue = %d, %v", len(got), err)
	}
	now := time.Now()
	if err := a.RecordHandoffs(ctx, []sb.Handoff{{MessageID: sent, At: now, OutcomeBy: now.Add(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	hook := &sb.Webhook{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, URL: "http://127.0.0.1:1/h", Events: []string{sb.EventDelivered},
		Secret: "0123456789abcdef", CreatedAt: now}
	if err := a.CreateWebhook(ctx, hook); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordOutcomes(ctx, []sb.Outcome{{MessageID: done, Delivered: true, At: now}}); err != nil {
		t.Fatal(err)
	}
	room := func(string) int { return 10 }
	dels, err := a.ClaimDeliveries(ctx, time.Now(), time.Minute, 10, nil, room)
	if err != nil || len(dels) != 1 {
		t.Fatalf("a.ClaimDeliveries = %d, %v", len(dels), err)
	}
	// b holds the delivery of the message it delivered.
	if err := b.RecordOutcomes(ctx, []sb.Outcome{{MessageID: ids[4], Delivered: true, At: now}}); err != nil {
		t.Fatal(err)
	}
	bDels, err := b.ClaimDeliveries(ctx, time.Now(), time.Minute, 10, nil, room)
	if err != nil || len(bDels) != 1 {
		t.Fatalf("b.ClaimDeliveries = %d, %v", len(bDels), err)
	}
	if who, _ := claimState(t, a, "messages", queued); who != a.NodeID() {
		t.Fatalf("claimed_by %q, want a's id %q", who, a.NodeID())
	}
	if who, _ := claimState(t, a, "webhook_deliveries", dels[0].ID); who != a.NodeID() {
		t.Fatalf("delivery claimed_by %q, want a's id", who)
	}

	// Nobody is dead yet.
	if moved, err := b.TakeOverDead(ctx, deadAfter, time.Now()); err != nil || len(moved) != 0 {
		t.Fatalf("TakeOverDead with every node beating = %+v, %v; want none", moved, err)
	}
	// a stops beating (its last beat twice deadAfter ago); b and c look at once.
	if _, err := a.exec(ctx, `UPDATE nodes SET heartbeat_at = heartbeat_at - ? WHERE id = ?`, (2 * deadAfter).Microseconds(), a.NodeID()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var moved []sb.Takeover
	var wg sync.WaitGroup
	for _, n := range []*DB{b, c} {
		wg.Go(func() {
			m, err := n.TakeOverDead(ctx, deadAfter, time.Now())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			moved = append(moved, m...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(moved) != 1 || moved[0].Node != a.NodeID() || moved[0].Messages != 2 || moved[0].Deliveries != 1 {
		t.Fatalf("takeovers %+v, want one of a's node: 2 messages (queued, sent), 1 delivery", moved)
	}
	if d := moved[0].DeclaredDead.Sub(moved[0].LastHeartbeat); d < 2*deadAfter {
		t.Errorf("declared dead %v after its last beat, want at least %v", d, 2*deadAfter)
	}
	for _, id := range []string{queued, sent} {
		if who, due := claimState(t, a, "messages", id); who != "" || due > sb.Micros(time.Now()) {
			t.Errorf("message %s after the takeover: claimed by %q, due %v; want unclaimed and due", id, who, sb.FromMicros(due))
		}
	}
	if who, due := claimState(t, a, "webhook_deliveries", dels[0].ID); who != "" || due > sb.Micros(time.Now()) {
		t.Errorf("delivery after the takeover: claimed by %q, due %v; want unclaimed and due", who, sb.FromMicros(due))
	}
	if who, due := claimState(t, a, "messages", sched.Message.ID); who != "" || due != sb.Micros(later) {
		t.Errorf("scheduled message: claimed by %q, due %v; want untouched", who, sb.FromMicros(due))
	}
	if who, _ := claimState(t, a, "messages", ids[3]); who != b.NodeID() {
		t.Errorf("b's message claimed by %q after a's takeover, want b", who)
	}
	if who, _ := claimState(t, a, "webhook_deliveries", bDels[0].ID); who != b.NodeID() {
		t.Errorf("b's delivery claimed by %q after a's takeover, want b", who)
	}
	// A second look finds nothing more: a is dead already.
	if again, err := c.TakeOverDead(ctx, deadAfter, time.Now()); err != nil || len(again) != 0 {
		t.Errorf("second TakeOverDead = %+v, %v; want none", again, err)
	}

	// a beats again: it learns it was declared dead, and is alive again.
	winner := b
	if moved[0].Node == a.NodeID() && c.Redeliveries().TakeoverMessages == 2 {
		winner = c
	}
	by, wasDead, err := a.Heartbeat(ctx, "127.0.0.1:1")
	if err != nil || !wasDead || by != winner.NodeID() {
		t.Fatalf("a.Heartbeat = %q, %v, %v; want declared dead by %s", by, wasDead, err, winner.NodeID())
	}
	if _, wasDead, err := a.Heartbeat(ctx, "127.0.0.1:1"); err != nil || wasDead {
		t.Fatalf("a's next beat = %v, %v; want alive", wasDead, err)
	}

	// The taken-over messages are claimed again, not counted as lapsed
	// leases; b's claim, seen after its lease, is.
	got, err = c.ClaimDue(ctx, time.Now().Add(2*time.Minute), time.Minute, 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("c.ClaimDue after the leases = %d, %v; want the 2 taken over and b's lapsed one", len(got), err)
	}
	r := winner.Redeliveries()
	if r.TakeoverMessages != 2 || r.TakeoverDeliveries != 1 {
		t.Errorf("winner's redeliveries %+v, want 2 messages and 1 delivery taken over", r)
	}
	if r := c.Redeliveries(); r.LeaseMessages != 1 {
		t.Errorf("c's lease redeliveries %d, want 1 (b's lapsed claim)", r.LeaseMessages)
	}
	// A delivery claimed after its lease ran out is a lease redelivery:
	// b claims the one taken over from a (due, unclaimed), then c claims
	// both of b's after their leases.
	if got, err := b.ClaimDeliveries(ctx, time.Now(), time.Minute, 10, nil, room); err != nil || len(got) != 1 {
		t.Fatalf("b.ClaimDeliveries of the one taken over = %d, %v", len(got), err)
	}
	if _, err := c.ClaimDeliveries(ctx, time.Now().Add(2*time.Minute), time.Minute, 10, nil, room); err != nil {
		t.Fatal(err)
	}
	if r := c.Redeliveries(); r.LeaseDeliveries != 2 {
		t.Errorf("c's lease redeliveries of deliveries %d, want 2", r.LeaseDeliveries)
	}

	// c stops cleanly: its claims are due at once and its row is gone.
	rel, err := c.LeaveCluster(ctx, time.Now())
	if err != nil || rel.Messages != 3 || rel.Deliveries != 2 {
		t.Fatalf("LeaveCluster = %+v, %v; want 3 messages and 2 deliveries released", rel, err)
	}
	var n int
	if err := a.queryRow(ctx, `SELECT COUNT(*) FROM nodes WHERE id = ?`, c.NodeID()).Scan(&n); err != nil || n != 0 {
		t.Errorf("c's row after it left: %d, %v", n, err)
	}
}

// A successful hand-off marks the message sent, due again at its outcome
// deadline and still claimed by the node that handed it over (a node that
// dies before the outcome comes leaves it to the takeover). On PostgreSQL
// the deadline's parameter needs its type: it once failed there, untyped
// in a CASE, and every recorded hand-off was retried forever.
func TestRecordHandoffsSent(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		writeTestPhone(t, db, tn.ID, 0)
		s := testSend(tn.ID)
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		if got, err := db.ClaimDue(ctx, time.Now(), time.Minute, 10); err != nil || len(got) != 1 {
			t.Fatalf("ClaimDue = %d, %v", len(got), err)
		}
		now := time.Now()
		deadline := now.Add(5 * time.Minute)
		if err := db.RecordHandoffs(ctx, []sb.Handoff{{MessageID: s.Message.ID, At: now, OutcomeBy: deadline}}); err != nil {
			t.Fatal(err)
		}
		m, err := db.Message(ctx, tn.ID, sb.Live, s.Message.ID)
		if err != nil || m.Status != sb.StatusSent {
			t.Fatalf("message after its hand-off: %+v, %v; want sent", m, err)
		}
		if who, due := claimState(t, db, "messages", s.Message.ID); who != db.NodeID() || due != sb.Micros(deadline) {
			t.Errorf("claimed by %q, due %v; want this node, due at the outcome deadline %v", who, sb.FromMicros(due), deadline)
		}
	})
}

// On SQLite a start releases every claim (one file has one node): the
// messages and deliveries a dead process held are counted as lease
// redeliveries, like claims whose lease ran out on PostgreSQL.
func TestRestartCountsRedeliveries(t *testing.T) {
	url := testSQLiteURL(t)
	ctx := context.Background()
	before, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tn := writeTestTenant(t, before)
	writeTestPhone(t, before, tn.ID, 0)
	s := testSend(tn.ID)
	if err := before.AcceptSend(ctx, s); err != nil {
		t.Fatal(err)
	}
	hook := &sb.Webhook{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, URL: "http://127.0.0.1:1/h", Events: []string{sb.EventDelivered},
		Secret: "0123456789abcdef", CreatedAt: time.Now()}
	if err := before.CreateWebhook(ctx, hook); err != nil {
		t.Fatal(err)
	}
	other := testSend(tn.ID)
	if err := before.AcceptSend(ctx, other); err != nil {
		t.Fatal(err)
	}
	if got, err := before.ClaimDue(ctx, time.Now(), time.Minute, 10); err != nil || len(got) != 2 {
		t.Fatalf("ClaimDue = %d, %v", len(got), err)
	}
	if err := before.RecordOutcomes(ctx, []sb.Outcome{{MessageID: other.Message.ID, Delivered: true, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if got, err := before.ClaimDeliveries(ctx, time.Now(), time.Minute, 10, nil, func(string) int { return 10 }); err != nil || len(got) != 1 {
		t.Fatalf("ClaimDeliveries = %d, %v", len(got), err)
	}
	before.Close()

	after := openTestDB(t, url)
	if err := after.ReleaseLeases(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := after.ReleaseDeliveryLeases(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, err := after.ClaimDue(ctx, time.Now(), time.Minute, 10); err != nil || len(got) != 1 || got[0].ID != s.Message.ID {
		t.Fatalf("ClaimDue after the restart = %v, %v; want the message claimed before it", got, err)
	}
	if r := after.Redeliveries(); r.LeaseMessages != 1 || r.LeaseDeliveries != 1 || r.TakeoverMessages != 0 {
		t.Errorf("redeliveries after the restart %+v, want 1 message and 1 delivery by lease", r)
	}
}

// TestHeartbeatWithPoolExhausted: a node whose every pool connection is
// busy still beats (the beat has a connection of its own), so the others
// do not declare a busy node dead.
func TestHeartbeatWithPoolExhausted(t *testing.T) {
	url := testPostgresURL(t)
	ctx := context.Background()
	// The wait is long enough for Open's own work (migrations, the node's
	// background reads) on a loaded machine, short enough for the test.
	db, err := OpenOptions(ctx, url, Options{MaxConns: 1, ConnWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.RegisterNode(ctx, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.begin(ctx) // holds the pool's only connection
	if err != nil {
		t.Fatal(err)
	}
	defer tx.rollback()
	if _, err := db.exec(ctx, `SELECT 1`); err == nil {
		t.Fatal("the pool of one connection answered a second caller: the test holds nothing")
	}
	if _, dead, err := db.Heartbeat(ctx, "127.0.0.1:1"); err != nil || dead {
		t.Fatalf("heartbeat with the pool exhausted: dead %v, err %v", dead, err)
	}
}

// A node runs two group-commit writers while it is the only live node and
// one while others share the database, as its heartbeat finds them;
// Options.Writers fixes the number. Writes go on through every change.
func TestWritersFollowLiveNodes(t *testing.T) {
	url := testPostgresURL(t)
	ctx := context.Background()
	a, b := openTestDB(t, url), openTestDB(t, url)
	fixed := openTestDBOptions(t, url, Options{Writers: 3})
	insert := probeInserts(t, a)
	n := 0
	write := func(db *DB) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			n++
			k := fmt.Sprint(n)
			wg.Go(func() { errs <- db.Write(ctx, insert(k)) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	beat := func(db *DB, want int) {
		t.Helper()
		if _, _, err := db.Heartbeat(ctx, "127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
		if got := db.Writers(); got != want {
			t.Fatalf("writers = %d, want %d", got, want)
		}
		write(db)
	}
	if got := a.Writers(); got != 2 {
		t.Fatalf("writers before any beat = %d, want 2", got)
	}
	if err := a.RegisterNode(ctx, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	beat(a, 2) // alone
	if err := b.RegisterNode(ctx, "127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	beat(a, 1)
	beat(b, 1)
	if err := fixed.RegisterNode(ctx, "127.0.0.1:3"); err != nil {
		t.Fatal(err)
	}
	beat(fixed, 3) // fixed: three live nodes change nothing
	beat(a, 1)
	if _, err := b.LeaveCluster(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := fixed.LeaveCluster(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	beat(a, 2) // alone again
	var count int
	if err := a.queryRow(ctx, `SELECT COUNT(*) FROM batch_probe`).Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Fatalf("%d rows written, want %d", count, n)
	}
}

// Each beat tells Options.HostNodes how many live nodes run on this
// node's machine: those registered with its host, not the others, nor a
// node declared dead.
func TestHeartbeatCountsNodesOnHost(t *testing.T) {
	url := testPostgresURL(t)
	ctx := context.Background()
	var mu sync.Mutex
	var got []int
	a := openTestDBOptions(t, url, Options{HostNodes: func(n int) {
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	}})
	b, c, d := openTestDB(t, url), openTestDB(t, url), openTestDB(t, url)
	c.host = "another machine"
	if a.host == "" || b.host != a.host {
		t.Fatalf("hosts %q and %q, want one machine's id for both", a.host, b.host)
	}
	for _, n := range []*DB{a, b, c, d} {
		if err := n.RegisterNode(ctx, "127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.exec(ctx, `UPDATE nodes SET dead_at = 1 WHERE id = ?`, d.NodeID()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Heartbeat(ctx, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != 2 {
		t.Errorf("HostNodes got %v, want [2]: a and b on this machine (c on another, d dead)", got)
	}
}
