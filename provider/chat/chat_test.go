package chat

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
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
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, p := range m.GetLabel() {
					if p.GetName() == "kind" {
						got[mf.GetName()+" "+p.GetValue()] = m.GetCounter().GetValue()
					}
				}
			}
		}
		want := map[int]string{0: "inbound", 1: "dropped"}[dropped]
		if len(got) != 1 || got["switchboard_chat_events_total "+want] != 1 || len(s.recorded) != 1 || s.recorded[0].Kind != sb.CarrierInbound {
			t.Errorf("dropped %d: counted %v, recorded %+v", dropped, got, s.recorded)
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
