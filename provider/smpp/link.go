// Package smpp is the SMPP 3.4 carrier link (docs/carriers.md): an ESME
// that keeps one transceiver bind to an SMSC, writes the messages of the
// link's phones as submit_sm (GSM-7 or UCS-2, long texts in concatenated
// parts) with a window of outstanding requests and a throughput cap, and
// reads submit_sm_resp, delivery receipts and mobile-originated texts.
//
// It uses github.com/linxGnu/gosmpp for the protocol itself: the PDU
// codecs, the character sets and the bind (gosmpp.TRXConnector). It runs its
// own session over the bound connection rather than gosmpp.Session, because
// the guarantees of a carrier link depend on what the session does: a
// deliver_sm is answered only once what it reports is on disk (gosmpp
// answers first), requests are paced by a window and a cap that ESME_RTHROTTLED
// widens, a bind that drops is re-established with an exponential back-off,
// and every submit_sm unanswered when a bind drops is known by name.
//
// Delivery guarantees (docs/carriers.md): nothing accepted is lost. A part
// the SMSC accepted (its submit_sm_resp gave an id) is never written again.
// A part whose answer was lost (the bind dropped, or the process died, while
// it was outstanding) is in doubt: it is not written again at once but held
// for InDoubtResendAfter, during which a receipt that shows the SMSC has it
// (matched by its addresses and text, since its id is unknown) settles it;
// only then is it written again. This is at-least-once delivery, with the
// message id and part number as the key that keeps it from becoming
// "at least twice" except for a part the SMSC took and never reported.
package smpp

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/linxGnu/gosmpp"
	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
)

// Store is what a link needs from storage.
type Store interface {
	CarrierParts(ctx context.Context, ids []string) (map[string][]sb.CarrierPart, error)
	RecordCarrier(ctx context.Context, link string, evs []sb.CarrierEvent) (sb.CarrierResult, error)
}

