package switchboard

import (
	"testing"
	"time"
)

// The retry schedules are exactly the documented ones: standard 2, 4, 8 s
// (the API's default), extended 1 min to 24 h; the try after the last delay
// is final, and an unknown policy (none is ever stored) is standard.
func TestRetryDelay(t *testing.T) {
	for _, c := range []struct {
		policy string
		want   []time.Duration
	}{
		{RetryStandard, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}},
		{RetryExtended, []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 8 * time.Hour, 24 * time.Hour}},
		{"", []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}},
	} {
		for try := 1; try <= len(c.want); try++ {
			if d, ok := RetryDelay(c.policy, try); !ok || d != c.want[try-1] {
				t.Errorf("%q after try %d: %v %v, want %v", c.policy, try, d, ok, c.want[try-1])
			}
		}
		for _, try := range []int{0, len(c.want) + 1, len(c.want) + 2} {
			if d, ok := RetryDelay(c.policy, try); ok {
				t.Errorf("%q after try %d: retry in %v, want none (the delivery is failed)", c.policy, try, d)
			}
		}
	}
	for _, p := range RetryPolicies {
		if err := CheckRetryPolicy(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for _, p := range []string{"", "Extended", "none", "standard "} {
		if err := CheckRetryPolicy(p); ErrorCode(err) != CodeValidation {
			t.Errorf("%q: %v, want VALIDATION_ERROR", p, err)
		} else if f := err.(*Error).Details["field"]; f != "retry_policy" {
			t.Errorf("%q: field %v", p, f)
		}
	}
}
