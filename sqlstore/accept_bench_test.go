package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// BenchmarkAcceptSend measures durable accepts through the group-commit
// writer with 64 concurrent callers, the shape of the HTTP send path.
func BenchmarkAcceptSend(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	send := benchSender(b, db)
	runSends(b, db, send, func(int64) string { return "+15005550000" })
}

// BenchmarkAcceptSendDistinct is BenchmarkAcceptSend on PostgreSQL with
// every send to one of 1,000 known recipients at random: the shape of a
// tenant notifying its customers, where a batch rarely sends twice to one
// recipient. It reports the batch size and the statements that read ahead
// for a batch (Tx.prefetch) or one recipient, per send.
func BenchmarkAcceptSendDistinct(b *testing.B) {
	db := openTestDB(b, testPostgresURL(b))
	send := benchSender(b, db)
	numbers := make([]string, 1000)
	for i := range numbers {
		numbers[i] = fmt.Sprintf("+1212555%04d", i)
		if err := send(numbers[i]); err != nil {
			b.Fatal(err)
		}
	}
	prefetches, single := readStats.prefetches.Load(), readStats.single.Load()
	runSends(b, db, send, func(i int64) string { return numbers[i*7919%int64(len(numbers))] })
	b.ReportMetric(float64(readStats.prefetches.Load()-prefetches)/float64(b.N), "prefetches/op")
	b.ReportMetric(float64(readStats.single.Load()-single)/float64(b.N), "single-reads/op")
}

// BenchmarkAcceptSendNew is BenchmarkAcceptSendDistinct with every send to
// a recipient never seen before (a code sent to each new user).
func BenchmarkAcceptSendNew(b *testing.B) {
	db := openTestDB(b, testPostgresURL(b))
	send := benchSender(b, db)
	runSends(b, db, send, func(i int64) string { return fmt.Sprintf("+1212%07d", i) })
}

// benchSender makes a Scale tenant with one phone on db and returns a
// function that accepts a send of it to a number.
func benchSender(b *testing.B, db *DB) func(to string) error {
	ctx := context.Background()
	now := time.Now().UTC()
	tn := &sb.Tenant{ID: sb.NewID(), Name: "b", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now, CreatedAt: now}
	if err := db.CreateTenant(ctx, tn); err != nil {
		b.Fatal(err)
	}
	if err := db.AddPhone(ctx, &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15550000001", Channels: []string{"sms", "chat"}, Status: sb.PhoneOnline, CreatedAt: now}, nil); err != nil {
		b.Fatal(err)
	}
	return func(to string) error {
		m := &sb.Message{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Direction: sb.Outbound, To: to,
			Body: "hello", Channel: "sms", Status: sb.StatusQueued, CreatedAt: time.Now().UTC()}
		return db.AcceptSend(ctx, &sb.Send{Message: m})
	}
}

// runSends times b.N sends from 64 goroutines, the i-th (from 1) to to(i),
// and reports the average batch of the group commit over them.
func runSends(b *testing.B, db *DB, send func(to string) error, to func(i int64) string) {
	batches, reqs := db.BatchStats()
	var next atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := send(to(next.Add(1))); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	batches1, reqs1 := db.BatchStats()
	b.ReportMetric(float64(reqs1-reqs)/float64(batches1-batches), "reqs/batch")
}
