package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear in the style of HdrHistogram: values below
// histSubCount nanoseconds get one bucket each, and every power-of-two range
// above that is split into histSubCount equal buckets. A bucket's width is
// therefore at most 1/histSubCount of its lower bound, and reporting the
// bucket midpoint bounds the relative error by 1/(2*histSubCount) ≈ 0.4%.
const (
	histSubBits  = 7
	histSubCount = 1 << histSubBits
	// histMaxValue is the largest value resolved; larger values are
	// recorded in the top bucket (Max stays exact).
	histMaxValue = uint64(60 * time.Second)
)

var histBuckets = histIndex(histMaxValue) + 1

// histogram records durations in nanoseconds. It is not safe for concurrent
// use; each worker owns one and they are merged after the run.
type histogram struct {
	counts   []uint64
	total    uint64
	min, max uint64
}

func newHistogram() *histogram {
	return &histogram{counts: make([]uint64, histBuckets), min: math.MaxUint64}
}

// histIndex returns the bucket index of v, which must be <= histMaxValue.
func histIndex(v uint64) int {
	if v < histSubCount {
		return int(v)
	}
	e := bits.Len64(v) - 1 // v is in [2^e, 2^(e+1)), e >= histSubBits
	shift := e - histSubBits
	return (shift+1)*histSubCount + int(v>>shift) - histSubCount
}

// histValue returns the midpoint of bucket i.
func histValue(i int) uint64 {
	if i < histSubCount {
		return uint64(i)
	}
	shift := i/histSubCount - 1
	lower := uint64(i%histSubCount+histSubCount) << shift
	width := uint64(1) << shift
	return lower + (width-1)/2
}

// record adds one observation. Negative durations are recorded as zero.
func (h *histogram) record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
	if v > histMaxValue {
		v = histMaxValue
	}
	h.counts[histIndex(v)]++
}

// merge adds all observations of o to h.
func (h *histogram) merge(o *histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// quantile returns the value at quantile q in [0, 1]: the smallest recorded
// value (to bucket precision) such that at least q of all observations are
// less than or equal to it. It returns 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := histValue(i)
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}
