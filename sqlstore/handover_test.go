package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// testSend is a send to a simulator number from the tenant's live
// environment, with room for new contacts.
func testSend(tenantID string) *sb.Send {
	m := &sb.Message{ID: sb.NewID(), TenantID: tenantID, Env: sb.Live, Direction: sb.Outbound, To: "+15005550000",
		Body: "hi", Channel: "sms", Status: sb.StatusQueued, CreatedAt: time.Now().UTC()}
	return &sb.Send{Message: m, NewContactLimit: 2500}
}

// queueState reads what the durable queue holds for a message: when it is
// due (its run_at), or 0 when it is out of the queue.
func queueState(t *testing.T, db *DB, id string) (runAt int64, attempts int) {
	t.Helper()
	var due sql.NullInt64
	if err := db.queryRow(context.Background(), `SELECT run_at, attempts FROM messages WHERE id = ?`, id).Scan(&due, &attempts); err != nil {
		t.Fatal(err)
	}
	return due.Int64, attempts
}

// Once a worker takes accepted sends (Accepted), a direct send due at once
// is stored claimed for the worker's lease and comes out of Accepted, not
// out of ClaimDue; a scheduled send, and any send while every place of the
// hand-over is taken, is queued as due for ClaimDue instead.
func TestHandover(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		writeTestPhone(t, db, tn.ID, 0)

		// No worker yet: queued as due.
		before := testSend(tn.ID)
		if err := db.AcceptSend(ctx, before); err != nil {
			t.Fatal(err)
		}
		if _, attempts := queueState(t, db, before.Message.ID); attempts != 0 {
			t.Fatalf("a send before any worker took the hand-over has %d attempts, want 0 (due)", attempts)
		}
		if got, err := db.ClaimDue(ctx, time.Now(), time.Minute, 10); err != nil || len(got) != 1 || got[0].ID != before.Message.ID {
			t.Fatalf("ClaimDue = %v, %v; want the send made before the hand-over", got, err)
		}

		// A worker waits on Accepted: sends go to it, claimed.
		const lease = 40 * time.Second
		wctx, stop := context.WithCancel(ctx)
		got := make(chan []*sb.Message, 16)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				msgs, err := db.Accepted(wctx, lease, 100)
				if err != nil {
					return
				}
				got <- msgs
			}
		}()
		// Accepted registers on its first call: wait until it has.
		for db.handover.Load() == nil {
			time.Sleep(time.Millisecond)
		}
		s := testSend(tn.ID)
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		select {
		case msgs := <-got:
			if len(msgs) != 1 || msgs[0].ID != s.Message.ID || msgs[0].From == "" || msgs[0].Attempts != 1 {
				t.Fatalf("Accepted gave %+v, want the send with its phone and 1 attempt", msgs)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the accepted send never reached Accepted")
		}
		runAt, attempts := queueState(t, db, s.Message.ID)
		if runAt != 0 || attempts != 1 {
			t.Errorf("handed-over send stored with run_at %d, attempts %d; want none (out of the queue) and 1", runAt, attempts)
		}
		node, until := claimState(t, db, "messages", s.Message.ID)
		if want := sb.Micros(s.Message.CreatedAt.Add(lease)); node != db.node || until != want {
			t.Errorf("handed-over send's claim: node %q until %d; want this node %q until the lease's end %d", node, until, db.node, want)
		}
		// The poll wakes when the claim ends (the earlier send's claim,
		// for a minute, ends later).
		if next, ok, err := db.NextDue(ctx, time.Now(), time.Now().Add(time.Hour)); err != nil || !ok || sb.Micros(next) != until {
			t.Errorf("NextDue = %v, %v, %v; want the end of the handed-over send's claim %v", next, ok, err, sb.FromMicros(until))
		}
		if msgs, err := db.ClaimDue(ctx, time.Now(), time.Minute, 10); err != nil || len(msgs) != 0 {
			t.Errorf("ClaimDue = %v, %v; a handed-over send must not be claimed again", msgs, err)
		}

		// A scheduled send waits in the table.
		sched := testSend(tn.ID)
		at := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
		sched.Message.ScheduledAt = &at
		if err := db.AcceptSend(ctx, sched); err != nil {
			t.Fatal(err)
		}
		if runAt, attempts := queueState(t, db, sched.Message.ID); runAt != sb.Micros(at) || attempts != 0 {
			t.Errorf("scheduled send stored with run_at %d, attempts %d; want %d, 0", runAt, attempts, sb.Micros(at))
		}

		// Every place taken: the send is queued as due, and the places
		// come back.
		h := db.handover.Load()
		for h.reserve() {
		}
		full := testSend(tn.ID)
		if err := db.AcceptSend(ctx, full); err != nil {
			t.Fatal(err)
		}
		if _, attempts := queueState(t, db, full.Message.ID); attempts != 0 {
			t.Errorf("a send with the hand-over full has %d attempts, want 0 (due)", attempts)
		}
		if msgs, err := db.ClaimDue(ctx, time.Now(), time.Minute, 10); err != nil || len(msgs) != 1 || msgs[0].ID != full.Message.ID {
			t.Errorf("ClaimDue = %v, %v; want the send queued while the hand-over was full", msgs, err)
		}
		h.held.Add(-handoverCap)

		// A refused send gives its place back.
		held := h.held.Load()
		optOut(t, db, tn.ID, "+15005550009")
		refused := testSend(tn.ID)
		refused.Message.To = "+15005550009"
		if err := db.AcceptSend(ctx, refused); sb.ErrorCode(err) != sb.CodeRecipientOptedOut {
			t.Fatalf("send to an opted-out recipient: %v", err)
		}
		if h.held.Load() != held {
			t.Errorf("a refused send kept its place: %d held, want %d", h.held.Load(), held)
		}

		// The worker stops: sends are queued as due again.
		stop()
		<-done
		after := testSend(tn.ID)
		if err := db.AcceptSend(ctx, after); err != nil {
			t.Fatal(err)
		}
		if _, attempts := queueState(t, db, after.Message.ID); attempts != 0 {
			t.Errorf("a send after the worker stopped has %d attempts, want 0 (due)", attempts)
		}
	})
}

