package dashboard

import (
	"time"

	sb "github.com/switchboard/switchboard"
)

// chart is a stacked bar chart of messages by status per day, drawn on the
// server as SVG: no script, sharp at any zoom, and with the same numbers in
// a table for those who cannot see it.
type chart struct {
	Width, Height int
	// The plot area.
	Left, Top, Right, Bottom int
	Days                     []chartDay
	Ticks                    []chartTick
	Series                   []chartSeries
	Total                    int
}

type chartDay struct {
	Day   time.Time
	Label string
	X     int // center of the bar
	// Labeled days are every other one, today's included.
	Labeled bool
	Counts  []int
	Total   int
	Bars    []chartBar
}

type chartBar struct {
	X, Y, W, H int
	Fill       string
	Title      string
}

type chartTick struct {
	Y     int
	Label int
}

type chartSeries struct {
	Status, Fill string
}

// chartSeries are the statuses, bottom of the stack first, with colours
// that keep a contrast of at least 3:1 against white.
var chartStatuses = []chartSeries{
	{sb.StatusDelivered, "#1a7f37"},
	{sb.StatusSent, "#0969da"},
	{sb.StatusQueued, "#6e7781"},
	{sb.StatusFailed, "#cf222e"},
	{sb.StatusReceived, "#8250df"},
}

// newChart lays out n days from since (a UTC midnight).
func newChart(since time.Time, n int, counts []sb.DayCount) chart {
	c := chart{Width: 700, Height: 260, Left: 48, Top: 12, Right: 690, Bottom: 220, Series: chartStatuses}
	index := map[string]int{}
	for i, s := range chartStatuses {
		index[s.Status] = i
	}
	byDay := map[time.Time][]int{}
	for _, dc := range counts {
		i, ok := index[dc.Status]
		if !ok {
			continue
		}
		d := dc.Day.UTC()
		if byDay[d] == nil {
			byDay[d] = make([]int, len(chartStatuses))
		}
		byDay[d][i] += dc.N
	}
	peak := 0
	for i := 0; i < n; i++ {
		d := since.AddDate(0, 0, i)
		day := chartDay{Day: d, Label: d.Format("Jan 2"), Counts: byDay[d], Labeled: (n-1-i)%2 == 0}
		if day.Counts == nil {
			day.Counts = make([]int, len(chartStatuses))
		}
		for _, k := range day.Counts {
			day.Total += k
		}
		peak = max(peak, day.Total)
		c.Total += day.Total
		c.Days = append(c.Days, day)
	}
	top := niceCeiling(peak)
	height := c.Bottom - c.Top
	for i := 0; i <= 4; i++ {
		v := top * i / 4
		c.Ticks = append(c.Ticks, chartTick{Y: c.Bottom - height*i/4, Label: v})
	}
	slot := (c.Right - c.Left) / n
	barW := slot * 2 / 3
	for i := range c.Days {
		d := &c.Days[i]
		d.X = c.Left + slot*i + slot/2
		y := c.Bottom
		for s, k := range d.Counts {
			if k == 0 {
				continue
			}
			h := max(1, k*height/top)
			y -= h
			d.Bars = append(d.Bars, chartBar{X: d.X - barW/2, Y: y, W: barW, H: h, Fill: chartStatuses[s].Fill,
				Title: d.Label + ": " + groupDigits(int64(k)) + " " + chartStatuses[s].Status})
		}
	}
	return c
}

// niceCeiling rounds n up to 4, or to 1, 2 or 5 times a power of ten that
// divides into four ticks.
func niceCeiling(n int) int {
	if n <= 4 {
		return 4
	}
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if top := 4 * m * p; top >= n {
				return top
			}
		}
	}
}
