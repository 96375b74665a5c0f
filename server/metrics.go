package server

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/simulator"
	"github.com/switchboard/switchboard/sqlstore"
)

// storeCollector counts, at each scrape of /metrics, the outstanding work
// the database holds for every tenant: the queues by lane, the pending
// webhook deliveries, the running campaigns and the recipients they have
// yet to reach, and the phones by kind and status. Being counted in the
// database, these are the same on every node of a PostgreSQL cluster.
type storeCollector struct {
	db      *sqlstore.DB
	routing sb.Routing
	log     *slog.Logger

	queue, deliveries, running, pending, phones *prometheus.Desc
}

func newStoreCollector(db *sqlstore.DB, routing sb.Routing, log *slog.Logger) *storeCollector {
	return &storeCollector{
		db: db, routing: routing, log: log,
		queue: prometheus.NewDesc("switchboard_queue_depth",
			"Outbound messages not final yet, by lane: direct and campaign (in the delivery queue: due, scheduled, or handed over "+
				"and waiting for their outcome) and device (waiting for an Android phone's device to take them or report on them).",
			[]string{"lane"}, nil),
		deliveries: prometheus.NewDesc("switchboard_webhook_deliveries_pending",
			"Webhook deliveries not final yet: due, in flight, or waiting for a retry.", nil, nil),
		running: prometheus.NewDesc("switchboard_campaigns_running",
			"Campaigns that are running.", nil, nil),
		pending: prometheus.NewDesc("switchboard_campaign_recipients_pending",
			"Recipients the running campaigns have not reached yet (their totals less their progress).", nil, nil),
		phones: prometheus.NewDesc("switchboard_phones",
			"Sending phones of every tenant, by kind (simulated, android, smpp, twilio) and status (online, offline; a carrier phone is online while its link is up).",
			[]string{"kind", "status"}, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queue, c.deliveries, c.running, c.pending, c.phones} {
		ch <- d
	}
}

// Collect counts in the database. When it cannot, the scrape shows none of
// these metrics (and the log says why), rather than stale or zero values.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := c.db.Gauges(ctx, c.routing, time.Now())
	if err != nil {
		c.log.Warn("metrics: counting the outstanding work failed", "err", err)
		return
	}
	for _, lane := range []string{"direct", "campaign", "device"} {
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(g.Queue[lane]), lane)
	}
	ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.GaugeValue, float64(g.PendingDeliveries))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(g.CampaignsRunning))
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(g.RecipientsPending))
	kinds := []string{sb.PhoneSimulated, sb.PhoneAndroid, sb.PhoneSMPP, sb.PhoneTwilio}
	for _, kind := range kinds {
		for _, status := range []string{sb.PhoneOnline, sb.PhoneOffline} {
			ch <- prometheus.MustNewConstMetric(c.phones, prometheus.GaugeValue, float64(g.Phones[[2]string{kind, status}]), kind, status)
		}
	}
	for k, n := range g.Phones { // a kind to come
		if !slices.Contains(kinds, k[0]) {
			ch <- prometheus.MustNewConstMetric(c.phones, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
}

// redeliveryCollector exposes the possible duplicate hand-offs of this node:
// messages and webhook deliveries it took over from dead nodes or claimed
// again after a lease ran out, and the hand-offs its simulator recognised
// as duplicates by message id; and, on PostgreSQL, the nodes of the
// cluster, counted in the database at each scrape.
type redeliveryCollector struct {
	db  *sqlstore.DB
	sim *simulator.Simulator
	log *slog.Logger

	messages, deliveries, simDups, nodes *prometheus.Desc
}

func newRedeliveryCollector(db *sqlstore.DB, sim *simulator.Simulator, log *slog.Logger) *redeliveryCollector {
	return &redeliveryCollector{
		db: db, sim: sim, log: log,
		nodes: prometheus.NewDesc("switchboard_nodes",
			"PostgreSQL: nodes in the nodes table by state: live (registered and not found dead) and dead (declared dead in the last hour).",
			[]string{"state"}, nil),
		messages: prometheus.NewDesc("switchboard_delivery_redeliveries_total",
			"Messages this node made due again or claimed again after another claim on them ended without a result, each a possible duplicate hand-off "+
				"(the provider gets the same message id again), by reason: takeover (moved from a node this node declared dead) or "+
				"lease (claimed after an earlier claim's lease or outcome deadline ran out, or on SQLite a restart released it).",
			[]string{"reason"}, nil),
		deliveries: prometheus.NewDesc("switchboard_webhook_redeliveries_total",
			"Webhook deliveries this node made due again or claimed again after another claim on them ended without a result, each a possible "+
				"duplicate (the endpoint gets the same delivery id again), by reason: takeover or lease (as switchboard_delivery_redeliveries_total).",
			[]string{"reason"}, nil),
		simDups: prometheus.NewDesc("switchboard_simulator_duplicates_total",
			"Hand-offs to this node's simulator of a message id it had already accepted (within its deduplication window): not sent again.",
			nil, nil),
	}
}

func (c *redeliveryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.messages
	ch <- c.deliveries
	ch <- c.simDups
	ch <- c.nodes
}

func (c *redeliveryCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.db.Redeliveries()
	ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(r.TakeoverMessages), "takeover")
	ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(r.LeaseMessages), "lease")
	ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.CounterValue, float64(r.TakeoverDeliveries), "takeover")
	ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.CounterValue, float64(r.LeaseDeliveries), "lease")
	ch <- prometheus.MustNewConstMetric(c.simDups, prometheus.CounterValue, float64(c.sim.Duplicates()))
	if c.db.Dialect() != sqlstore.Postgres {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	live, dead, err := c.db.NodeCounts(ctx)
	if err != nil {
		c.log.Warn("metrics: counting the nodes failed", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(live), "live")
	ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(dead), "dead")
}