func optOut(t *testing.T, db *DB, tenantID, number string) {
	t.Helper()
	m := &sb.Message{ID: sb.NewID(), TenantID: tenantID, Env: sb.Live, Direction: sb.Inbound, From: number, To: "+15550000000",
		Body: "STOP", Channel: "sms", Status: sb.StatusReceived, CreatedAt: time.Now().UTC()}
	if err := db.Inbound(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// Concurrent sends to a phone with a daily limit share transactions, which
// read the tenant's phones once: the sends a transaction has already
// counted must still close the phone at its limit.
func TestLimitedPhoneCounterConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		p := writeTestPhone(t, db, tn.ID, 7)
		const n = 60
		codes := make(chan sb.Code, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				codes <- sb.ErrorCode(db.AcceptSend(ctx, testSend(tn.ID)))
			})
		}
		wg.Wait()
		close(codes)
		var ok, full int
		for c := range codes {
			switch c {
			case "":
				ok++
			case sb.CodeNoPhoneAvailable:
				full++
			default:
				t.Fatalf("send failed with %s", c)
			}
		}
		if ok != 7 || full != n-7 || phoneCount(t, db, tn.ID, p.ID) != 7 {
			t.Errorf("accepted %d, refused %d, counter %d; want 7, %d, 7", ok, full, phoneCount(t, db, tn.ID, p.ID), n-7)
		}
	})
}

// The writer runs callers' work in one open transaction as they arrive. A
// verdict (a failed check) leaves the others' work in place; a caller whose
// work fails otherwise is run again on its own, and so are the others, so
// the failure undoes nothing of theirs. (SQLite: its single writer is where
// callers are sure to share a transaction.)
func TestBatchFailureIsolated(t *testing.T) {
	func(t *testing.T, db *DB) {
		ctx := context.Background()
		insert := probeInserts(t, db)
		// The first caller holds the writer until the others are queued,
		// so that they share its transaction.
		release := make(chan struct{})
		errBoom := errors.New("boom")
		results := make(map[string]error)
		var mu sync.Mutex
		var wg sync.WaitGroup
		run := func(name string, fn func(*Tx) error) {
			wg.Go(func() {
				err := db.Write(ctx, fn)
				mu.Lock()
				results[name] = err
				mu.Unlock()
			})
		}
		started := make(chan struct{})
		var once sync.Once
		run("first", func(tx *Tx) error {
			once.Do(func() { close(started); <-release }) // only the first run waits
			return insert("first")(tx)
		})
		<-started // the writer runs "first" and waits in it
		run("verdict", func(tx *Tx) error { return sb.Errorf(sb.CodeNoPhoneAvailable, "no phone") })
		run("ok", insert("ok"))
		run("boom", func(tx *Tx) error {
			if err := insert("boom")(tx); err != nil {
				return err
			}
			return errBoom
		})
		run("after", insert("after"))
		for len(db.batch.queue) < 4 {
			time.Sleep(time.Millisecond)
		}
		close(release)
		wg.Wait()
		if sb.ErrorCode(results["verdict"]) != sb.CodeNoPhoneAvailable || !errors.Is(results["boom"], errBoom) {
			t.Fatalf("verdict %v, boom %v", results["verdict"], results["boom"])
		}
		for _, k := range []string{"first", "ok", "after"} {
			if results[k] != nil {
				t.Errorf("%s: %v", k, results[k])
			}
		}
		var keys []string
		rows, err := db.query(ctx, `SELECT k FROM batch_probe ORDER BY k`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			rows.Scan(&k)
			keys = append(keys, k)
		}
		rows.Close()
		if len(keys) != 3 || keys[0] != "after" || keys[1] != "first" || keys[2] != "ok" {
			t.Errorf("rows %v, want after, first, ok: the failed caller's insert undone and nobody else's", keys)
		}
	}(t, openTestDB(t, testSQLiteURL(t)))
}

