package campaign

import (
	"context"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/sqlstore"
)

// watchedDB is the store, telling calls how many campaigns each of the
// runner's looks found; it signals this process's launches as the store
// does.
type watchedDB struct {
	*sqlstore.DB
	calls chan int
}

func (w watchedDB) ActiveCampaigns(ctx context.Context) ([]*sb.Campaign, error) {
	return told(ctx, w.calls, w.DB)
}

// watchedStore is the same without the signal.
type watchedStore struct {
	Store
	calls chan int
}

func (w watchedStore) ActiveCampaigns(ctx context.Context) ([]*sb.Campaign, error) {
	return told(ctx, w.calls, w.Store)
}

// told returns s's active campaigns, and tells calls how many.
func told(ctx context.Context, calls chan int, s Store) ([]*sb.Campaign, error) {
	cs, err := s.ActiveCampaigns(ctx)
	select {
	case calls <- len(cs):
	case <-ctx.Done():
	}
	return cs, err
}

// TestIdleRunnerWokenByLaunch: a runner with no active campaign waits its
// long idle poll, and a campaign launched in this process is taken at
// once; a store without the signal is looked at every Poll.
func TestIdleRunnerWokenByLaunch(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		ctx, cancel := context.WithCancel(context.Background())
		db, err := sqlstore.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		now := time.Now().UTC()
		tn := &sb.Tenant{ID: sb.NewID(), Name: "c", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.AddDate(1, 0, 0), CreatedAt: now}
		if err := db.CreateTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
		next := func(calls chan int) int {
			t.Helper()
			select {
			case n := <-calls:
				return n
			case <-time.After(time.Minute):
				t.Fatal("the runner did not look for campaigns")
				return 0
			}
		}

		// Without the signal: looked at every Poll, not IdlePoll.
		plain := watchedStore{Store: db, calls: make(chan int)}
		done := make(chan struct{})
		go func() {
			New(plain, channels{}, sb.DefaultPlans(), Options{Poll: time.Millisecond, IdlePoll: time.Hour}).Run(ctx)
			close(done)
		}()
		for range 3 {
			next(plain.calls)
		}
		cancel()
		<-done

		ctx, cancel = context.WithCancel(context.Background())
		t.Cleanup(cancel)
		w := watchedDB{DB: db, calls: make(chan int)}
		go New(w, channels{}, sb.DefaultPlans(), Options{Poll: time.Millisecond, IdlePoll: time.Hour}).Run(ctx)
		if n := next(w.calls); n != 0 {
			t.Skipf("%d campaigns of other tests are active", n) // a shared database: the runner is not idle
		}
		// The runner is idle now, for an hour: the launch wakes it.
		c := &sb.Campaign{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Name: "c", Body: "hi", Channel: sb.ChannelSMS,
			Audience: sb.AudienceTo, Recipients: []string{"+15005550201"}, Status: sb.CampaignDraft, Total: 1, CreatedAt: now}
		if err := db.CreateCampaign(ctx, c, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := db.LaunchCampaign(ctx, tn.ID, sb.Live, c.ID, now); err != nil {
			t.Fatal(err)
		}
		if n := next(w.calls); n == 0 {
			t.Fatal("woken, the runner found no campaign")
		}
	})
}
