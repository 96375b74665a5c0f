package smpp

import (
	"context"
	"testing"
	"time"

	"github.com/linxGnu/gosmpp/data"
	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/smpp/smsc"
)

// gauge reads a metric of reg with the label link="c1" (0 when absent).
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func noWait(ctx context.Context, d time.Duration) bool { return ctx.Err() == nil }

// TestStalledSMSCNoRewrite: an SMSC that stops answering: the response
// timeout takes the bind down, and the part it had is in doubt, held for
// the default 10 minutes from its write (a receipt could still come), not
// written again on the next bind; the metrics count it.
func TestStalledSMSCNoRewrite(t *testing.T) {
	cfgs, err := carrier.Parse([]byte(`{"links": [{"name": "c1", "type": "smpp", "addr": "x:1", "system_id": "sys"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	sm := &smsc.Server{}
	sm.OnSubmit = func(s *smsc.Submit) smsc.Action {
		if s.Bind == 1 {
			return smsc.Action{NoAnswer: true, NoReceipt: true} // stalled
		}
		return smsc.Action{}
	}
	f := start(t, sm, cfgs[0], Options{RespTimeout: 300 * time.Millisecond, Sleep: noWait, Metrics: carrier.NewMetrics(reg)}, true)
	waitFor(t, 20*time.Second, "the bind", f.link.Up)
	m := f.send(t, "+15005550001", "stalled")
	waitFor(t, 20*time.Second, "the second bind", func() bool { return sm.Binds() >= 2 && f.link.Up() })
	// Another message goes out on the new bind; the one in doubt stays
	// held.
	m2 := f.send(t, "+15005550002", "after")
	f.waitStatus(t, m2.ID, sb.StatusDelivered)
	time.Sleep(500 * time.Millisecond) // housekeeping runs every 200 ms
	if n := textCount(sm, "stalled"); n != 1 {
		t.Fatalf("the part in doubt was written %d times", n)
	}
	if st, _ := f.status(t, m.ID); st != sb.StatusQueued {
		t.Fatalf("message in doubt: %s", st)
	}
	if g := gauge(t, reg, "switchboard_carrier_parts_in_doubt", "link", "c1"); g != 1 {
		t.Errorf("switchboard_carrier_parts_in_doubt %v, want 1", g)
	}
	if c := gauge(t, reg, "switchboard_carrier_submits_total", "link", "c1", "result", "in_doubt"); c != 1 {
		t.Errorf("submits in_doubt %v, want 1", c)
	}
	if !contains(f.logs.String(), `"resend_after":"10m0s"`) {
		t.Errorf("the hold is not 10 minutes: %s", f.logs.String())
	}
}

// TestInDoubtResendAfter: in_doubt_resend_after shortens the hold: the
// part with no receipt is written again once it is over.
func TestInDoubtResendAfter(t *testing.T) {
	reg := prometheus.NewRegistry()
	sm := &smsc.Server{}
	sm.OnSubmit = func(s *smsc.Submit) smsc.Action {
		if s.Bind == 1 {
			return smsc.Action{NoAnswer: true, NoReceipt: true}
		}
		return smsc.Action{}
	}
	f := start(t, sm, carrier.Config{InDoubtResendAfter: 1}, Options{RespTimeout: 300 * time.Millisecond, Sleep: noWait, Metrics: carrier.NewMetrics(reg)}, true)
	waitFor(t, 20*time.Second, "the bind", f.link.Up)
	m := f.send(t, "+15005550001", "stalled")
	f.waitStatus(t, m.ID, sb.StatusDelivered)
	if n := textCount(sm, "stalled"); n != 2 {
		t.Fatalf("written %d times, want twice", n)
	}
	if c := gauge(t, reg, "switchboard_carrier_submits_total", "link", "c1", "result", "resent"); c != 1 {
		t.Errorf("submits resent %v, want 1", c)
	}
}

func textCount(sm *smsc.Server, text string) int {
	n := 0
	for _, s := range sm.Submits() {
		if s.Text == text {
			n++
		}
	}
	return n
}

// TestTransientSubmitErrors: ESME_RSYSERR and the like pause the link and
// the part goes again, each pause double the one before, as for
// throttling: a few minutes of SMSC trouble fail nothing.
func TestTransientSubmitErrors(t *testing.T) {
	const pause = 30 * time.Millisecond
	sm := &smsc.Server{}
	n := 0
	sm.OnSubmit = func(s *smsc.Submit) smsc.Action {
		n++ // one bind: the SMSC's reader calls this in order
		if n <= 5 {
			return smsc.Action{Status: []data.CommandStatusType{data.ESME_RSYSERR, data.ESME_RSUBMITFAIL, data.ESME_RX_T_APPN}[n%3]}
		}
		return smsc.Action{}
	}
	f := start(t, sm, carrier.Config{}, Options{ThrottleMin: pause}, true)
	waitFor(t, 20*time.Second, "the bind", f.link.Up)
	m := f.send(t, "+15005550001", "flaky")
	f.waitStatus(t, m.ID, sb.StatusDelivered)
	subs := sm.Submits()
	if len(subs) != 6 {
		t.Fatalf("%d submit_sm, want 6", len(subs))
	}
	for i := 1; i < len(subs); i++ {
		if gap, want := subs[i].At.Sub(subs[i-1].At), pause<<(i-1); gap < want {
			t.Errorf("submit %d came %v after the one before, want at least %v", i+1, gap, want)
		}
	}
	if !contains(f.logs.String(), "SMSC refused a submit_sm for a passing reason", `"status":"ESME_RSYSERR"`) {
		t.Errorf("no warning: %s", f.logs.String())
	}
}
