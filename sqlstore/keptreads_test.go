package sqlstore

import (
	"context"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Two nodes on one database. Node a keeps the recipients and the phones'
// version its sends read (keptreads.go); node b changes them: an opt-out,
// an opt-in, a phone deleted and another added. Each of a's next sends
// must answer as if it had read them afresh, which it does when the
// check of its transaction fails and the batch runs again: one stale
// transaction counted each time.
func TestKeptReadsChecked(t *testing.T) {
	url := testPostgresURL(t)
	ctx := context.Background()
	a := openTestDBOptions(t, url, Options{MaxConns: 2, Writers: 1})
	b := openTestDBOptions(t, url, Options{MaxConns: 2, Writers: 1})
	tn := writeTestTenant(t, a)
	p := writeTestPhone(t, a, tn.ID, 0)
	const x, y = "+15005550100", "+15005550101"
	send := func(to string) (*sb.Message, error) {
		s := testSend(tn.ID)
		s.Message.To = to
		return s.Message, a.AcceptSend(ctx, s)
	}
	// A send with an Idempotency-Key reads the key first: its statement
	// begins the transaction, and the check goes with its BEGIN (start)
	// instead of with the COMMIT.
	sendKeyed := func(to string) error {
		s := testSend(tn.ID)
		s.Message.To = to
		s.Idempotency = &sb.IdempotencyRecord{Key: sb.NewID(), RequestHash: "h", Status: 202}
		s.Render = func(*sb.Message) []byte { return []byte(`{}`) }
		return a.AcceptSend(ctx, s)
	}
	fromX := func(body string) {
		t.Helper()
		in := &sb.Message{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Direction: sb.Inbound, From: x, To: p.Number,
			Body: body, Channel: "sms", Status: sb.StatusReceived, PhoneID: p.ID, CreatedAt: time.Now().UTC()}
		if err := b.Inbound(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	wantStale := func(what string, want int64) {
		t.Helper()
		if _, stale := a.KeptReadStats(); stale != want {
			t.Errorf("%s: %d stale transactions, want %d", what, stale, want)
		}
	}
	for _, to := range []string{x, y, x, y} {
		if _, err := send(to); err != nil {
			t.Fatal(err)
		}
	}
	if hits, _ := a.KeptReadStats(); hits < 2 {
		t.Fatalf("%d reads taken from what the node kept after two sends to each recipient, want at least 2", hits)
	}
	wantStale("sends to recipients no one else changed", 0)

	// x opts out on b; a's next batch, a send to x and one to y, took x
	// from what it kept, as not opted out.
	fromX("STOP")
	release := holdWriter(a)
	errX, errY := make(chan error, 1), make(chan error, 1)
	go func() { _, err := send(x); errX <- err }()
	waitQueued(t, a, 1)
	go func() { _, err := send(y); errY <- err }()
	waitQueued(t, a, 2)
	release()
	wantCode(t, "a send to a recipient who opted out on another node", <-errX, sb.CodeRecipientOptedOut)
	if err := <-errY; err != nil {
		t.Errorf("a send to another recipient in the same batch: %v", err)
	}
	wantStale("after the opt-out", 1)

	// a now keeps x as opted out; x opts in on b. A batch whose only
	// caller's answer is a verdict, taken from what a kept, is checked too.
	fromX("START")
	if _, err := send(x); err != nil {
		t.Errorf("a send to a recipient who opted in again on another node: %v", err)
	}
	wantStale("after the opt-in", 2)

	// x opts out again on b, and a's next send to x reads an
	// Idempotency-Key first.
	fromX("STOP")
	wantCode(t, "a send with an Idempotency-Key to a recipient who opted out on another node", sendKeyed(x), sb.CodeRecipientOptedOut)
	wantStale("after the second opt-out", 3)
	fromX("START")
	if err := sendKeyed(x); err != nil {
		t.Errorf("a send with an Idempotency-Key after the opt-in: %v", err)
	}
	wantStale("after the second opt-in", 4)

	// x opts out on b once more, and a's send to x joins a transaction
	// that has begun (another caller's statement ran first): what it takes
	// from what a kept is checked with the COMMIT.
	// The failed check runs the batch again, each caller on its own, and
	// this function with it (Write's fn may run more than once): the send
	// is made at the first run only. A second send to x, made at the
	// second run, ran after the opt-in below on a loaded machine and
	// counted a stale transaction of its own (seen in CI).
	fromX("STOP")
	errX = make(chan error, 1)
	runs := 0
	err := a.Write(ctx, func(tx *Tx) error {
		if _, err := tx.exec(ctx, `SELECT 1`); err != nil {
			return err
		}
		if !tx.begun {
			t.Error("the transaction has not begun after a statement")
		}
		if runs++; runs == 1 {
			go func() { _, err := send(x); errX <- err }()
			waitQueued(t, a, 1) // taken by this writer's transaction next
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a send in a begun transaction to a recipient who opted out on another node", <-errX, sb.CodeRecipientOptedOut)
	wantStale("after the third opt-out", 5)
	fromX("START")

	// b deletes the tenant's only phone, then adds another.
	if err := b.DeletePhone(ctx, tn.ID, p.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = send(x)
	wantCode(t, "a send after the tenant's only phone was deleted on another node", err, sb.CodeNoPhoneAvailable)
	wantStale("after the phone was deleted", 6)
	p2 := writeTestPhone(t, b, tn.ID, 0)
	m, err := send(y)
	if err != nil || m.PhoneID != p2.ID {
		t.Errorf("a send after another node added a phone: phone %q, %v; want %s", m.PhoneID, err, p2.ID)
	}
	wantStale("after the phone was added", 7)

	// What a wrote itself it keeps as written: no stale transaction.
	for range 2 {
		if _, err := send(y); err != nil {
			t.Fatal(err)
		}
	}
	wantStale("sends after the node's own write", 7)
}

// check_reads (migration 0021) fails with SBR01 on any difference between
// what a node kept and the database, and is silent otherwise; its plans
// reach recipients and tenants by their primary keys even when they were
// made on nearly empty tables.
func TestCheckReadsPlan(t *testing.T) {
	ctx := context.Background()
	tx := planTestTx(t)
	scans := func() map[string][2]int64 { return xactScans(t, tx, "recipients", "tenants") }
	now := time.Now().UnixMicro()
	if _, err := tx.ExecContext(ctx, `INSERT INTO tenants (id, name, plan, status, trial_ends_at, created_at, phones_version) VALUES ('tn_a', 'a', 'scale', 'active', $1, $1, 7)`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO recipients (tenant_id, environment, number, opted_out, phone_id, reserved_by, first_seen_at, updated_at)
		VALUES ('tn_a', 'live', '+15005550001', 0, 'ph_1', NULL, $1, $1), ('tn_a', 'live', '+15005550002', 1, NULL, 'm_1', $1, $1)`, now); err != nil {
		t.Fatal(err)
	}
	type rcp struct {
		number, phone, reserved string
		opted                   int32
	}
	kept := []rcp{{"+15005550001", "ph_1", "", 0}, {"+15005550002", "", "m_1", 1}}
	check := func(rs []rcp, version int64) error {
		t.Helper()
		var ts, es, ns, ps, res []string
		var os []int32
		for _, r := range rs {
			ts, es, ns = append(ts, "tn_a"), append(es, "live"), append(ns, r.number)
			os, ps, res = append(os, r.opted), append(ps, r.phone), append(res, r.reserved)
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT c`); err != nil {
			t.Fatal(err)
		}
		_, err := tx.ExecContext(ctx, checkReads, ts, es, ns, os, ps, res, []string{"tn_a"}, []int64{version})
		if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT c`); rerr != nil {
			t.Fatal(rerr)
		}
		return err
	}
	before := scans()
	for range 6 { // the plans are made at the first call, on two rows
		if err := check(kept, 7); err != nil {
			t.Fatalf("check_reads of what the tables hold: %v", err)
		}
	}
	wantNoSeqScans(t, "check_reads", before, scans(), 6)
	if _, err := tx.ExecContext(ctx, `INSERT INTO recipients (tenant_id, environment, number, opted_out, first_seen_at, updated_at)
		SELECT 'tn_a', 'live', '+1500556' || lpad(i::text, 4, '0'), 0, $1, $1 FROM generate_series(1, 2000) i`, now); err != nil {
		t.Fatal(err)
	}
	after := scans()
	if err := check(kept, 7); err != nil {
		t.Fatalf("check_reads of what the tables hold: %v", err)
	}
	wantNoSeqScans(t, "check_reads", after, scans(), 1)
	changed := map[string]func() ([]rcp, int64){
		"opted_out":      func() ([]rcp, int64) { r := append([]rcp{}, kept...); r[0].opted = 1; return r, 7 },
		"phone_id":       func() ([]rcp, int64) { r := append([]rcp{}, kept...); r[0].phone = "ph_2"; return r, 7 },
		"phone_id NULL":  func() ([]rcp, int64) { r := append([]rcp{}, kept...); r[1].phone = "ph_1"; return r, 7 },
		"reserved_by":    func() ([]rcp, int64) { r := append([]rcp{}, kept...); r[1].reserved = ""; return r, 7 },
		"a recipient":    func() ([]rcp, int64) { return append(kept, rcp{"+15009999999", "", "", 0}), 7 },
		"phones_version": func() ([]rcp, int64) { return kept, 8 },
	}
	for what, f := range changed {
		rs, version := f()
		if err := check(rs, version); sqlState(err) != staleReadsCode {
			t.Errorf("check_reads with %s changed: %v, want SQLSTATE %s", what, err, staleReadsCode)
		}
	}
}

// A node keeps at most max recipients: one more forgets the recipients of
// another tenant (or, with no other, of its own), never the phones'
// versions; an unknown recipient is not kept, and a tenant forgotten is
// forgotten whole.
func TestKeptReadsBounded(t *testing.T) {
	c := &keptReads{on: true, max: 3}
	k := func(tenant, number string) rcpKey { return rcpKey{tenant, sb.Live, number} }
	known := recipient{known: true, phoneID: "ph"}
	kept := func(tenant string) int {
		if kt := c.tenants[tenant]; kt != nil {
			return len(kt.recipients)
		}
		return 0
	}
	c.keepVersion("a", 7)
	c.keepRecipient(k("a", "1"), known)
	c.keepRecipient(k("a", "2"), known)
	c.keepRecipient(k("b", "1"), known)
	c.keepRecipient(k("b", "1"), known) // the same one again takes no room
	if c.n != 3 || kept("a") != 2 || kept("b") != 1 {
		t.Fatalf("kept %d: a %d, b %d; want 3: 2 and 1", c.n, kept("a"), kept("b"))
	}
	c.keepRecipient(k("b", "2"), known)
	if c.n != 2 || kept("a") != 0 || kept("b") != 2 || c.tenants["a"].version != 7 || !c.tenants["a"].hasVersion {
		t.Fatalf("after a fourth: kept %d: a %d (version %+v), b %d; want 2: a's forgotten, its version kept, and b's 2", c.n, kept("a"), c.tenants["a"], kept("b"))
	}
	c.keepRecipient(k("b", "3"), known)
	c.keepRecipient(k("b", "4"), known) // only b has any: b's go
	if c.n != 1 || kept("b") != 1 {
		t.Fatalf("with one tenant over the bound: kept %d, b %d; want 1 and 1", c.n, kept("b"))
	}
	c.keepRecipient(k("b", "4"), recipient{}) // unknown now: forgotten
	c.forgetTenant("a")
	if c.n != 0 || kept("b") != 0 || c.tenants["a"] != nil {
		t.Fatalf("after forgetting: kept %d, b %d, a %+v; want nothing", c.n, kept("b"), c.tenants["a"])
	}
	off := &keptReads{}
	off.keepRecipient(k("a", "1"), known)
	off.keepVersion("a", 1)
	if off.tenants != nil {
		t.Fatalf("a store that keeps nothing (SQLite) kept %+v", off.tenants)
	}
}
