package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard/switchboard/sqlstore"
)

// limitsCollector exposes this node's reservations of daily limits (see
// docs/scale-out.md, "Limits across nodes").
type limitsCollector struct {
	db                                         *sqlstore.DB
	blocks, units, empty, back, held, shardRow *prometheus.Desc
}

func newLimitsCollector(db *sqlstore.DB) *limitsCollector {
	return &limitsCollector{db: db,
		blocks: prometheus.NewDesc("switchboard_daily_limit_blocks_total",
			"Blocks of daily limits (phones' daily_limit, plans' new contacts per day) this node reserved.", nil, nil),
		units: prometheus.NewDesc("switchboard_daily_limit_units_reserved_total",
			"Units of daily limits in the blocks this node reserved.", nil, nil),
		empty: prometheus.NewDesc("switchboard_daily_limit_exhausted_total",
			"Reservations of this node that found a daily limit used up.", nil, nil),
		back: prometheus.NewDesc("switchboard_daily_limit_units_given_back_total",
			"Units of daily limits this node gave back unspent (idle for a second, at shutdown, or under a changed limit).", nil, nil),
		held: prometheus.NewDesc("switchboard_daily_limit_units_held",
			"Units of daily limits this node holds and has not spent.", nil, nil),
		shardRow: prometheus.NewDesc("switchboard_counter_shard_writes_total",
			"Rows of daily-counter shards this node's commits wrote (one per counter per group-commit batch).", nil, nil),
	}
}

func (c *limitsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.blocks, c.units, c.empty, c.back, c.held, c.shardRow} {
		ch <- d
	}
}

func (c *limitsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.db.LimitStats()
	ch <- prometheus.MustNewConstMetric(c.blocks, prometheus.CounterValue, float64(st.Blocks))
	ch <- prometheus.MustNewConstMetric(c.units, prometheus.CounterValue, float64(st.Units))
	ch <- prometheus.MustNewConstMetric(c.empty, prometheus.CounterValue, float64(st.Empty))
	ch <- prometheus.MustNewConstMetric(c.back, prometheus.CounterValue, float64(st.GivenBack))
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(st.Held))
	ch <- prometheus.MustNewConstMetric(c.shardRow, prometheus.CounterValue, float64(st.ShardWrites))
}
