package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Tests of the daily counters across nodes (counters.go): two *DB opened on
// one database are two nodes. Each runs on SQLite (two processes' worth of
// connections on one file) and on PostgreSQL.

// twoNodes opens url twice; the second node can be closed early (closeA),
// which gives back what it holds of the daily limits.
func twoNodes(t *testing.T, url string) (a, b *DB, closeA func()) {
	t.Helper()
	a, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeA = func() { once.Do(func() { a.Close() }) }
	t.Cleanup(closeA)
	return a, openTestDB(t, url), closeA
}

// hammer sends from each node with 6 goroutines, attempts sends in all per
// node, made by mk, and returns how many each node had accepted; any answer
// but acceptance or refusal (code) fails the test.
func hammer(t *testing.T, nodes []*DB, attempts int, code sb.Code, mk func() *sb.Send) []int64 {
	t.Helper()
	accepted := make([]int64, len(nodes))
	var wg sync.WaitGroup
	var failed atomic.Value
	for i, db := range nodes {
		var left atomic.Int64
		left.Store(int64(attempts))
		for range 6 {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					switch err := db.AcceptSend(context.Background(), mk()); sb.ErrorCode(err) {
					case "":
						atomic.AddInt64(&accepted[i], 1)
					case code:
					default:
						failed.CompareAndSwap(nil, fmt.Sprintf("node %d: send: %v", i, err))
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	return accepted
}

// drain sends from db until accepted reaches want, or for 30 s (the units
// another node gave back show within emptyRetry; the bound is generous
// because each send is a commit of its own on a loaded machine, and it only
// runs out when the units never come back); it returns how many more it
// accepted.
func drain(t *testing.T, db *DB, want int64, accepted int64, code sb.Code, mk func() *sb.Send) int64 {
	t.Helper()
	var more int64
	deadline := time.Now().Add(30 * time.Second)
	for accepted+more < want && time.Now().Before(deadline) {
		switch err := db.AcceptSend(context.Background(), mk()); sb.ErrorCode(err) {
		case "":
			more++
		case code:
			time.Sleep(10 * time.Millisecond) // polling: the other node's units come back
		default:
			t.Fatal(err)
		}
	}
	return more
}

// A phone with a daily limit of N gets exactly N messages across two nodes
// sending to it at once, then NO_PHONE_AVAILABLE on both; its counter, the
// messages stored and the phones API on either node all say N. Another
// phone without a limit, sent to by both nodes at once, counts every send.
func TestDailyLimitAcrossNodes(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a, b, closeA := twoNodes(t, url)
		tn := writeTestTenant(t, a)
		const limit = 150
		p := writeTestPhone(t, a, tn.ID, limit)
		mk := func() *sb.Send { return testSend(tn.ID) }

		got := hammer(t, []*DB{a, b}, 2*limit, sb.CodeNoPhoneAvailable, mk)
		total := got[0] + got[1]
		if total > limit {
			t.Fatalf("accepted %d + %d = %d sends, over the limit of %d", got[0], got[1], total, limit)
		}
		// Node a stops: what it held goes back, and b can send it.
		closeA()
		total += drain(t, b, limit, total, sb.CodeNoPhoneAvailable, mk)
		if total != limit {
			t.Fatalf("accepted %d sends in all, want the limit %d", total, limit)
		}
		err := b.AcceptSend(ctx, mk())
		wantCode(t, "a send over the limit", err, sb.CodeNoPhoneAvailable)
		a2 := openTestDB(t, url)
		err = a2.AcceptSend(ctx, mk())
		wantCode(t, "a send over the limit on a node opened again", err, sb.CodeNoPhoneAvailable)

		if n := phoneCount(t, b, tn.ID, p.ID); n != limit {
			t.Errorf("phone counter %d, want %d", n, limit)
		}
		var stored int64
		if err := b.queryRow(ctx, `SELECT COUNT(*) FROM messages WHERE tenant_id = ? AND phone_id = ?`, tn.ID, p.ID).Scan(&stored); err != nil || stored != limit {
			t.Errorf("messages stored %d (%v), want %d", stored, err, limit)
		}
		for i, db := range []*DB{a2, b} {
			ph, err := db.Phone(ctx, tn.ID, sb.Live, p.ID)
			if err != nil || ph.SentToday != limit {
				t.Errorf("node %d: phone sent today %v (%v), want %d", i, ph, err, limit)
			}
		}

		// Without a limit, every send of both nodes counts, in shards.
		free := writeTestPhone(t, a2, tn.ID, 0)
		got = hammer(t, []*DB{a2, b}, 120, "", mk)
		if got[0] != 120 || got[1] != 120 {
			t.Fatalf("accepted %v on the phone without a limit, want 120 each", got)
		}
		if n := phoneCount(t, a2, tn.ID, free.ID); n != 240 {
			t.Errorf("counter of the phone without a limit %d, want 240", n)
		}
		ph, err := b.Phone(ctx, tn.ID, sb.Live, free.ID)
		if err != nil || ph.SentToday != 240 {
			t.Errorf("phone without a limit sent today %v (%v), want 240", ph, err)
		}
	})
}

// The plan's new contacts per day, across two nodes sending each message
// to a new recipient: exactly the limit become known, then
// NEW_CONTACT_LIMIT; messages to known recipients still go.
func TestNewContactLimitAcrossNodes(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a, b, closeA := twoNodes(t, url)
		tn := writeTestTenant(t, a)
		writeTestPhone(t, a, tn.ID, 0)
		const limit = 90
		var seq atomic.Int64
		mk := func() *sb.Send {
			s := testSend(tn.ID)
			s.Message.To = fmt.Sprintf("+1500555%04d", seq.Add(1))
			s.NewContactLimit = limit
			return s
		}
		known := testSend(tn.ID)
		known.Message.To, known.NewContactLimit = "+15009990000", limit
		if err := a.AcceptSend(ctx, known); err != nil {
			t.Fatal(err)
		}
		got := hammer(t, []*DB{a, b}, 2*limit, sb.CodeNewContactLimit, mk)
		total := 1 + got[0] + got[1]
		if total > limit {
			t.Fatalf("accepted %d + %d = %d new recipients, over the limit of %d", got[0], got[1], total, limit)
		}
		closeA()
		total += drain(t, b, limit, total, sb.CodeNewContactLimit, mk)
		if total != limit {
			t.Fatalf("accepted %d new recipients in all, want the limit %d", total, limit)
		}
		wantCode(t, "a new recipient over the limit", b.AcceptSend(ctx, mk()), sb.CodeNewContactLimit)
		if n, err := b.NewContactsToday(ctx, tn.ID, sb.Live, sb.Day(time.Now().UTC())); err != nil || n != limit {
			t.Errorf("new contacts today %d (%v), want %d", n, err, limit)
		}
		known = testSend(tn.ID)
		known.Message.To, known.NewContactLimit = "+15009990000", limit
		if err := b.AcceptSend(ctx, known); err != nil {
			t.Errorf("a send to a known recipient at the limit: %v", err)
		}
	})
}

