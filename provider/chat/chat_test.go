package chat

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/chat/chattest"
)

// A positive answer is kept for ChatFor, a negative one for SMSFor, each
// up to (not including) its end; Forget drops one.
func TestCache(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewCache(Options{Now: func() time.Time { return now }}.WithDefaults(time.Second))
	c.Keep("+1", sb.ChannelChat)
	c.Keep("+2", sb.ChannelSMS)
	start := now
	for _, step := range []struct {
		after    time.Duration
		chat, sm bool
	}{{0, true, true}, {time.Hour - time.Nanosecond, true, true}, {time.Hour, true, false}, {24*time.Hour - time.Nanosecond, true, false}, {24 * time.Hour, false, false}} {
		now = start.Add(step.after)
		ch, ok := c.Get("+1")
		if ok != step.chat || ok && ch != sb.ChannelChat {
			t.Errorf("after %v: chat answer %q %v, want kept %v", step.after, ch, ok, step.chat)
		}
		ch, ok = c.Get("+2")
		if ok != step.sm || ok && ch != sb.ChannelSMS {
			t.Errorf("after %v: sms answer %q %v, want kept %v", step.after, ch, ok, step.sm)
		}
	}
	now = start
	c.Forget("+1")
	if _, ok := c.Get("+1"); ok {
		t.Error("a forgotten number is still cached")
	}
}

// The back-off doubles from BackoffMin up to BackoffMax, drawn from the
// upper half of each step.
func TestBackoff(t *testing.T) {
	o := Options{BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second}.WithDefaults(time.Second)
	for try, step := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000} {
		step *= time.Millisecond
		for range 50 {
			if w := o.Backoff(try); w < step/2 || w > step {
				t.Fatalf("try %d: waits %v, want %v to %v", try, w, step/2, step)
			}
		}
	}
	if d := (Options{}).WithDefaults(7 * time.Second); d.Client.Timeout != 7*time.Second || d.BackoffMin != time.Second || d.BackoffMax != time.Minute ||
		d.DetectTimeout != time.Second || d.ChatFor != 24*time.Hour || d.SMSFor != time.Hour || d.Log == nil || d.Now == nil {
		t.Errorf("defaults: %+v", d)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Two failed requests in a row leave an engine up, the third takes it
// down; one answered in between starts the count again, and one answered
// brings it back.
func TestHealth(t *testing.T) {
	h := NewHealth(&Link{Name: "l", Engine: "rbm", Log: quiet()}, "RBM agent")
	h.Failed("a")
	h.Failed("b")
	h.OK()
	h.Failed("c")
	h.Failed("d")
	if !h.Up() {
		t.Fatal("down after two failures in a row")
	}
	h.Failed("e")
	if h.Up() {
		t.Fatal("up after three failures in a row")
	}
	h.OK()
	if !h.Up() {
		t.Fatal("still down after a request was answered")
	}
	h.Set(false, "no token")
	if h.Up() {
		t.Fatal("Set(false) left it up")
	}
	// Back up by Set: its failures before count no more.
	h.Failed("f")
	h.Failed("g")
	h.Set(true, "")
	h.Failed("h")
	if !h.Up() {
		t.Fatal("one failure after coming back took it down")
	}
}

// A text a tenant takes is counted inbound; one no tenant takes, dropped.
func TestInbound(t *testing.T) {
	for _, dropped := range []int{0, 1} {
		s := &store{dropped: dropped}
		reg := prometheus.NewRegistry()
		l := &Link{Name: "l", Engine: "rbm", Store: s, Log: quiet(), Opt: Options{Metrics: carrier.NewChatMetrics(reg)}}
		if err := l.Inbound(context.Background(), &sb.Message{From: "+1", Body: "hi"}, "x"); err != nil {
			t.Fatal(err)
		}
		want := map[int]string{0: "inbound", 1: "dropped"}[dropped]
		other := map[int]string{0: "dropped", 1: "inbound"}[dropped]
		if n, m := chattest.Events(t, reg, "rbm", "l", want), chattest.Events(t, reg, "rbm", "l", other); n != 1 || m != 0 ||
			len(s.recorded) != 1 || s.recorded[0].Kind != sb.CarrierInbound {
			t.Errorf("dropped %d: counted %s %v, %s %v; recorded %+v", dropped, want, n, other, m, s.recorded)
		}
	}
}

// A message in flight is not taken twice; at most the window's sends run at
// once; Wait waits for them.
func TestFlights(t *testing.T) {
	f := NewFlights(2)
	release := make(chan struct{})
	var mu sync.Mutex
	running, most, calls := 0, 0, map[string]int{}
	send := func(ctx context.Context, m *sb.Message) {
		mu.Lock()
		running++
		most = max(most, running)
		calls[m.ID]++
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		mu.Unlock()
	}
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		f.Go(&sb.Message{ID: id}, send)
		f.Go(&sb.Message{ID: id}, send) // held: not taken again
	}
	for _, id := range ids {
		if !f.Holds(id) {
			t.Errorf("%s is not held", id)
		}
	}
	// Two start; the others wait for a place however long they are given
	// (a broken window lets all four in, soon).
	for n := 0; ; n++ {
		mu.Lock()
		r := running
		mu.Unlock()
		if r == 2 && n > 10000 || r > 2 {
			break
		}
		runtime.Gosched()
	}
	close(release)
	f.Wait()
	if most > 2 {
		t.Errorf("%d sends ran at once, want at most 2", most)
	}
	for _, id := range ids {
		if calls[id] != 1 || f.Holds(id) {
			t.Errorf("%s: sent %d times, held %v after Wait", id, calls[id], f.Holds(id))
		}
	}
	// Once done, a message may be taken again (the queue hands it over
	// again when its claim runs out).
	f.Go(&sb.Message{ID: "a"}, send)
	f.Wait()
	if calls["a"] != 2 {
		t.Errorf("a sent %d times, want 2", calls["a"])
	}
}

