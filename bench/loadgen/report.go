package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// Report writes an aligned table comparing baseline and others to w. Each
// row shows the name, measured requests, errors, requests per second, p50
// and p99 latency in milliseconds, and the ratios of req/s and of p99 to the
// baseline's (a req/s ratio below 1 and a p99 ratio above 1 mean slower than
// the baseline). Ratios against a zero baseline figure are shown as "-".
// Report does not write the JSON form; use Result.JSON for that.
func Report(w io.Writer, baseline Result, others ...Result) {
	header := []string{"name", "requests", "errors", "req/s", "p50 ms", "p99 ms", "req/s ratio", "p99 ratio"}
	rows := [][]string{header}
	for _, r := range append([]Result{baseline}, others...) {
		rows = append(rows, []string{
			r.Name,
			strconv.FormatUint(r.Requests, 10),
			strconv.FormatUint(r.Errors, 10),
			strconv.FormatFloat(r.RPS, 'f', 1, 64),
			fmtMillis(r.P50),
			fmtMillis(r.P99),
			fmtRatio(r.RPS, baseline.RPS),
			fmtRatio(float64(r.P99), float64(baseline.P99)),
		})
	}
	widths := make([]int, len(header))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len(cell))
		}
	}
	for _, row := range rows {
		line := make([]byte, 0, 128)
		for i, cell := range row {
			if i == 0 {
				line = fmt.Appendf(line, "%-*s", widths[i], cell)
			} else {
				line = fmt.Appendf(line, "  %*s", widths[i], cell)
			}
		}
		line = append(line, '\n')
		_, _ = w.Write(line)
	}
}

func fmtMillis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

func fmtRatio(v, base float64) string {
	if base == 0 {
		return "-"
	}
	return strconv.FormatFloat(v/base, 'f', 3, 64) + "x"
}

// resultJSON is the JSON form of a Result. Durations are in milliseconds
// (elapsed in seconds) so the line is readable without conversion.
type resultJSON struct {
	Name       string         `json:"name"`
	Requests   uint64         `json:"requests"`
	Errors     uint64         `json:"errors"`
	Unexpected map[int]uint64 `json:"unexpected"`
	ElapsedS   float64        `json:"elapsed_s"`
	RPS        float64        `json:"rps"`
	P50Ms      float64        `json:"p50_ms"`
	P90Ms      float64        `json:"p90_ms"`
	P99Ms      float64        `json:"p99_ms"`
	MaxMs      float64        `json:"max_ms"`
}

// JSON returns r as a single-line JSON object without a trailing newline,
// for example
//
//	{"name":"bare","requests":1000,"errors":0,"unexpected":{},"elapsed_s":1.002,
//	 "rps":998.0,"p50_ms":0.41,"p90_ms":0.9,"p99_ms":2.1,"max_ms":7.3}
//
// (shown wrapped). Unexpected statuses appear as string keys; latencies are
// in milliseconds and the elapsed time in seconds.
func (r Result) JSON() []byte {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	finite := func(f float64) float64 {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
		return f
	}
	unexpected := r.Unexpected
	if unexpected == nil {
		unexpected = map[int]uint64{}
	}
	b, err := json.Marshal(resultJSON{
		Name:       r.Name,
		Requests:   r.Requests,
		Errors:     r.Errors,
		Unexpected: unexpected,
		ElapsedS:   r.Elapsed.Seconds(),
		RPS:        finite(r.RPS),
		P50Ms:      ms(r.P50),
		P90Ms:      ms(r.P90),
		P99Ms:      ms(r.P99),
		MaxMs:      ms(r.Max),
	})
	if err != nil {
		// Unreachable: every field is a finite number, a string or a map
		// with integer keys.
		panic("loadgen: encoding Result: " + err.Error())
	}
	return b
}