// A send refused by a later check gives back the unit of the new-contact
// limit it took: with a limit of 3 and no phone, nothing is spent, and once
// a phone is added the three new recipients all go.
func TestRefusedSendGivesUnitBack(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		send := func(i int) error {
			s := testSend(tn.ID)
			s.Message.To, s.NewContactLimit = fmt.Sprintf("+1500555%04d", i), 3
			return db.AcceptSend(ctx, s)
		}
		for i := range 5 {
			wantCode(t, "a send with no phone", send(i), sb.CodeNoPhoneAvailable)
		}
		writeTestPhone(t, db, tn.ID, 0)
		for i := range 3 {
			if err := send(10 + i); err != nil {
				t.Fatalf("new recipient %d: %v", i, err)
			}
		}
		wantCode(t, "the fourth new recipient", send(20), sb.CodeNewContactLimit)
	})
}

// A node that holds units and sends nothing more gives them back within
// idleGiveBack, without closing: another node then reaches the limit.
func TestIdleUnitsGoBack(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a, b, _ := twoNodes(t, url)
		tn := writeTestTenant(t, a)
		const limit = 40
		p := writeTestPhone(t, a, tn.ID, limit)
		testSend := func(tenantID string) *sb.Send { // the phone's limit only
			s := testSend(tenantID)
			s.NewContactLimit = 0
			return s
		}
		if err := a.AcceptSend(ctx, testSend(tn.ID)); err != nil {
			t.Fatal(err)
		}
		k := counterKey{tn.ID, sb.Live, phoneCounter(p.ID), sb.Day(time.Now().UTC())}
		if held := a.allow.held(k); held != limit/blockDiv-1 {
			t.Fatalf("node a holds %d units after one send, want a block of %d less the one spent", held, limit/blockDiv)
		}
		if st := a.LimitStats(); st.Blocks != 1 || st.Units != limit/blockDiv || st.Held != limit/blockDiv-1 || st.GivenBack != 0 {
			t.Errorf("node a's stats after one send: %+v", st)
		}
		var total int64 = 1
		deadline := time.Now().Add(10 * time.Second)
		for total < limit && time.Now().Before(deadline) {
			switch err := b.AcceptSend(ctx, testSend(tn.ID)); sb.ErrorCode(err) {
			case "":
				total++
			case sb.CodeNoPhoneAvailable:
				time.Sleep(20 * time.Millisecond) // polling: a's units come back when idle
			default:
				t.Fatal(err)
			}
		}
		if total != limit || a.allow.held(k) != 0 {
			t.Fatalf("accepted %d, node a holds %d; want %d and 0", total, a.allow.held(k), limit)
		}
		if st := a.LimitStats(); st.GivenBack != limit/blockDiv-1 || st.Held != 0 {
			t.Errorf("node a's stats once idle: %+v, want %d units given back", st, limit/blockDiv-1)
		}
		if st := b.LimitStats(); st.Empty == 0 || st.Units != limit-1 { // all but the one a spent
			t.Errorf("node b's stats: %+v", st)
		}
		wantCode(t, "over the limit", b.AcceptSend(ctx, testSend(tn.ID)), sb.CodeNoPhoneAvailable)
	})
}