type store struct {
	dropped  int
	moved    bool
	recorded []sb.CarrierEvent
	fell     []string
}

func (s *store) RecordCarrier(_ context.Context, _ string, evs []sb.CarrierEvent) (sb.CarrierResult, error) {
	s.recorded = append(s.recorded, evs...)
	return sb.CarrierResult{Dropped: s.dropped}, nil
}
func (s *store) RecordRead(context.Context, string, string, time.Time) error {
	return errors.New("unused")
}
func (s *store) ChatFallback(_ context.Context, id, _ string, _ time.Time) (bool, error) {
	s.fell = append(s.fell, id)
	return s.moved, nil
}

// A refusal falls back only when asked to and the store moved the
// message; otherwise the message is recorded refused.
func TestRefused(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		fallback, moved bool
		fell, refused   int
	}{{true, true, 1, 0}, {true, false, 1, 1}, {false, true, 0, 1}} {
		s := &store{moved: c.moved}
		l := &Link{Name: "l", Engine: "rbm", Store: s, Log: quiet()}
		l.Refused(context.Background(), "m1", "gone", c.fallback, now)
		if len(s.fell) != c.fell || len(s.recorded) != c.refused || c.refused == 1 && (s.recorded[0].Kind != sb.CarrierRefused || s.recorded[0].Reason != "gone") {
			t.Errorf("fallback %v moved %v: fell back %v, recorded %+v", c.fallback, c.moved, s.fell, s.recorded)
		}
	}
}

// Take hands a message to the send while the engine answers, puts it off
// while it does not, and takes a message in flight only once.
func TestTake(t *testing.T) {
	l := NewLink("mac", "imessage", "BlueBubbles server", 1, &store{}, Options{Log: quiet()}.WithDefaults(time.Second))
	release := make(chan struct{})
	sent := make(chan string, 4)
	send := func(ctx context.Context, m *sb.Message) { sent <- m.ID; <-release }
	if err := l.Take(&sb.Message{ID: "a"}, send); err != nil {
		t.Fatal(err)
	}
	if <-sent; !l.Flights.Holds("a") {
		t.Fatal("a is not in flight")
	}
	l.Health.Set(false, "down")
	if err := l.Take(&sb.Message{ID: "a"}, send); err != nil {
		t.Errorf("a message in flight, taken again while down: %v", err)
	}
	var d *sb.Deferred
	if err := l.Take(&sb.Message{ID: "b"}, send); !errors.As(err, &d) || d.Reason != "the BlueBubbles server mac is unreachable" {
		t.Errorf("while down: %v, want a deferral", err)
	}
	close(release)
	l.Flights.Wait()
	if len(sent) != 0 {
		t.Errorf("%d more sends, want none", len(sent))
	}
}

// An event is posted and at most the limit long.
func TestReadEvent(t *testing.T) {
	for _, c := range []struct {
		method, body string
		status       int
		ok           bool
	}{{"GET", "", 405, false}, {"POST", "12345", 400, false}, {"POST", "1234", 200, true}} {
		w := httptest.NewRecorder()
		body, ok := ReadEvent(w, httptest.NewRequest(c.method, "/", strings.NewReader(c.body)), 4)
		if ok != c.ok || w.Code != c.status || ok && string(body) != c.body {
			t.Errorf("%s %q: %d %v %q", c.method, c.body, w.Code, ok, body)
		}
	}
}