// Options tune a Link; zero values take the defaults.
type Options struct {
	// EnquireLink is how often the link checks that the bind is alive
	// (default 30s); a request unanswered for RespTimeout (default 30s)
	// takes the bind down.
	EnquireLink, RespTimeout time.Duration
	// BindTimeout bounds a connect and bind (default 10s).
	BindTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between two binds (default
	// 1s doubling to 60s, with jitter), StableAfter is how long a bind
	// must stay up for the next drop to start again from BackoffMin
	// (default 60s), and ThrottleMin the first pause after an
	// ESME_RTHROTTLED (default 1s, doubling to 60s).
	BackoffMin, BackoffMax, StableAfter, ThrottleMin time.Duration
	// Now and Sleep are the clock of the re-bind back-off (default
	// time.Now, and a timer that ends early when ctx does, reporting
	// false); tests replace them to run minutes of back-off at once.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) bool
	// MaxHeld is the most messages the link holds in memory; more are put
	// off (sb.Deferred) and stay queued in the store. Default 10,000.
	MaxHeld int
	// ConcatTimeout is how long the parts of a long inbound text wait for
	// the rest (default 60s); the text is then stored as it is.
	ConcatTimeout time.Duration
	// ConcatMaxParts and ConcatMaxBytes bound the parts of unfinished long
	// inbound texts the link holds (default 1,000 parts, 1 MiB of text);
	// past either, the oldest are stored with the parts that came.
	ConcatMaxParts, ConcatMaxBytes int
	// MarkAfter is how long a written part waits for its answer before it
	// is recorded as written, i.e. in doubt (default 50ms): a part the
	// SMSC answers sooner costs no write.
	MarkAfter time.Duration
	// RootCAs verifies the SMSC's certificate on a link with tls: true
	// (default: the system's roots).
	RootCAs *x509.CertPool
	Metrics *carrier.Metrics
	Log     *slog.Logger
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.EnquireLink, 30*time.Second) // a link's enquire_link overrides it
	def(&o.RespTimeout, 30*time.Second)
	def(&o.BindTimeout, 10*time.Second)
	def(&o.BackoffMin, time.Second)
	def(&o.BackoffMax, 60*time.Second)
	def(&o.StableAfter, 60*time.Second)
	def(&o.ThrottleMin, time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	def(&o.ConcatTimeout, 60*time.Second)
	def(&o.MarkAfter, 50*time.Millisecond)
	if o.MaxHeld <= 0 {
		o.MaxHeld = 10000
	}
	if o.ConcatMaxParts <= 0 {
		o.ConcatMaxParts = 1000
	}
	if o.ConcatMaxBytes <= 0 {
		o.ConcatMaxBytes = 1 << 20
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Part states in memory.
const (
	partReady       = iota // waiting to be written
	partOutstanding        // written, its answer not come
	partDoubt              // its answer lost: held until notBefore
	partAnswered           // accepted, or refused
)

type outMsg struct {
	m      *sb.Message
	parts  []*outPart
	failed bool
	ref    uint16 // the concatenation reference of a long text's parts
}

type outPart struct {
	msg       *outMsg
	i         int
	seg       segment
	state     int
	writtenAt time.Time
	notBefore time.Time
	marked    bool // recorded as written
	recorded  bool // its answer (or receipt) is on disk
	doubted   bool // was in doubt: a write now is a resend
	tries     int  // transient refusals
	seq       int32
}

func (p *outPart) ref() sb.PartRef { return sb.PartRef{MessageID: p.msg.m.ID, Part: p.i} }

// Link is one SMPP carrier link.
type Link struct {
	cfg   carrier.Config
	opt   Options
	store Store
	log   *slog.Logger
	hold  time.Duration
	// siblings are the other links to the same SMSC account (address and
	// system_id): the SMSC may send their receipts on this bind.
	siblings []string

	mu        sync.Mutex
	sess      *session
	boundAt   time.Time // when sess was bound
	downSince time.Time
	msgs      map[string]*outMsg
	ready     []*outPart // FIFO
	doubt     []*outPart // held in doubt
	resume    []*outMsg  // handed over again: their parts' state is read first
	throttle  time.Time  // no submit_sm before
	pause     time.Duration
	nextSlot  time.Time     // the throughput cap's next free slot
	wake      chan struct{} // the writer's
	hkWake    chan struct{} // housekeeping's

	recMu   sync.Mutex
	pending []recEvent
	recWake chan struct{}

	// refs are the concatenation references of the long texts held, by
	// recipient: two in flight to one handset never share one.
	refs        map[string]map[uint16]time.Time // zero: in use; else when freed
	concat      map[concatKey]*concatMsg        // long inbound texts being put together
	concatParts int                             // their parts
	concatBytes int                             // and the bytes of their text
}

// New returns a link for cfg (an smpp link of the providers file).
func New(cfg carrier.Config, store Store, opt Options) *Link {
	if cfg.EnquireLink > 0 {
		opt.EnquireLink = time.Duration(cfg.EnquireLink) * time.Second
	}
	opt.defaults()
	hold := time.Duration(cfg.InDoubtResendAfter) * time.Second
	if hold <= 0 {
		hold = carrier.DefaultInDoubtResendAfter * time.Second
	}
	if cfg.Window <= 0 {
		cfg.Window = carrier.DefaultWindow
	}
	return &Link{cfg: cfg, opt: opt, store: store, hold: hold, log: opt.Log.With("link", cfg.Name, "type", carrier.TypeSMPP),
		msgs: map[string]*outMsg{}, wake: make(chan struct{}, 1), hkWake: make(chan struct{}, 1), recWake: make(chan struct{}, 1),
		downSince: time.Now(), concat: map[concatKey]*concatMsg{}, refs: map[string]map[uint16]time.Time{}}
}

// Name implements carrier.Link.
func (l *Link) Name() string { return l.cfg.Name }

// Account is the SMSC account the link binds with: its address and
// system_id.
func (l *Link) Account() string { return l.cfg.Addr + "/" + l.cfg.SystemID }

// SetSiblings names the other links to the same SMSC account (see
// Account); call it before Run.
func (l *Link) SetSiblings(names []string) { l.siblings = names }

// Type implements carrier.Link.
func (l *Link) Type() string { return carrier.TypeSMPP }

// Up implements carrier.Link: the link is up while bound.
func (l *Link) Up() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sess != nil
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// backoff is the wait between two binds: from min, doubling to max, each
// wait drawn between half of it and all of it so that nodes do not bind
// in step. Only a bind that stayed up (see Options.StableAfter) starts it
// again from min: an SMSC that accepts each bind and drops it at once
// sees the waits grow.
type backoff struct {
	min, max, cur time.Duration
}

// next returns the wait before the next bind, and doubles the one after.
func (b *backoff) next() time.Duration {
	if b.cur < b.min {
		b.cur = b.min
	}
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.cur = b.min }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Send implements carrier.Link.
func (l *Link) Send(ctx context.Context, m *sb.Message) error {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.msgs[m.ID]; ok {
		return nil // held already: handed over again after its claim ran out
	}
	if l.sess == nil {
		wait := min(max(now.Sub(l.downSince)/2, time.Second), 30*time.Second)
		return &sb.Deferred{Until: now.Add(wait), Reason: "the SMPP link " + l.cfg.Name + " is down"}
	}
	if len(l.msgs) >= l.opt.MaxHeld {
		wait := time.Second
		if l.cfg.TPS > 0 {
			wait = max(wait, time.Duration(len(l.msgs)/l.cfg.TPS)*time.Second)
		}
		return &sb.Deferred{Until: now.Add(wait), Reason: "the SMPP link " + l.cfg.Name + " holds as many messages as it may"}
	}
	single := byte(data.GSM7BITCoding)
	if l.cfg.DataCoding != nil {
		single = byte(*l.cfg.DataCoding)
	}
	segs, err := splitTextAs(m.Body, single)
	if err != nil {
		return sb.Errorf(sb.CodeDeliveryFailed, "the text cannot be encoded for SMPP: %v", err)
	}
	om := &outMsg{m: m}
	if len(segs) > 1 {
		om.ref = l.takeRef(m.ID, m.To)
	}
	for i, s := range segs {
		om.parts = append(om.parts, &outPart{msg: om, i: i, seg: s})
	}
	l.msgs[m.ID] = om
	if m.Attempts > 1 {
		// Handed over before (a restart, a claim that ran out): some parts
		// may be accepted or in doubt already. Their state is read first.
		l.resume = append(l.resume, om)
		signal(l.hkWake)
		return nil
	}
	l.ready = append(l.ready, om.parts...)
	signal(l.wake)
	return nil
}

// Run binds and serves until ctx ends, binding again with a back-off
// whenever the bind drops.
func (l *Link) Run(ctx context.Context) {
	l.opt.Metrics.LinkUp(l.cfg.Name, carrier.TypeSMPP, false)
	// The recorder outlives the binds: what the last one learned, and the
	// parts it left in doubt, are recorded before Run returns.
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { l.recorder(bg) })
	wg.Go(func() { l.housekeeping(bg) })
	defer func() {
		stopBg()
		wg.Wait()
	}()
	bo := backoff{min: l.opt.BackoffMin, max: l.opt.BackoffMax}
	var wait time.Duration // before the next bind: none for the first
	for ctx.Err() == nil {
		// Never at once after a drop, an unbind or a refusal: an SMSC
		// locks out a client that binds in a loop.
		if wait > 0 && !l.opt.Sleep(ctx, wait) {
			return
		}
		conn, err := l.bind(ctx)
		if err != nil {
			wait = bo.next()
			if ctx.Err() == nil {
				l.log.Warn("SMPP bind failed; binding again after a back-off", "addr", l.cfg.Addr, "err", err.Error(), "retry_in", wait.String())
			}
			continue
		}
		upAt := l.opt.Now()
		s := newSession(l, conn)
		l.mu.Lock()
		l.sess, l.boundAt = s, time.Now()
		l.mu.Unlock()
		l.opt.Metrics.LinkUp(l.cfg.Name, carrier.TypeSMPP, true)
		l.log.Info("SMPP link up: bound as transceiver", "addr", l.cfg.Addr, "system_id", l.cfg.SystemID)
		signal(l.wake)
		reason := s.run(ctx)
		l.down(s)
		if l.opt.Now().Sub(upAt) >= l.opt.StableAfter {
			bo.reset()
		}
		wait = bo.next()
		if ctx.Err() == nil {
			l.log.Warn("SMPP link down", "addr", l.cfg.Addr, "reason", reason, "retry_in", wait.String())
		}
	}
}

// BindError is a bind the SMSC refused, with its command_status.
type BindError struct{ Status data.CommandStatusType }

func (e BindError) Error() string {
	return fmt.Sprintf("the SMSC refused the bind: %s", statusText(e.Status))
}

// statusText names a command_status: "ESME_RINVPASWD (0x0000000E: Invalid
// Password)", or its hex for a status SMPP 3.4 does not define (a vendor's).
func statusText(st data.CommandStatusType) string {
	name := st.String()
	if strings.HasPrefix(name, "CommandStatusType(") {
		return fmt.Sprintf("0x%08X (a status SMPP 3.4 does not define)", uint32(st))
	}
	return fmt.Sprintf("%s (0x%08X: %s)", name, uint32(st), st.Desc())
}

// statusName is the name of a command_status, or its hex when SMPP 3.4
// does not define it.
func statusName(st data.CommandStatusType) string {
	name := st.String()
	if strings.HasPrefix(name, "CommandStatusType(") {
		return fmt.Sprintf("0x%08X", uint32(st))
	}
	return name
}

// bind dials the SMSC and binds as a transceiver within BindTimeout. It
// reads the bind_transceiver_resp itself: SMPP 3.4 lets an SMSC refuse a
// bind with the header alone (no system_id), which gosmpp's parser takes
// for a truncated PDU.
func (l *Link) bind(ctx context.Context) (*gosmpp.Connection, error) {
	dctx, cancel := context.WithTimeout(ctx, l.opt.BindTimeout)
	defer cancel()
	var nc net.Conn
	var err error
	if l.cfg.TLS {
		d := tls.Dialer{Config: &tls.Config{ServerName: hostOf(l.cfg.Addr), MinVersion: tls.VersionTLS12, RootCAs: l.opt.RootCAs}}
		nc, err = d.DialContext(dctx, "tcp", l.cfg.Addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(dctx, "tcp", l.cfg.Addr)
	}
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(l.opt.BindTimeout)) // the bind must answer in time
	conn := gosmpp.NewConnection(nc)
	req := pdu.NewBindRequest(pdu.Transceiver)
	req.SystemID, req.Password, req.SystemType = l.cfg.SystemID, l.cfg.Password.Reveal(), l.cfg.SystemType
	if _, err := conn.WritePDU(req); err != nil {
		conn.Close()
		return nil, err
	}
	for {
		var head [16]byte
		if _, err := io.ReadFull(conn, head[:]); err != nil {
			conn.Close()
			return nil, fmt.Errorf("reading the bind's answer: %w", err)
		}
		h := pdu.ParseHeader(head)
		if h.CommandLength < 16 || h.CommandLength > data.MAX_PDU_LEN {
			conn.Close()
			return nil, errors.New("the SMSC answered the bind with a malformed PDU")
		}
		body := make([]byte, h.CommandLength-16)
		if _, err := io.ReadFull(conn, body); err != nil {
			conn.Close()
			return nil, fmt.Errorf("reading the bind's answer: %w", err)
		}
		if h.CommandID != data.BIND_TRANSCEIVER_RESP && h.CommandID != data.GENERIC_NACK {
			continue // something before the answer (an enquire_link, say)
		}
		if h.CommandStatus != data.ESME_ROK {
			conn.Close()
			return nil, BindError{Status: h.CommandStatus}
		}
		if h.CommandID == data.GENERIC_NACK {
			conn.Close()
			return nil, errors.New("the SMSC answered the bind with generic_nack")
		}
		break
	}
	nc.SetDeadline(time.Time{})
	return conn, nil
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// down takes the link down after session s ended: what s had outstanding
// is in doubt, and recorded as written.
func (l *Link) down(s *session) {
	now := time.Now()
	var marks []recEvent
	l.mu.Lock()
	if l.sess == s {
		l.sess = nil
		l.downSince = now
	}
	n := 0
	for _, p := range s.outstanding {
		if p.state != partOutstanding {
			continue
		}
		p.state, p.notBefore, p.doubted = partDoubt, p.writtenAt.Add(l.hold), true
		l.doubt = append(l.doubt, p)
		n++
		if !p.marked {
			p.marked = true
			marks = append(marks, recEvent{ev: sb.CarrierEvent{Kind: sb.CarrierWritten, MessageID: p.msg.m.ID, Part: p.i,
				Parts: len(p.msg.parts), At: p.writtenAt}})
		}
	}
	s.outstanding = map[int32]*outPart{}
	l.countDoubt()
	l.mu.Unlock()
	l.record(marks...)
	l.opt.Metrics.LinkUp(l.cfg.Name, carrier.TypeSMPP, false)
	l.opt.Metrics.Submit(l.cfg.Name, "in_doubt", n)
	if n > 0 {
		l.log.Warn("SMPP bind dropped with submit_sm unanswered: they are in doubt, held for a receipt before they are written again",
			"in_doubt", n, "resend_after", l.hold.String())
	}
}

// take returns the next part to write on s, or nil and how long to wait
// before one may go (0: until woken).
func (l *Link) take(s *session, now time.Time) (*outPart, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess != s {
		return nil, 0
	}
	for len(l.ready) > 0 && (l.ready[0].state != partReady || l.ready[0].msg.failed) {
		l.ready = l.ready[1:] // answered meanwhile, or its message failed
	}
	if len(l.ready) == 0 || len(s.outstanding) >= l.cfg.Window {
		return nil, 0
	}
	if now.Before(l.throttle) {
		return nil, l.throttle.Sub(now)
	}
	if l.cfg.TPS > 0 {
		if now.Before(l.nextSlot) {
			return nil, l.nextSlot.Sub(now)
		}
		l.nextSlot = now.Add(time.Second / time.Duration(l.cfg.TPS))
	}
	p := l.ready[0]
	l.ready = l.ready[1:]
	p.state, p.writtenAt = partOutstanding, now
	return p, 0
}

// requeue puts p back at the head of the queue.
func (l *Link) requeue(p *outPart) {
	p.state, p.marked = partReady, false
	l.ready = append([]*outPart{p}, l.ready...)
}

// submitSM builds the submit_sm of part p.
func (l *Link) submitSM(p *outPart) (*pdu.SubmitSM, error) {
	m := p.msg.m
	sm := pdu.NewSubmitSM().(*pdu.SubmitSM)
	or := func(v *int, def byte) byte {
		if v != nil {
			return byte(*v)
		}
		return def
	}
	src, err := pdu.NewAddressWithTonNpiAddr(or(l.cfg.SourceTON, data.GSM_TON_INTERNATIONAL), or(l.cfg.SourceNPI, data.GSM_NPI_E164), strings.TrimPrefix(m.From, "+"))
	if err != nil {
		return nil, err
	}
	dst, err := pdu.NewAddressWithTonNpiAddr(or(l.cfg.DestTON, data.GSM_TON_INTERNATIONAL), or(l.cfg.DestNPI, data.GSM_NPI_E164), strings.TrimPrefix(m.To, "+"))
	if err != nil {
		return nil, err
	}
	sm.SourceAddr, sm.DestAddr = src, dst
	sm.RegisteredDelivery = 1 // a receipt on success and on failure
	n := len(p.msg.parts)
	if n > 1 {
		sm.EsmClass |= data.SM_UDH_GSM
	}
	if sm.Message, err = shortMessage(p.seg, p.i, n, p.msg.ref, l.cfg.UDH16); err != nil {
		return nil, err
	}
	return sm, nil
}

// answered handles the submit_sm_resp (or generic_nack) of part p.
func (l *Link) answered(s *session, p *outPart, status data.CommandStatusType, id string, nack bool) {
	now := time.Now()
	name := l.cfg.Name
	var ev *sb.CarrierEvent
	result := ""
	l.mu.Lock()
	if p.state != partOutstanding {
		l.mu.Unlock()
		return
	}
	switch {
	case status == data.ESME_ROK && !nack:
		p.state = partAnswered
		l.pause = 0
		ev = &sb.CarrierEvent{Kind: sb.CarrierAccepted, MessageID: p.msg.m.ID, Part: p.i, Parts: len(p.msg.parts), ExternalID: id, At: now}
		result = "accepted"
	case !nack && (status == data.ESME_RTHROTTLED || status == data.ESME_RMSGQFUL):
		// The SMSC wants us slower: the part goes first again, after a
		// pause that doubles while the SMSC keeps refusing.
		l.pause = min(max(l.pause*2, l.opt.ThrottleMin), maxPause)
		l.throttle = now.Add(l.pause)
		l.requeue(p)
		result = "throttled"
	case !nack && transient(status) && p.tries < maxTransient:
		// A passing trouble at the SMSC: the same pause as throttling, so
		// that a minute of trouble does not fail messages for good.
		p.tries++
		l.pause = min(max(l.pause*2, l.opt.ThrottleMin), maxPause)
		l.throttle = now.Add(l.pause)
		l.requeue(p)
		result = "retried"
	default:
		p.state = partAnswered
		p.msg.failed = true
		what := "submit_sm_resp"
		if nack {
			what = "generic_nack"
		}
		reason := fmt.Sprintf("SMPP %s %s", what, statusText(status))
		ev = &sb.CarrierEvent{Kind: sb.CarrierRefused, MessageID: p.msg.m.ID, Part: p.i, Parts: len(p.msg.parts), Reason: reason, At: now}
		result = "refused"
	}
	pause := l.pause
	l.mu.Unlock()
	l.opt.Metrics.Submit(name, result, 1)
	switch result {
	case "throttled":
		l.log.Warn("SMSC throttling: pausing submit_sm", "status", statusName(status), "pause", pause.String())
	case "retried":
		l.log.Warn("SMSC refused a submit_sm for a passing reason: pausing submit_sm, the part goes again", "status", statusName(status), "pause", pause.String())
	}
	signal(l.wake)
	if ev != nil {
		l.record(recEvent{ev: *ev})
	}
}

// maxPause is the longest pause after throttling or a passing error, and
// maxTransient how many times a part refused for a passing reason
// (ESME_RSYSERR...) goes again before its message fails: the pauses then
// add up to several minutes.
const (
	maxPause     = 60 * time.Second
	maxTransient = 10
)

// receiptGrace is how long a new bind is given to bring the receipts the
// SMSC kept before a part in doubt is written again (at most the hold).
const receiptGrace = 10 * time.Second

// transient reports whether a submit_sm refusal may pass if tried again.
func transient(status data.CommandStatusType) bool {
	switch status {
	case data.ESME_RSYSERR, data.ESME_RX_T_APPN, data.ESME_RSUBMITFAIL:
		return true
	}
	return false
}

// housekeeping moves parts whose doubt is over back to the queue, once the
// store confirms no receipt settled them, and reads the state of messages
// handed over again.
func (l *Link) housekeeping(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	lastSweep := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.hkWake:
		}
		l.resumeHandedOver(ctx)
		l.endDoubt(ctx)
		l.flushConcat(false)
		if time.Since(lastSweep) > time.Minute {
			lastSweep = time.Now()
			l.sweepRefs()
		}
	}
}

func (l *Link) resumeHandedOver(ctx context.Context) {
	l.mu.Lock()
	todo := l.resume
	l.resume = nil
	l.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	ids := make([]string, len(todo))
	for i, om := range todo {
		ids[i] = om.m.ID
	}
	states, err := l.store.CarrierParts(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Error("reading the parts of messages handed over again", "err", err)
		}
		l.mu.Lock()
		l.resume = append(todo, l.resume...)
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, om := range todo {
		known := map[int]sb.CarrierPart{}
		for _, cp := range states[om.m.ID] {
			known[cp.Part] = cp
		}
		open := 0
		for _, p := range om.parts {
			cp, ok := known[p.i]
			switch {
			case !ok:
				p.state = partReady
				l.ready = append(l.ready, p)
				open++
			case cp.State == sb.PartWritten:
				p.state, p.doubted, p.marked = partDoubt, true, true
				p.writtenAt, p.notBefore = cp.WrittenAt, cp.WrittenAt.Add(l.hold)
				l.doubt = append(l.doubt, p)
				open++
			default:
				p.state, p.recorded = partAnswered, true
				if cp.State == sb.PartFailed {
					om.failed = true
				}
			}
		}
		if open == 0 || om.failed {
			l.dropMsg(om)
		}
	}
	l.countDoubt()
	if len(l.ready) > 0 {
		signal(l.wake)
	}
}

// endDoubt writes again the parts whose doubt is over and that no receipt
// settled, here or on another node.
func (l *Link) endDoubt(ctx context.Context) {
	now := time.Now()
	l.mu.Lock()
	// The receipts an SMSC kept while the link was down come in the first
	// moments of the next bind: until then, no hold is over.
	settling := l.sess == nil || now.Before(l.boundAt.Add(min(l.hold, receiptGrace)))
	var due []*outPart
	keep := l.doubt[:0]
	for _, p := range l.doubt {
		switch {
		case p.state != partDoubt:
		case !settling && !p.notBefore.After(now):
			due = append(due, p)
		default:
			keep = append(keep, p)
		}
	}
	l.doubt = keep
	l.mu.Unlock()
	if len(due) == 0 {
		return
	}
	seen := map[string]bool{}
	var ids []string
	for _, p := range due {
		if !seen[p.msg.m.ID] {
			seen[p.msg.m.ID] = true
			ids = append(ids, p.msg.m.ID)
		}
	}
	states, err := l.store.CarrierParts(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Error("reading parts in doubt", "err", err)
		}
		l.mu.Lock()
		l.doubt = append(l.doubt, due...)
		l.mu.Unlock()
		return
	}
	resent := 0
	l.mu.Lock()
	for _, p := range due {
		st := sb.PartWritten
		for _, cp := range states[p.msg.m.ID] {
			if cp.Part == p.i {
				st = cp.State
			}
		}
		if p.state != partDoubt {
			continue
		}
		if st != sb.PartWritten {
			p.state, p.recorded = partAnswered, true // a receipt settled it
			if st == sb.PartFailed {
				p.msg.failed = true
			}
			l.forgetIfDone(p.msg)
			continue
		}
		p.state, p.marked = partReady, false // marked again when written again
		l.ready = append(l.ready, p)
		resent++
	}
	l.countDoubt()
	l.mu.Unlock()
	if resent > 0 {
		l.opt.Metrics.Submit(l.cfg.Name, "resent", resent)
		l.log.Warn("SMPP parts in doubt had no receipt: writing them again", "parts", resent)
		signal(l.wake)
	}
}

