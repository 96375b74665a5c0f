package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramIndexRoundTrip(t *testing.T) {
	// Every value must land in a bucket whose midpoint is within the
	// advertised precision, and indexes must be monotonic.
	prev := -1
	for v := uint64(0); v <= histMaxValue; v = v + 1 + v/97 {
		i := histIndex(v)
		if i < prev {
			t.Fatalf("histIndex(%d) = %d, below previous index %d", v, i, prev)
		}
		prev = i
		if i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d, out of range %d", v, i, histBuckets)
		}
		mid := histValue(i)
		if diff := math.Abs(float64(mid) - float64(v)); diff > float64(v)/128 {
			t.Fatalf("value %d: bucket midpoint %d is off by %.0f", v, mid, diff)
		}
	}
}

func TestHistogramQuantileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() time.Duration{
		"uniform 1µs-100ms": func() time.Duration {
			return time.Microsecond + time.Duration(rng.Int64N(int64(100*time.Millisecond)))
		},
		"log-uniform 1µs-60s": func() time.Duration {
			return time.Duration(math.Exp(math.Log(1e3) + rng.Float64()*(math.Log(6e10)-math.Log(1e3))))
		},
		"bimodal 200µs/20ms": func() time.Duration {
			base := 200 * time.Microsecond
			if rng.IntN(10) == 0 {
				base = 20 * time.Millisecond
			}
			return base + time.Duration(rng.NormFloat64()*float64(base)/20)
		},
	}
	for name, gen := range dists {
		t.Run(name, func(t *testing.T) {
			const n = 200_000
			samples := make([]time.Duration, n)
			// Spread the samples over several histograms to exercise merge.
			parts := []*histogram{newHistogram(), newHistogram(), newHistogram()}
			for i := range samples {
				samples[i] = gen()
				parts[i%len(parts)].record(samples[i])
			}
			h := newHistogram()
			for _, p := range parts {
				h.merge(p)
			}
			slices.Sort(samples)
			if h.total != n {
				t.Fatalf("total = %d, want %d", h.total, n)
			}
			for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1} {
				rank := max(int(math.Ceil(q*n)), 1)
				want := samples[rank-1]
				got := h.quantile(q)
				if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.02 {
					t.Errorf("q%.3f = %v, want %v (relative error %.4f)", q, got, want, rel)
				}
			}
			if got := h.quantile(1); got != samples[n-1] {
				t.Errorf("max = %v, want exact %v", got, samples[n-1])
			}
		})
	}
}

func TestHistogramEdges(t *testing.T) {
	h := newHistogram()
	if got := h.quantile(0.5); got != 0 {
		t.Fatalf("empty histogram quantile = %v, want 0", got)
	}
	h.record(-time.Second)
	h.record(2 * time.Minute)
	if got := h.quantile(0.5); got != 0 {
		t.Errorf("p50 = %v, want 0 (negative values count as zero)", got)
	}
	if got := h.quantile(1); got != 2*time.Minute {
		t.Errorf("max = %v, want exact 2m beyond the resolved range", got)
	}
	if got := h.quantile(0.99); got < 59*time.Second {
		t.Errorf("p99 = %v, want the top bucket (about 60s)", got)
	}
}
