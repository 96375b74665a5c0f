package agent

import (
	"context"
	"encoding/json"
	"fmt"
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
	cancel  []string
	reports []smsgateway.MobilePatchMessageItem
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method + " " + r.URL.Path {
	case "GET /message":
		json.NewEncoder(w).Encode(f.next)
		f.next = nil
	case "GET /events": // the app's MessageCancelled for each id of cancel
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": connected\n\n")
		for _, id := range f.cancel {
			fmt.Fprintf(w, "event: MessageCancelled\ndata: {\"messageId\":%q}\n\n", id)
		}
		w.(http.Flusher).Flush()
		f.mu.Unlock()
		<-r.Context().Done()
		f.mu.Lock()
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

// TestAgentCancelsOnEvent: the agent cancels a Pending message when its
// event stream says MessageCancelled with the app's payload, and leaves a
// delivered one alone.
func TestAgentCancelsOnEvent(t *testing.T) {
	f := &fakeServer{cancel: []string{"pending", "sent"}}
	ts := httptest.NewServer(f)
	defer ts.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	a := New(Options{URL: ts.URL}, "dev", "token")
	f.hand("sent", "Pending")
	if err := a.Pull(ctx); err != nil {
		t.Fatal(err)
	}
	a.SetPaused(ctx, true)
	f.hand("pending", "Pending")
	if err := a.Pull(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { stop(); <-done }()
	for deadline := time.Now().Add(30 * time.Second); len(f.reported("pending")) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never reported the message canceled")
		}
	}
	if got := f.reported("pending"); len(got) != 1 || got[0] != stateCancelled || a.State("pending") != stateCancelled {
		t.Errorf("reported %v, on the phone %q", got, a.State("pending"))
	}
	if a.State("sent") != smsgateway.ProcessingStateDelivered {
		t.Errorf("a delivered message told MessageCancelled: %q", a.State("sent"))
	}
}
