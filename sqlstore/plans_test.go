package sqlstore

import (
	"context"
	"strings"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// On PostgreSQL the statements over a batch of message ids (hand-offs and
// outcomes: `id = ANY(...)`) and the queue's polls (ClaimDue, NextDue: a
// range of run_at) are planned at every execution, never by a prepared
// statement's generic plan. pgx prepares each statement once per
// connection, and after five executions PostgreSQL may keep a generic plan
// made from the table of that moment: prepared while messages held a few
// rows, it was a sequential scan, and the outcome's UPDATE went on reading
// the whole table at every batch as it grew (80 us a message instead of 28
// after 60,000 sends). pg_prepared_statements lists the statements the
// connection prepared and how often each ran a generic plan; the test asks
// every connection of the pool (two).
func TestBatchStatementsPlannedEachTime(t *testing.T) {
	url := testPostgresURL(t)
	ctx := context.Background()
	db, err := OpenOptions(ctx, url, Options{MaxConns: 2, Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tn := writeTestTenant(t, db)
	writeTestPhone(t, db, tn.ID, 0)
	for i := range 8 {
		s := testSend(tn.ID)
		s.Message.To = "+1500555" + string(rune('0'+i)) + "000"
		if err := db.AcceptSend(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ClaimDue(ctx, time.Now(), time.Minute, 10); err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.NextDue(ctx, time.Now(), time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := db.RecordHandoffs(ctx, []sb.Handoff{{MessageID: s.Message.ID, At: now, OutcomeBy: now.Add(time.Minute)}}); err != nil {
			t.Fatal(err)
		}
		if err := db.RecordOutcomes(ctx, []sb.Outcome{{MessageID: s.Message.ID, Delivered: true, At: now}}); err != nil {
			t.Fatal(err)
		}
		if m, err := db.Message(ctx, tn.ID, sb.Live, s.Message.ID); err != nil || m.Status != sb.StatusDelivered {
			t.Fatalf("message %d: %+v, %v; want delivered", i, m, err)
		}
	}
	seen := 0
	for c := range 2 {
		conn, err := db.write.Conn(ctx) // the first is released last: both are held at once
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rows, err := conn.QueryContext(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var stmt string
			var generic, custom int
			if err := rows.Scan(&stmt, &generic, &custom); err != nil {
				t.Fatal(err)
			}
			seen++
			if strings.Contains(stmt, "= ANY(") || strings.Contains(stmt, "run_at <=") {
				t.Errorf("connection %d prepared (%d generic plans, %d custom): %s", c, generic, custom, stmt)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	if seen == 0 {
		t.Fatal("no prepared statement on the pool's connections: the check sees nothing")
	}
}
