package delivery

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
)

// switchboard_messages_total counts outcomes by the engine that carried
// each message: the record's engine, or before it is stored the engine of
// its environment and phone kind; a value outside the six engines is
// "other", so the label's values stay bounded.
func TestObserverEngineLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := NewObserver(reg, nil)
	o.Observe(&sb.Message{Engine: sb.EngineRBM}, sb.EventDelivered)
	o.Observe(&sb.Message{Engine: sb.EngineRBM}, sb.EventDelivered)
	o.Observe(&sb.Message{Engine: sb.EngineIMessage}, sb.EventFailed)
	o.Observe(&sb.Message{Env: sb.Live, PhoneKind: sb.PhoneAndroid}, sb.EventReceived)
	o.Observe(&sb.Message{Env: sb.Test, PhoneKind: sb.PhoneRBM}, sb.EventReceived)
	o.Observe(&sb.Message{Engine: sb.EngineSMPP, ErrorCode: sb.ErrorCodeCampaignCanceled}, sb.EventFailed)
	o.Observe(&sb.Message{Engine: "a-link-name"}, sb.EventDelivered)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[[2]string]float64{}
	for _, f := range fams {
		if f.GetName() != "switchboard_messages_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var key [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "outcome":
					key[0] = l.GetValue()
				case "engine":
					key[1] = l.GetValue()
				}
			}
			series[key] = m.GetCounter().GetValue()
		}
	}
	for _, c := range []struct {
		outcome, engine string
		want            float64
	}{
		{"delivered", "rbm", 2},
		{"failed", "imessage", 1},
		{"received", "android", 1},
		{"received", "simulator", 1},
		{"canceled", "smpp", 1},
		{"delivered", "other", 1},
		{"delivered", "simulator", 0},
	} {
		if got := series[[2]string{c.outcome, c.engine}]; got != c.want {
			t.Errorf("switchboard_messages_total{outcome=%q,engine=%q} = %v, want %v", c.outcome, c.engine, got, c.want)
		}
	}
	if n := len(series); n != 9 {
		t.Errorf("%d series, want 9 (the four outcomes of the simulator made at start, and the five others seen)", n)
	}
}
