package sqlstore

import (
	"context"
	"path/filepath"
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
	now := time.Now().UTC()
	tn := &sb.Tenant{ID: sb.NewID(), Name: "b", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now, CreatedAt: now}
	if err := db.CreateTenant(ctx, tn); err != nil {
		b.Fatal(err)
	}
	if err := db.AddPhone(ctx, &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: "+15550000001", Channels: []string{"sms", "chat"}, Status: sb.PhoneOnline, CreatedAt: now}, nil); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m := &sb.Message{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Direction: sb.Outbound, To: "+15005550000",
				Body: "hello", Channel: "sms", Status: sb.StatusQueued, CreatedAt: time.Now().UTC()}
			if err := db.AcceptSend(ctx, &sb.Send{Message: m, NewContactLimit: 0}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(batchStats.reqs.Load())/float64(batchStats.n.Load()), "reqs/batch")
}