// A claim ends with its message's time in the worker: the outcome, a
// carrier taking the message, a retry or a deferral (both back in the
// queue, due then), or ReleaseLeases at start-up (due at once). Nothing
// is left claimed, counted in the backlog, or put back in the queue when
// the claim would have run out.
func TestClaimsEnd(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		writeTestPhone(t, db, tn.ID, 0)
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			for {
				if _, err := db.Accepted(wctx, time.Minute, 100); err != nil {
					return
				}
			}
		}()
		for db.handover.Load() == nil {
			time.Sleep(time.Millisecond)
		}
		accept := func() string {
			s := testSend(tn.ID)
			if err := db.AcceptSend(ctx, s); err != nil {
				t.Fatal(err)
			}
			return s.Message.ID
		}
		claimed := func(id string) bool {
			var n int
			if err := db.queryRow(ctx, `SELECT COUNT(*) FROM message_claims WHERE message_id = ?`, id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		}
		var ids []string
		for range 6 {
			ids = append(ids, accept())
		}
		if n, err := db.QueueDepth(ctx); err != nil || n != 6 {
			t.Fatalf("QueueDepth = %d, %v; want the 6 claimed sends", n, err)
		}
		now := time.Now()
		retry, until := now.Add(time.Hour).Truncate(time.Microsecond), now.Add(2*time.Hour).Truncate(time.Microsecond)
		if err := db.RecordOutcomes(ctx, []sb.Outcome{{MessageID: ids[0], Delivered: true, At: now}, {MessageID: ids[1], FailureReason: "no", At: now}}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.RecordCarrier(ctx, "link", []sb.CarrierEvent{{Kind: sb.CarrierAccepted, MessageID: ids[2], Parts: 1, ExternalID: "E2", At: now}}); err != nil {
			t.Fatal(err)
		}
		if err := db.RecordHandoffs(ctx, []sb.Handoff{
			{MessageID: ids[3], At: now, Err: errors.New("busy"), Retry: retry},
			{MessageID: ids[4], At: now, Err: &sb.Deferred{Until: until}, Retry: until, Deferred: true},
		}); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids[:5] {
			if claimed(id) {
				t.Errorf("send %d still claimed", i)
			}
		}
		for i, want := range map[int]int64{3: sb.Micros(retry), 4: sb.Micros(until)} {
			if due, _ := queueState(t, db, ids[i]); due != want {
				t.Errorf("send %d due at %v, want %v", i, sb.FromMicros(due), sb.FromMicros(want))
			}
		}
		if _, attempts := queueState(t, db, ids[4]); attempts != 0 {
			t.Errorf("deferred send has %d attempts, want its attempt given back (0)", attempts)
		}
		if n, err := db.QueueDepth(ctx); err != nil || n != 3 {
			t.Errorf("QueueDepth = %d, %v; want 3 (retried, deferred, still claimed)", n, err)
		}
		// Past the claims' end: only the send still claimed is due again.
		got, err := db.ClaimDue(ctx, now.Add(10*time.Minute), time.Minute, 10)
		if err != nil || len(got) != 1 || got[0].ID != ids[5] {
			t.Fatalf("ClaimDue after the claims' end = %v, %v; want only the send still claimed", got, err)
		}

		// At start-up (SQLite), a claim is released: due at once.
		id := accept()
		if err := db.ReleaseLeases(ctx, now); err != nil {
			t.Fatal(err)
		}
		if due, _ := queueState(t, db, id); claimed(id) || due != sb.Micros(now) {
			t.Errorf("after ReleaseLeases: claimed %v, due %v; want unclaimed, due %v", claimed(id), sb.FromMicros(due), now)
		}
	})
}