// takeRef picks the concatenation reference of a long text to to: the
// one its id hashes to (so that parts written again after a restart mostly
// keep theirs), or the next one free for that recipient: not used by a long
// text the link holds, nor by one it let go in the last refRest (its parts
// may still be on their way to the handset). l.mu is held.
func (l *Link) takeRef(id, to string) uint16 {
	now := time.Now()
	used := l.refs[to]
	if used == nil {
		used = map[uint16]time.Time{}
		l.refs[to] = used
	}
	space := 256
	if l.cfg.UDH16 {
		space = 65536
	}
	busy := func(r int) bool {
		t, ok := used[uint16(r)]
		return ok && (t.IsZero() || now.Sub(t) < refRest)
	}
	start := int(concatRef(id)) % space
	ref := start
	for i := 0; i < space && busy(ref); i++ {
		ref = (ref + 1) % space
	}
	if busy(ref) {
		// Every reference is taken (256 long texts to one handset): the
		// one freed the longest ago, else the hash.
		ref = start
		var oldest time.Time
		for r, t := range used {
			if !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
				ref, oldest = int(r), t
			}
		}
	}
	used[uint16(ref)] = time.Time{}
	return uint16(ref)
}

// refRest is how long a long text's reference stays taken after the link
// let the text go.
const refRest = 10 * time.Minute