// A node that closes gives back the units it holds: the pool then holds
// only what was spent.
func TestCloseGivesUnitsBack(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a, b, closeA := twoNodes(t, url)
		tn := writeTestTenant(t, a)
		p := writeTestPhone(t, a, tn.ID, 1000)
		for range 3 {
			if err := a.AcceptSend(ctx, testSend(tn.ID)); err != nil {
				t.Fatal(err)
			}
		}
		day := sb.Day(time.Now().UTC())
		reserved := func() int64 {
			var n int64
			if err := b.queryRow(ctx, `SELECT reserved FROM daily_reservations WHERE tenant_id = ? AND environment = ? AND counter = ? AND day = ?`,
				tn.ID, string(sb.Live), phoneCounter(p.ID), day).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := reserved(); n != blockMax {
			t.Fatalf("reserved %d after three sends, want a block of %d", n, blockMax)
		}
		closeA()
		if n := reserved(); n != 3 {
			t.Errorf("reserved %d after the node closed, want the 3 it spent", n)
		}
	})
}

// Sends at once to one new recipient make it known once: they all go, and
// count one new contact, whatever the limit has left (PostgreSQL: the
// writers that lose the race on the recipient give their units back).
func TestOneNewRecipientAtOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		writeTestPhone(t, db, tn.ID, 0)
		for round := range 3 {
			to := fmt.Sprintf("+1500555%04d", round)
			var wg sync.WaitGroup
			errs := make(chan error, 10)
			for range 10 {
				wg.Go(func() {
					s := testSend(tn.ID)
					s.Message.To, s.NewContactLimit = to, 3
					errs <- db.AcceptSend(ctx, s)
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			}
			if n, err := db.NewContactsToday(ctx, tn.ID, sb.Live, sb.Day(time.Now().UTC())); err != nil || n != int64(round+1) {
				t.Fatalf("round %d: new contacts %d (%v), want %d", round, n, err, round+1)
			}
		}
	})
}

