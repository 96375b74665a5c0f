package sqlstore

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/bench/rounds"
	"github.com/switchboard/switchboard/delivery"
	"github.com/switchboard/switchboard/provider/simulator"
)

// BenchmarkSendPipeline measures the store's side of a send end to end: 64
// concurrent callers accept messages durably while the delivery worker
// claims them, hands them to the simulator and records the hand-offs and
// the outcomes, all through the group-commit writer, as in `switchboard
// serve`. One op is one message accepted and delivered; cpu-us/op is the
// process CPU per message (the writer, the worker, the simulator and the
// callers). With SWITCHBOARD_TEST_POSTGRES set, the postgres sub-benchmark
// runs too, and reports pg-us/op, the CPU of this machine's PostgreSQL
// processes per message.
//
// The callers=8 variants make small batches (about 4 writes a commit
// against 26 with 64 callers): comparing the two gives what a commit costs
// whatever its size, which is what several nodes sharing a load pay more
// of.
func BenchmarkSendPipeline(b *testing.B) {
	for _, callers := range []int{64, 8} {
		b.Run(fmt.Sprintf("sqlite/callers=%d", callers), func(b *testing.B) {
			benchPipeline(b, testSQLiteURL(b), callers)
		})
		b.Run(fmt.Sprintf("postgres/callers=%d", callers), func(b *testing.B) {
			benchPipeline(b, testPostgresURL(b), callers)
		})
	}
}

// benchPipeline runs the pipeline on url with callers concurrent callers
// (a multiple of 2, the cores it is sized for).
func benchPipeline(b *testing.B, url string, callers int) {
	ctx := context.Background()
	db, err := Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	tn := &sb.Tenant{ID: sb.NewID(), Name: "b", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now, CreatedAt: now}
	if err := db.CreateTenant(ctx, tn); err != nil {
		b.Fatal(err)
	}
	if err := db.AddPhone(ctx, &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+1555" + sb.NewID()[20:26], Channels: []string{"sms", "chat"},
		Status: sb.PhoneOnline, CreatedAt: now}, nil); err != nil {
		b.Fatal(err)
	}
	sim := simulator.New(0)
	defer sim.Close()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		delivery.New(db, sim, delivery.Options{}).Run(wctx)
		close(done)
	}()
	defer func() { stop(); <-done }()

	n0, reqs0 := db.BatchStats()
	cpu0 := benchCPU()
	pg0, _ := rounds.CommandCPU("postgres") // read before the pool closes its connections
	var seq atomic.Int64
	b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			to := "+15005550000"
			if seq.Add(1)%2 == 0 {
				to = "+15005550004"
			}
			m := &sb.Message{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Direction: sb.Outbound, To: to,
				Body: "Your order has shipped", Channel: "sms", Status: sb.StatusQueued, CreatedAt: time.Now().UTC()}
			if err := db.AcceptSend(ctx, &sb.Send{Message: m}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; {
		n, err := db.QueueDepth(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d messages still queued or sent after 60s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	cpu := benchCPU() - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	if pg1, ok := rounds.CommandCPU("postgres"); ok && db.dialect == Postgres {
		b.ReportMetric(float64((pg1-pg0).Microseconds())/float64(b.N), "pg-us/op")
	}
	n1, reqs1 := db.BatchStats()
	if n := n1 - n0; n > 0 {
		b.ReportMetric(float64(reqs1-reqs0)/float64(n), "reqs/batch")
		b.ReportMetric(float64(b.N)/float64(n), "msgs/commit")
	}
}

func benchCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
