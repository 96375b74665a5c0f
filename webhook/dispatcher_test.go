package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/sqlstore"
	"github.com/switchboard/switchboard/webhook"
)

// TestDispatcherWakes: a dispatcher whose poll is an hour (as on a
// single-node SQLite server, where no other node queues deliveries) sends
// a delivery queued in this process at once, and its retry at the retry
// policy's delay (2 s), never waiting for the poll.
func TestDispatcherWakes(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		db, err := sqlstore.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		var calls atomic.Int32
		got := make(chan int32, 4)
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := calls.Add(1)
			if n == 1 {
				w.WriteHeader(http.StatusInternalServerError) // the first attempt fails: retried after 2 s
			}
			got <- n
		}))
		t.Cleanup(hook.Close)
		now := time.Now().UTC()
		tn := &sb.Tenant{ID: sb.NewID(), Name: "w", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.AddDate(1, 0, 0), CreatedAt: now}
		if err := db.CreateTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
		wh := &sb.Webhook{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, URL: hook.URL, Events: []string{"message.delivered"},
			Secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", CreatedAt: now}
		if err := db.CreateWebhook(ctx, wh); err != nil {
			t.Fatal(err)
		}
		// A lease of an hour too: a retry is due before its claim's lease
		// ends only when the dispatcher looks again after recording.
		d := webhook.New(db, webhook.Options{Poll: time.Hour, Lease: time.Hour, AllowPrivate: true})
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		if _, err := db.CreateTestDelivery(ctx, tn.ID, sb.Live, wh.ID, "message.delivered", []byte(`{"message_id":"m"}`), now); err != nil {
			t.Fatal(err)
		}
		for want := int32(1); want <= 2; want++ {
			select {
			case n := <-got:
				if n != want {
					t.Fatalf("attempt %d, want %d", n, want)
				}
			case <-time.After(time.Minute):
				t.Fatalf("attempt %d never came: the dispatcher waited for its poll", want)
			}
		}
	})
}