// A transaction reads a recipient once (the group commit's batch of sends
// to one number), and forgets it when anything in the transaction writes
// recipients: a STOP received in the same batch stops the sends after it.
func TestRecipientReadOncePerTransaction(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		p := writeTestPhone(t, db, tn.ID, 0)
		const to = "+15005550000"
		send := func(tx *Tx) error {
			s := testSend(tn.ID)
			s.Message.To = to
			return db.acceptFn(ctx, s, nil)(tx)
		}
		err := db.inTx(ctx, func(tx *Tx) error {
			for i := range 3 {
				if err := send(tx); err != nil {
					return fmt.Errorf("send %d: %w", i, err)
				}
			}
			stop := &sb.Message{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Direction: sb.Inbound, From: to, To: p.Number,
				Body: "STOP", Channel: "sms", Status: sb.StatusReceived, PhoneID: p.ID, CreatedAt: time.Now().UTC()}
			if err := tx.inbound(ctx, stop, hookCache{}); err != nil {
				return err
			}
			wantCode(t, "a send after STOP in the same transaction", send(tx), sb.CodeRecipientOptedOut)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, opted, err := db.Recipient(ctx, tn.ID, sb.Live, to); err != nil || !opted {
			t.Errorf("recipient opted out %v (%v), want true", opted, err)
		}
	})
}

// TestWarmupLimitAcrossNodes: a phone warming up (day 1 of 40/14, daily
// limit 1000) gets exactly its effective limit of 40 across two nodes
// sending to it at once, not its daily limit: the units each node reserves
// of the phone's counter are bounded by the effective limit. Then
// NO_PHONE_AVAILABLE on both, and on a node opened again.
func TestWarmupLimitAcrossNodes(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		ctx := context.Background()
		a, b, closeA := twoNodes(t, url)
		tn := writeTestTenant(t, a)
		now := time.Now().UTC()
		p := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15551280001", Kind: sb.PhoneSimulated, Channels: []string{sb.ChannelSMS},
			Status: sb.PhoneOnline, DailyLimit: 1000, Warmup: &sb.Warmup{Start: 40, Days: 14, From: now}, CreatedAt: now}
		if err := a.AddPhone(ctx, p, nil); err != nil {
			t.Fatal(err)
		}
		const effective = 40
		if got := p.LimitOn(now); got != effective {
			t.Fatalf("effective limit %d, want %d", got, effective)
		}
		mk := func() *sb.Send { return testSend(tn.ID) }
		got := hammer(t, []*DB{a, b}, 2*effective, sb.CodeNoPhoneAvailable, mk)
		total := got[0] + got[1]
		if total > effective {
			t.Fatalf("accepted %d + %d = %d sends, over the warm-up's limit of %d", got[0], got[1], total, effective)
		}
		closeA() // what a held goes back to b
		total += drain(t, b, effective, total, sb.CodeNoPhoneAvailable, mk)
		if total != effective {
			t.Fatalf("accepted %d sends in all, want the warm-up's limit %d", total, effective)
		}
		wantCode(t, "a send over the warm-up's limit", b.AcceptSend(ctx, mk()), sb.CodeNoPhoneAvailable)
		a2 := openTestDB(t, url)
		wantCode(t, "a send over the warm-up's limit on a node opened again", a2.AcceptSend(ctx, mk()), sb.CodeNoPhoneAvailable)
		if n := phoneCount(t, b, tn.ID, p.ID); n != effective {
			t.Errorf("phone counter %d, want %d", n, effective)
		}
		for i, db := range []*DB{a2, b} {
			ph, err := db.Phone(ctx, tn.ID, sb.Live, p.ID)
			if err != nil || ph.SentToday != effective || ph.LimitOn(time.Now()) != effective {
				t.Errorf("node %d: sent today %d, effective limit %d (%v), want %d", i, ph.SentToday, ph.LimitOn(time.Now()), err, effective)
			}
		}
	})
}