// dropMsg forgets om, and frees its reference (after refRest). l.mu is
// held.
func (l *Link) dropMsg(om *outMsg) {
	delete(l.msgs, om.m.ID)
	if len(om.parts) > 1 {
		if used := l.refs[om.m.To]; used != nil {
			used[om.ref] = time.Now()
		}
	}
}

// sweepRefs forgets references freed more than refRest ago.
func (l *Link) sweepRefs() {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for to, used := range l.refs {
		for r, t := range used {
			if !t.IsZero() && now.Sub(t) >= refRest {
				delete(used, r)
			}
		}
		if len(used) == 0 {
			delete(l.refs, to)
		}
	}
}

// countDoubt sets the metric of the parts held in doubt. l.mu is held.
func (l *Link) countDoubt() {
	n := 0
	for _, p := range l.doubt {
		if p.state == partDoubt {
			n++
		}
	}
	l.opt.Metrics.InDoubt(l.cfg.Name, n)
}

// forgetIfDone drops om from memory once no part of it waits for
// anything: every part answered, or its message failed and no part is
// outstanding. l.mu is held.
func (l *Link) forgetIfDone(om *outMsg) {
	for _, p := range om.parts {
		if p.state == partOutstanding || (!om.failed && (p.state != partAnswered || !p.recorded)) {
			return
		}
	}
	if l.msgs[om.m.ID] == om {
		l.dropMsg(om)
	}
}

