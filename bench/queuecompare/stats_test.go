package queuecompare

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/testenv"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
}

func TestMedian(t *testing.T) {
	if m, lo, hi := median([]float64{3, 1, 2}); m != 2 || lo != 1 || hi != 3 {
		t.Errorf("median = %v %v %v", m, lo, hi)
	}
	if m, _, _ := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4 = %v", m)
	}
}

func TestRebind(t *testing.T) {
	if got := rebind(postgres, "a = ? AND b IN (?, ?)"); got != "a = $1 AND b IN ($2, $3)" {
		t.Errorf("rebind = %q", got)
	}
	if got := rebind(sqlite, "a = ?"); got != "a = ?" {
		t.Errorf("rebind sqlite = %q", got)
	}
}

// TestSmokeSQLite runs each queue for a moment on SQLite, so that the
// benchmark's wiring (River's SQLite driver included) is checked by a plain
// go test; it takes a few seconds at most and is skipped with -short.
func TestSmokeSQLite(t *testing.T) {
	testenv.Timing(t)
	if testing.Short() {
		t.Skip("-short")
	}
	for _, name := range []string{"in-table", "river"} {
		f, err := queueFactory(name, sqlite)
		if err != nil {
			t.Fatal(err)
		}
		res, err := runSlice(context.Background(), &sliceConfig{
			dialect: sqlite, dir: t.TempDir(), producers: 8,
			warmup: 50 * time.Millisecond, window: 200 * time.Millisecond, drain: 5 * time.Second,
			newQueue: f, tag: "smoke",
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %s", name, res.line())
		if res.accepted == 0 || !res.drained || res.errs > 0 || len(res.notes) > 0 {
			t.Errorf("%s: %s", name, res.line())
		}
	}
}
