// Package testenv holds what tests need to know about where they run.
//
// The default test suite (go test ./..., as .ci/run runs it) must pass every
// time on a loaded 2-core machine: its tests wait on conditions, never on the
// machine being fast. A test whose result depends on the machine's speed
// (a benchmark scenario that must complete work within a fixed window, say)
// calls Timing, and runs only when SWITCHBOARD_TEST_TIMING is set.
package testenv

import (
	"os"
	"testing"
)

// TimingEnv names the variable that lets the tests that depend on the
// machine's speed run. .ci/run does not set it.
const TimingEnv = "SWITCHBOARD_TEST_TIMING"

// Timing skips t, saying why, unless SWITCHBOARD_TEST_TIMING is set (to
// anything but "" or "0"): t's result depends on how fast the machine is.
func Timing(t testing.TB) {
	t.Helper()
	if v := os.Getenv(TimingEnv); v == "" || v == "0" {
		t.Skipf("its result depends on the machine's speed: set %s=1 to run it (on an idle machine)", TimingEnv)
	}
}