// Held reports how many messages the link holds in memory (for tests).
func (l *Link) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.msgs)
}

// session is one bind: a reader, a writer, and what is outstanding on it.
type session struct {
	l           *Link
	conn        *gosmpp.Connection
	w           *bufio.Writer
	ctrl        chan pdu.PDU // answers and enquire_link, written before parts
	outstanding map[int32]*outPart
	enquire     map[int32]time.Time // enquire_link outstanding
	closed      chan struct{}
	once        sync.Once
	reason      string
}

func newSession(l *Link, conn *gosmpp.Connection) *session {
	return &session{l: l, conn: conn, w: bufio.NewWriterSize(conn, 64<<10), ctrl: make(chan pdu.PDU, 1024),
		outstanding: map[int32]*outPart{}, enquire: map[int32]time.Time{}, closed: make(chan struct{})}
}

func (s *session) close(reason string) {
	s.once.Do(func() {
		s.reason = reason
		close(s.closed)
		s.conn.Close()
	})
}

// send queues a PDU that answers the SMSC (or asks it whether it is
// there); it is dropped when the session has ended.
func (s *session) send(p pdu.PDU) {
	select {
	case s.ctrl <- p:
	case <-s.closed:
	}
}

// run serves the session until it ends and returns why it ended.
func (s *session) run(ctx context.Context) string {
	stop := context.AfterFunc(ctx, func() {
		// Unbind politely, then close.
		s.send(pdu.NewUnbind())
		time.AfterFunc(time.Second, func() { s.close("shutting down") })
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Go(s.readLoop)
	wg.Go(s.writeLoop)
	wg.Go(s.watch)
	wg.Wait()
	return s.reason
}

func (s *session) writeLoop() {
	l := s.l
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	write := func(p pdu.PDU) bool {
		buf := pdu.NewBuffer(make([]byte, 0, 256))
		p.Marshal(buf)
		s.conn.SetWriteTimeout(l.opt.RespTimeout)
		if _, err := s.w.Write(buf.Bytes()); err != nil {
			s.close("write: " + err.Error())
			return false
		}
		return true
	}
	for {
		// Answers first: they release the SMSC's window.
		for more := true; more; {
			select {
			case p := <-s.ctrl:
				if !write(p) {
					return
				}
				if _, ok := p.(*pdu.Unbind); ok {
					s.w.Flush()
				}
			case <-s.closed:
				return
			default:
				more = false
			}
		}
		p, wait := l.take(s, time.Now())
		if p != nil {
			sm, err := l.submitSM(p)
			if err != nil {
				l.mu.Lock()
				p.state, p.msg.failed = partAnswered, true
				l.mu.Unlock()
				l.record(recEvent{ev: sb.CarrierEvent{Kind: sb.CarrierRefused, MessageID: p.msg.m.ID, Part: p.i, Parts: len(p.msg.parts),
					Reason: "the message cannot be written as SMPP: " + err.Error(), At: time.Now()}})
				continue
			}
			l.mu.Lock()
			if l.sess != s {
				l.requeue(p)
				l.mu.Unlock()
				return
			}
			p.seq = sm.SequenceNumber
			s.outstanding[p.seq] = p
			l.mu.Unlock()
			if !write(sm) {
				return
			}
			continue
		}
		if err := s.w.Flush(); err != nil {
			s.close("write: " + err.Error())
			return
		}
		if wait <= 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case <-l.wake:
		case <-timer.C:
		case p := <-s.ctrl:
			if !write(p) {
				return
			}
		case <-s.closed:
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// watch sends enquire_link and ends the session when a request goes
// unanswered for RespTimeout; it also marks parts long outstanding as
// written (in doubt, should the process die now).
func (s *session) watch() {
	l := s.l
	tick := time.NewTicker(min(l.opt.MarkAfter, l.opt.EnquireLink, l.opt.RespTimeout/4))
	defer tick.Stop()
	lastEnquire := time.Now()
	for {
		select {
		case <-s.closed:
			return
		case now := <-tick.C:
			var marks []sb.CarrierEvent
			late := false
			l.mu.Lock()
			for _, p := range s.outstanding {
				if !p.marked && now.Sub(p.writtenAt) >= l.opt.MarkAfter {
					p.marked = true
					marks = append(marks, sb.CarrierEvent{Kind: sb.CarrierWritten, MessageID: p.msg.m.ID, Part: p.i, Parts: len(p.msg.parts), At: p.writtenAt})
				}
				if now.Sub(p.writtenAt) > l.opt.RespTimeout {
					late = true
				}
			}
			for _, at := range s.enquire {
				if now.Sub(at) > l.opt.RespTimeout {
					late = true
				}
			}
			l.mu.Unlock()
			if len(marks) > 0 {
				evs := make([]recEvent, len(marks))
				for i, m := range marks {
					evs[i] = recEvent{ev: m}
				}
				l.record(evs...)
			}
			if late {
				s.close(fmt.Sprintf("a request went unanswered for %v", l.opt.RespTimeout))
				return
			}
			if now.Sub(lastEnquire) >= l.opt.EnquireLink {
				lastEnquire = now
				e := pdu.NewEnquireLink()
				l.mu.Lock()
				s.enquire[e.GetSequenceNumber()] = now
				l.mu.Unlock()
				s.send(e)
			}
		}
	}
}

func (s *session) readLoop() {
	l := s.l
	for {
		s.conn.SetReadTimeout(l.opt.EnquireLink + l.opt.RespTimeout)
		p, err := pdu.Parse(s.conn)
		if err != nil {
			select {
			case <-s.closed:
			default:
				s.close("read: " + err.Error())
			}
			return
		}
		switch p := p.(type) {
		case *pdu.SubmitSMResp:
			l.mu.Lock()
			op := s.outstanding[p.SequenceNumber]
			delete(s.outstanding, p.SequenceNumber)
			l.mu.Unlock()
			if op != nil {
				l.answered(s, op, p.CommandStatus, normID(p.MessageID), false)
			}
		case *pdu.GenericNack:
			l.mu.Lock()
			op := s.outstanding[p.SequenceNumber]
			delete(s.outstanding, p.SequenceNumber)
			delete(s.enquire, p.SequenceNumber)
			l.mu.Unlock()
			if op != nil {
				l.answered(s, op, p.CommandStatus, "", true)
			}
		case *pdu.DeliverSM:
			l.deliverSM(s, p)
		case *pdu.EnquireLink:
			s.send(p.GetResponse())
		case *pdu.EnquireLinkResp:
			l.mu.Lock()
			delete(s.enquire, p.SequenceNumber)
			l.mu.Unlock()
		case *pdu.Unbind:
			s.send(p.GetResponse())
			time.AfterFunc(100*time.Millisecond, func() { s.close("the SMSC unbound") })
		case *pdu.UnbindResp:
			s.close("unbound")
			return
		case *pdu.AlertNotification:
		default:
			if p.CanResponse() { // a request this ESME does not serve (data_sm, ...)
				nack := pdu.NewGenericNack().(*pdu.GenericNack)
				nack.SetSequenceNumber(p.GetSequenceNumber())
				nack.CommandStatus = data.ESME_RINVCMDID
				s.send(nack)
			}
		}
	}
}
