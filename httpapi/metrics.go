package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the Prometheus metrics of the HTTP API.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	refusals *prometheus.CounterVec
	handler  http.Handler
	Registry *prometheus.Registry
}

// NewMetrics registers the HTTP metrics (and the Go runtime's) on reg, or on
// a new registry when reg is nil.
func NewMetrics(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_rate_limit_refusals_total",
			Help: "Requests refused with 429 by limit: key (the key's per-minute limit), tenant (the tenant's total), " +
				"auth_throttle (failed authentication from one address), monthly_quota, new_contacts (the daily new-recipient limit).",
		}, []string{"limit"}),
		Registry: reg,
	}
	// Every limit shows, at 0, before its first refusal.
	for _, l := range []string{"key", "tenant", "auth_throttle", "monthly_quota", "new_contacts"} {
		m.refusals.WithLabelValues(l)
	}
	reg.MustRegister(m.requests, m.latency, m.refusals)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

var statusText [600]string

func init() {
	for i := range statusText {
		statusText[i] = strconv.Itoa(i)
	}
}

func (m *Metrics) observe(route string, status int, d time.Duration) {
	if status == 0 {
		status = http.StatusOK
	}
	code := "other"
	if status > 0 && status < len(statusText) {
		code = statusText[status]
	}
	m.requests.WithLabelValues(route, code).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

// refused counts a 429 of the named limit.
func (m *Metrics) refused(limit string) { m.refusals.WithLabelValues(limit).Inc() }
