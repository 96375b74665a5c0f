package rbm_test

import (
	"context"
	"os"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/rbm"
)

// liveStore records what the live agent answered, in memory: the smoke
// test needs no database.
type liveStore struct{ evs chan sb.CarrierEvent }

func (s liveStore) RecordCarrier(_ context.Context, _ string, evs []sb.CarrierEvent) (sb.CarrierResult, error) {
	for _, e := range evs {
		s.evs <- e
	}
	return sb.CarrierResult{}, nil
}
func (liveStore) RecordRead(context.Context, string, string, time.Time) error { return nil }
func (liveStore) ChatFallback(context.Context, string, string, time.Time) (bool, error) {
	return false, nil
}

// TestLiveAgent sends one message through a real RBM agent (docs/chat.md):
// SWITCHBOARD_RBM_KEY_FILE (the service account's JSON key),
// SWITCHBOARD_RBM_AGENT_ID and SWITCHBOARD_RBM_TO (a tester's number).
// Skipped without them.
func TestLiveAgent(t *testing.T) {
	keyFile, agent, to := os.Getenv("SWITCHBOARD_RBM_KEY_FILE"), os.Getenv("SWITCHBOARD_RBM_AGENT_ID"), os.Getenv("SWITCHBOARD_RBM_TO")
	if keyFile == "" || agent == "" || to == "" {
		t.Skip("set SWITCHBOARD_RBM_KEY_FILE, SWITCHBOARD_RBM_AGENT_ID and SWITCHBOARD_RBM_TO to try a real agent")
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	store := liveStore{evs: make(chan sb.CarrierEvent, 4)}
	link, err := rbm.New(carrier.Config{Name: "live", Type: carrier.TypeRBM, BaseURL: carrier.DefaultRBMBaseURL, AgentID: agent,
		ServiceAccount: carrier.Secret(key)}, store, rbm.Options{DetectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go link.Run(ctx)
	ch, err := link.Detect(ctx, to)
	t.Logf("capability check of %s: %q %v", to, ch, err)
	if ch != sb.ChannelChat {
		t.Fatalf("the agent cannot reach %s by RCS (is it a tester of the agent?)", to)
	}
	m := &sb.Message{ID: sb.NewID(), Env: sb.Live, To: to, Body: "Switchboard live smoke test", Channel: sb.ChannelChat}
	if err := link.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-store.evs:
		if e.Kind != sb.CarrierAccepted {
			t.Fatalf("the agent refused the message: %s", e.Reason)
		}
		t.Logf("sent: message id %s", e.ExternalID)
	case <-ctx.Done():
		t.Fatal("no answer from the agent within a minute")
	}
}
