package carrier

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
)

// Link is a running carrier link (an SMPP bind, a Twilio account).
type Link interface {
	// Name and Type are the link's, from the providers file.
	Name() string
	Type() string
	// Up reports whether the link can take messages now: bound, or
	// answering.
	Up() bool
	// Send takes a message of one of the link's phones. It returns at once:
	// nil once the link holds the message (a message it holds already is
	// not taken twice), an *sb.Deferred while the link is down or full, or
	// an *sb.Error that fails the message. The link records what becomes of
	// the message in the store itself.
	Send(ctx context.Context, m *sb.Message) error
	// Run connects and serves until ctx ends.
	Run(ctx context.Context)
}

// PhoneLinks tells the link of a phone.
type PhoneLinks interface {
	PhoneLink(ctx context.Context, phoneID string) (kind, link string, err error)
}

// Prefix is where links receive callbacks: Prefix + NAME + "/...".
const Prefix = "/api/providers/"

// Set is the node's carrier links. It is the sb.Provider of every carrier
// kind (the Router hands it their messages), the sb.LinkState of routing,
// and the http.Handler of the links' callbacks.
type Set struct {
	links  map[string]Link
	phones PhoneLinks

	mu     sync.Mutex
	linkOf map[string]string // phone id -> link name (a phone's link never changes)

	outcomes chan sb.Outcome
}

// NewSet returns the Set of links.
func NewSet(phones PhoneLinks, links ...Link) *Set {
	s := &Set{links: map[string]Link{}, phones: phones, linkOf: map[string]string{}, outcomes: make(chan sb.Outcome)}
	for _, l := range links {
		s.links[l.Name()] = l
	}
	return s
}

// Link returns the link named name, or nil.
func (s *Set) Link(name string) Link { return s.links[name] }

// LinkUp implements sb.LinkState: an unknown link is down.
func (s *Set) LinkUp(name string) bool {
	l := s.links[name]
	return l != nil && l.Up()
}

// Run runs every link until ctx ends.
func (s *Set) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, l := range s.links {
		wg.Go(func() { l.Run(ctx) })
	}
	wg.Wait()
}

// Send implements sb.Provider: it hands m to its phone's link.
func (s *Set) Send(ctx context.Context, m *sb.Message) error {
	s.mu.Lock()
	name, ok := s.linkOf[m.PhoneID]
	s.mu.Unlock()
	if !ok {
		_, l, err := s.phones.PhoneLink(ctx, m.PhoneID)
		if sb.ErrorCode(err) == sb.CodeNotFound {
			return sb.Errorf(sb.CodeDeliveryFailed, "the carrier phone this message was to go out from was deleted")
		}
		if err != nil {
			return err
		}
		name = l
		s.mu.Lock()
		s.linkOf[m.PhoneID] = name
		s.mu.Unlock()
	}
	l := s.links[name]
	if l == nil {
		return sb.Errorf(sb.CodeDeliveryFailed, "the carrier link %q of this message's phone is not configured on this node (serve --providers)", name)
	}
	return l.Send(ctx, m)
}

// Outcomes implements sb.Provider. Links record outcomes in the store
// themselves (a receipt must be on disk before it is acknowledged), so
// nothing comes here.
func (s *Set) Outcomes() <-chan sb.Outcome { return s.outcomes }

// RecordsHandoff implements sb.HandoffRecorder: a link records a message
// sent once the carrier accepted it.
func (s *Set) RecordsHandoff(*sb.Message) bool { return true }

// ServeHTTP serves Prefix + NAME + "/..." with the handler of the link
// NAME, when it takes callbacks; anything else is 404.
func (s *Set) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, Prefix)
	name, _, _ := strings.Cut(rest, "/")
	if h, ok := s.links[name].(http.Handler); ok && rest != r.URL.Path {
		h.ServeHTTP(w, r)
		return
	}
	http.Error(w, "no such carrier link", http.StatusNotFound)
}

// Metrics are the links' Prometheus metrics.
type Metrics struct {
	up       *prometheus.GaugeVec
	submits  *prometheus.CounterVec
	receipts *prometheus.CounterVec
	inbound  *prometheus.CounterVec
	inDoubt  *prometheus.GaugeVec
}

// NewMetrics registers the links' metrics on reg (when not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_carrier_link_up",
			Help: "1 while the carrier link is up (bound, or answering), else 0."}, []string{"link", "type"}),
		submits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_carrier_submits_total",
			Help: "Message parts written to carrier links, by what came of the request: accepted, refused, throttled, retried, in_doubt, resent (in doubt and written again)."},
			[]string{"link", "result"}),
		receipts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_carrier_receipts_total",
			Help: "Delivery receipts and status callbacks received, by state: delivered, failed, pending."}, []string{"link", "state"}),
		inbound: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_carrier_inbound_total",
			Help: "Texts received on carrier links."}, []string{"link"}),
		inDoubt: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_carrier_parts_in_doubt",
			Help: "Message parts whose answer was lost, held for a receipt before they are written again."}, []string{"link"}),
	}
	if reg != nil {
		reg.MustRegister(m.up, m.submits, m.receipts, m.inbound, m.inDoubt)
	}
	return m
}

// LinkUp records whether a link is up.
func (m *Metrics) LinkUp(link, typ string, up bool) {
	if m != nil {
		setUp(m.up.WithLabelValues(link, typ), up)
	}
}

// setUp sets an up gauge: 1 for up, 0 for down.
func setUp(g prometheus.Gauge, up bool) {
	if up {
		g.Set(1)
	} else {
		g.Set(0)
	}
}

// Submit counts a part's request by its result.
func (m *Metrics) Submit(link, result string, n int) {
	if m != nil && n > 0 {
		m.submits.WithLabelValues(link, result).Add(float64(n))
	}
}

// Receipt counts a receipt by its state.
func (m *Metrics) Receipt(link string, state int) {
	if m == nil {
		return
	}
	name := "pending"
	switch state {
	case sb.ReceiptDelivered:
		name = "delivered"
	case sb.ReceiptFailed:
		name = "failed"
	}
	m.receipts.WithLabelValues(link, name).Inc()
}

// InDoubt sets how many parts a link holds in doubt.
func (m *Metrics) InDoubt(link string, n int) {
	if m != nil {
		m.inDoubt.WithLabelValues(link).Set(float64(n))
	}
}

// Inbound counts a received text.
func (m *Metrics) Inbound(link string) {
	if m != nil {
		m.inbound.WithLabelValues(link).Inc()
	}
}
