package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/android-sms-gateway/client-go/smsgateway"
)

// fakeServer hands out the messages of next (each with its state) at each
// GET /message and records the reports of PATCH /message.
type fakeServer struct {
	mu      sync.Mutex
	next    []mobileMessage
	reports []smsgateway.MobilePatchMessageItem
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method + " " + r.URL.Path {
	case "GET /message":
		json.NewEncoder(w).Encode(f.next)
		f.next = nil
	case "PATCH /message":
		var items smsgateway.MobilePatchMessageRequest
		json.NewDecoder(r.Body).Decode(&items)
		f.reports = append(f.reports, items...)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeServer) hand(id string, state smsgateway.ProcessingState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	valid := time.Now().Add(time.Hour)
	f.next = append(f.next, mobileMessage{MobileMessage: smsgateway.MobileMessage{Message: smsgateway.Message{ID: id,
		TextMessage: &smsgateway.TextMessage{Text: "x"}, PhoneNumbers: []string{"+15005550000"}, ValidUntil: &valid}}, State: state})
}

// reported returns the states reported of id, in order.
func (f *fakeServer) reported(id string) []smsgateway.ProcessingState {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []smsgateway.ProcessingState
	for _, r := range f.reports {
		if r.ID == id {
			out = append(out, r.State)
		}
	}
	return out
}

// TestAgentCancelsOnlyPending: as the app, the agent cancels a message
// only while it is Pending on the phone (reporting Cancelled, and never
// sending it), leaves one the radio took as it is, and reports Cancelled
// at once for a message handed in state Cancelling that it never got.
func TestAgentCancelsOnlyPending(t *testing.T) {
	f := &fakeServer{}
	ts := httptest.NewServer(f)
	defer ts.Close()
	ctx := context.Background()
	a := New(Options{URL: ts.URL}, "dev", "token")

	f.hand("sent", "Pending")
	if err := a.Pull(ctx); err != nil {
		t.Fatal(err)
	}
	if a.cancel(ctx, "sent") || a.State("sent") != smsgateway.ProcessingStateDelivered {
		t.Fatalf("a delivered message was canceled: %q", a.State("sent"))
	}

	a.SetPaused(ctx, true)
	f.hand("pending", "Pending")
	if err := a.Pull(ctx); err != nil {
		t.Fatal(err)
	}
	if a.State("pending") != "" {
		t.Fatalf("paused, the message went to the radio: %q", a.State("pending"))
	}
	if !a.cancel(ctx, "pending") || a.cancel(ctx, "pending") {
		t.Fatal("a Pending message is canceled once")
	}
	if got := f.reported("pending"); len(got) != 1 || got[0] != stateCancelled {
		t.Fatalf("reported %v, want [Cancelled]", got)
	}
	a.SetPaused(ctx, false)
	if a.SentCount("pending") != 0 || a.State("pending") != stateCancelled {
		t.Fatalf("canceled, then unpaused: sent %d, %q", a.SentCount("pending"), a.State("pending"))
	}

	f.hand("lost", stateCancelling)
	if err := a.Pull(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.reported("lost"); len(got) != 1 || got[0] != stateCancelled || a.SentCount("lost") != 0 {
		t.Fatalf("a message it never got, handed Cancelling: reported %v, sent %d", got, a.SentCount("lost"))
	}
	f.hand("sent", stateCancelling) // the radio took it: nothing to cancel
	if err := a.Pull(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.reported("sent"); len(got) != 3 || got[2] != smsgateway.ProcessingStateDelivered {
		t.Fatalf("a delivered message handed Cancelling: reported %v", got)
	}
}
