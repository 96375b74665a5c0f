package carrier

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The up gauges of links and chat engines are 1 while up, 0 while down.
func TestUpGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	links, chats := NewMetrics(reg), NewChatMetrics(reg)
	value := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.GetMetric()) == 1 {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no single series of %s", name)
		return 0
	}
	for _, up := range []bool{true, false, true} {
		want := 0.0
		if up {
			want = 1
		}
		links.LinkUp("c1", TypeSMPP, up)
		chats.Up(TypeRBM, "rcs", up)
		if got := value("switchboard_carrier_link_up"); got != want {
			t.Errorf("link up %v: %v", up, got)
		}
		if got := value("switchboard_chat_engine_up"); got != want {
			t.Errorf("chat engine up %v: %v", up, got)
		}
	}
}
