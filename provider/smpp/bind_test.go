package smpp

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linxGnu/gosmpp/data"

	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/smpp/smsc"
)

// fakeClock is the link's re-bind clock in a test: each back-off wait
// moves it on at once, and the test moves it while a bind is up.
type fakeClock struct {
	now   atomic.Int64 // nanoseconds past the start
	mu    sync.Mutex
	waits []time.Duration
	limit int
	woke  chan struct{}
}

func newFakeClock(limit int) *fakeClock {
	return &fakeClock{limit: limit, woke: make(chan struct{}, 1000)}
}

func (c *fakeClock) Now() time.Time { return time.Unix(1e9, c.now.Load()) }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) bool {
	c.mu.Lock()
	n := len(c.waits)
	if n < c.limit {
		c.waits = append(c.waits, d)
		c.now.Add(int64(d))
	}
	c.mu.Unlock()
	if n >= c.limit {
		<-ctx.Done()
		return false
	}
	c.woke <- struct{}{}
	return ctx.Err() == nil
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// checkBackoff checks that waits grow from 1 s doubling to 60 s, each
// drawn between half of its step and all of it.
func checkBackoff(t *testing.T, waits []time.Duration, from int) {
	t.Helper()
	for i, w := range waits {
		step := min(time.Second<<(from+i), 60*time.Second)
		if w < step/2 || w > step {
			t.Errorf("wait %d before a bind: %v, want between %v and %v (all: %v)", from+i+1, w, step/2, step, waits)
		}
	}
}

// TestRebindBackoff: an SMSC that drops each bind right after accepting it,
// or unbinds at once, sees the binds spaced 1 s, 2 s, 4 s ... up to 60 s,
// never at once: at most a dozen binds in the first minute, not thousands.
func TestRebindBackoff(t *testing.T) {
	for name, act := range map[string]smsc.BindAction{
		"dropped after bind_resp":  {Drop: true},
		"unbound after bind_resp":  {Unbind: true},
		"refused with header only": {Refuse: data.ESME_RBINDFAIL, HeaderOnly: true},
	} {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock(10)
			sm := &smsc.Server{OnBind: func(int) smsc.BindAction { return act }}
			f := start(t, sm, carrier.Config{}, Options{Now: clock.Now, Sleep: clock.Sleep}, true)
			waitFor(t, 20*time.Second, "ten back-off waits", func() bool { return len(clock.Waits()) == 10 })
			waits := clock.Waits()
			checkBackoff(t, waits, 0)
			var total time.Duration
			inFirstMinute := 1
			for _, w := range waits {
				total += w
				if total < time.Minute {
					inFirstMinute++
				}
			}
			if inFirstMinute > 12 {
				t.Errorf("%d binds in the first minute", inFirstMinute)
			}
			if act.Refuse == 0 && sm.Binds() < 2 {
				t.Errorf("the SMSC saw %d binds", sm.Binds())
			}
			_ = f
		})
	}
}

// TestRebindBackoffResets: only a bind that stayed up StableAfter (60 s)
// starts the back-off again from 1 s; one up for 30 s does not.
func TestRebindBackoffResets(t *testing.T) {
	clock := newFakeClock(8)
	sm := &smsc.Server{OnBind: func(n int) smsc.BindAction {
		if n <= 5 || n > 7 {
			return smsc.BindAction{Drop: true}
		}
		return smsc.BindAction{} // binds 6 and 7 stay up until the test drops them
	}}
	f := start(t, sm, carrier.Config{}, Options{Now: clock.Now, Sleep: clock.Sleep}, true)
	waitFor(t, 20*time.Second, "the 6th bind up", func() bool { return len(clock.Waits()) == 5 && f.link.Up() })
	clock.now.Add(int64(30 * time.Second))
	sm.DropAll()
	waitFor(t, 20*time.Second, "the 7th bind up", func() bool { return len(clock.Waits()) == 6 && f.link.Up() })
	clock.now.Add(int64(61 * time.Second))
	sm.DropAll()
	waitFor(t, 20*time.Second, "the wait after the 7th bind", func() bool { return len(clock.Waits()) >= 7 })
	waits := clock.Waits()
	checkBackoff(t, waits[:6], 0) // up 30 s: no reset
	checkBackoff(t, waits[6:7], 0)
}

// TestBindRefusedLogged: a bind the SMSC refuses with a header-only
// bind_transceiver_resp (valid SMPP 3.4) is logged with its status, not as
// a broken read; a vendor's status shows in hex.
func TestBindRefusedLogged(t *testing.T) {
	for status, want := range map[data.CommandStatusType]string{
		data.ESME_RINVPASWD: "ESME_RINVPASWD (0x0000000E",
		0x401:               "0x00000401",
	} {
		clock := newFakeClock(1)
		sm := &smsc.Server{OnBind: func(int) smsc.BindAction { return smsc.BindAction{Refuse: status, HeaderOnly: true} }}
		f := start(t, sm, carrier.Config{}, Options{Now: clock.Now, Sleep: clock.Sleep}, true)
		waitFor(t, 20*time.Second, "the refusal logged", func() bool { return contains(f.logs.String(), "SMPP bind failed") })
		logs := f.logs.String()
		if !contains(logs, want, `"level":"WARN"`) || contains(logs, "EOF") {
			t.Errorf("status %v: log %s", status, logs)
		}
	}
}
