// Package smsc is a small SMSC, an SMPP 3.4 server, built on gosmpp's PDU
// package, for the tests and the `smpp` benchmark: it accepts transceiver
// binds, answers submit_sm (or not, or with an error, as a test decides),
// sends delivery receipts and mobile-originated texts as deliver_sm, keeps
// them until a bind acknowledges them (store and forward, as SMSCs do), and
// records everything it received. It is not a production SMSC.
package smsc

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"
)

// Submit is a submit_sm the SMSC received.
type Submit struct {
	ID         string // the message_id it gave (empty when it did not accept it)
	Seq        int32
	From, To   string // as written, without "+"
	Coding     byte
	EsmClass   byte
	Registered byte
	Text       string // decoded
	// Total, Part and Ref are the concatenation header of a part of a long
	// text (Total 0 for a text of one part).
	Total, Part, Ref int
	// Ref16 is set when the header had a 16-bit reference (IEI 0x08).
	Ref16 bool
	// The addresses' type of number and numbering plan.
	SrcTON, SrcNPI, DstTON, DstNPI byte
	At                             time.Time
	Bind                           int // which bind (1 for the first) it came on
}

// Action is what the SMSC does with a submit_sm.
type Action struct {
	// Status answers with this command_status (0: accepted).
	Status data.CommandStatusType
	// Delay answers after this long (after Wait is closed, when set).
	Delay time.Duration
	Wait  <-chan struct{}
	// NoAnswer never answers.
	NoAnswer bool
	// Drop closes the bind instead of answering: the SMSC has the message
	// (its receipt follows on the next bind); Lose closes it as if the
	// submit_sm never arrived.
	Drop, Lose bool
	// Stat and Err are those of the receipt (default DELIVRD, 000);
	// NoReceipt sends none. TLVStat, when set, is the receipt's
	// message_state TLV while its text says Stat (an SMSC whose two
	// disagree: the TLV is the one to believe).
	Stat, Err, TLVStat string
	NoReceipt          bool
	// ReceiptWait, when set, holds the receipt until it is closed.
	ReceiptWait <-chan struct{}
}

// BindAction is what the SMSC does with a bind_transceiver.
type BindAction struct {
	// Refuse answers with this command_status instead of the checks of
	// SystemID and Password; HeaderOnly writes that answer as a header
	// alone, without a body, as SMPP 3.4 allows for a refusal.
	Refuse     data.CommandStatusType
	HeaderOnly bool
	// Drop closes the connection right after an accepting bind_resp;
	// Unbind sends an unbind instead.
	Drop, Unbind bool
}

// Server is the SMSC. Set its fields before Start.
type Server struct {
	// OnBind decides what to do with the n-th bind_transceiver (n from 1;
	// nil: check SystemID and Password, and serve).
	OnBind func(n int) BindAction
	// NextID gives the message_id of the n-th accepted submit_sm (n from
	// 1; default: n+0x1000 in upper-case hex). An SMSC that reuses ids
	// returns one it gave before.
	NextID func(n uint64) string
	// ReceiptID writes a receipt's id as the SMSC puts it in the text and
	// in receipted_message_id (default: as given; see DecimalReceiptIDs).
	// E.g. PadDecimal for the zero-padded 10-digit form of SMPP 3.4
	// Appendix B.
	ReceiptID func(id string) string
	// StateOnlyInTLV leaves stat: and err: out of a receipt's text: the
	// state is only in the message_state TLV (implies ReceiptTLVs).
	StateOnlyInTLV bool
	// TLS, when set, serves SMPP over TLS.
	TLS *tls.Config
	// Log, when set, is told every PDU the SMSC reads ("<") and writes
	// (">").
	Log func(dir string, p pdu.PDU)

	SystemID, Password string
	// OnSubmit decides what to do with each submit_sm (nil: accept it and
	// send a DELIVRD receipt). SetOnSubmit changes it while serving.
	OnSubmit func(*Submit) Action
	// OnAnswer is called as the SMSC answers an accepted submit_sm.
	OnAnswer func(s *Submit, at time.Time)
	// ReceiptTLVs adds receipted_message_id and message_state to receipts
	// (the text is always there).
	ReceiptTLVs bool
	// DecimalReceiptIDs writes a receipt's id in decimal while the
	// submit_sm_resp gave it in hex, as some SMSCs do.
	DecimalReceiptIDs bool

	ln       net.Listener
	nextID   atomic.Uint64
	binds    atomic.Int64
	bindReqs atomic.Int64

	mu       sync.Mutex
	conns    map[*conn]bool
	submits  []*Submit
	outbox   []*deliver // not yet acknowledged, not on any bind
	maxOut   int
	closed   bool
	wakeSend chan struct{}
}

type deliver struct {
	p    *pdu.DeliverSM // as made; every bind is sent a numbered copy
	seq  int32
	on   *conn
	what string
	sys  string // a receipt goes to a bind of the system_id that submitted it
}

// Start listens on 127.0.0.1 (a random port).
func (s *Server) Start() error { return s.StartAt("127.0.0.1:0") }

// StartAt listens on addr (an SMSC that comes back where it was).
func (s *Server) StartAt(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if s.TLS != nil {
		ln = tls.NewListener(ln, s.TLS)
	}
	s.ln = ln
	s.conns = map[*conn]bool{}
	s.wakeSend = make(chan struct{}, 1)
	go s.accept()
	go s.dispatch()
	return nil
}

// Addr is the SMSC's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the SMSC and closes every bind.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[*conn]bool{}
	s.mu.Unlock()
	s.ln.Close()
	for c := range conns {
		c.close()
	}
	select {
	case s.wakeSend <- struct{}{}:
	default:
	}
}

// DropAll closes every bind at once, as an SMSC restart or a network cut
// would.
func (s *Server) DropAll() {
	s.mu.Lock()
	var cs []*conn
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.close()
	}
}

// SetOnSubmit replaces OnSubmit.
func (s *Server) SetOnSubmit(fn func(*Submit) Action) {
	s.mu.Lock()
	s.OnSubmit = fn
	s.mu.Unlock()
}

// MaxOutstanding is the most submit_sm one bind had unanswered at once.
func (s *Server) MaxOutstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxOut
}

// ResetMaxOutstanding starts counting MaxOutstanding again.
func (s *Server) ResetMaxOutstanding() {
	s.mu.Lock()
	s.maxOut = 0
	s.mu.Unlock()
}

// Binds is how many binds were made.
func (s *Server) Binds() int { return int(s.binds.Load()) }

// Bound reports how many binds are open.
func (s *Server) Bound() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if c.bound.Load() {
			n++
		}
	}
	return n
}

// Submits returns a copy of every submit_sm received, in order.
func (s *Server) Submits() []Submit {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Submit, len(s.submits))
	for i, sub := range s.submits {
		out[i] = *sub
	}
	return out
}

// Find returns the first submit_sm received with text, if any.
func (s *Server) Find(text string) (Submit, bool) {
	for _, sub := range s.Submits() {
		if sub.Text == text {
			return sub, true
		}
	}
	return Submit{}, false
}

// SubmitCount is how many submit_sm were received.
func (s *Server) SubmitCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.submits)
}

// Pending is how many deliver_sm (receipts, texts) wait for an
// acknowledgement.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.outbox)
	for c := range s.conns {
		c.mu.Lock()
		n += len(c.inflight)
		c.mu.Unlock()
	}
	return n
}

func (s *Server) accept() {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		c := &conn{srv: s, nc: nc, w: bufio.NewWriterSize(nc, 64<<10), out: make(chan outItem, 4096), done: make(chan struct{}),
			inflight: map[int32]*deliver{}}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		go c.writeLoop()
		go c.readLoop()
	}
}

// conn is one client connection.
type conn struct {
	srv   *Server
	nc    net.Conn
	w     *bufio.Writer
	out   chan outItem
	done  chan struct{}
	once  sync.Once
	bound atomic.Bool
	n     int
	sys   string

	mu         sync.Mutex
	inflight   map[int32]*deliver
	unanswered int // submit_sm not answered yet
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
		s := c.srv
		s.mu.Lock()
		delete(s.conns, c)
		c.mu.Lock()
		for _, d := range c.inflight { // unacknowledged: sent again on another bind
			d.on = nil
			s.outbox = append(s.outbox, d)
		}
		c.inflight = map[int32]*deliver{}
		c.mu.Unlock()
		s.mu.Unlock()
		s.kick()
	})
}

// PadDecimal writes a hex id as SMPP 3.4 Appendix B's zero-padded
// 10-digit decimal ("1A2B" as "0000006699"), for Server.ReceiptID.
func PadDecimal(id string) string {
	var v uint64
	if _, err := fmt.Sscanf(id, "%x", &v); err != nil {
		return id
	}
	return fmt.Sprintf("%010d", v)
}

// headerOnly is the 16-octet header of p, alone.
func headerOnly(p pdu.PDU) []byte {
	h := p.GetHeader()
	b := make([]byte, 16)
	binary.BigEndian.PutUint32(b, 16)
	binary.BigEndian.PutUint32(b[4:], uint32(h.CommandID))
	binary.BigEndian.PutUint32(b[8:], uint32(h.CommandStatus))
	binary.BigEndian.PutUint32(b[12:], uint32(h.SequenceNumber))
	return b
}

func (c *conn) log(dir string, p pdu.PDU) {
	if c.srv.Log != nil {
		c.srv.Log(dir, p)
	}
}

// sendRaw writes bytes as they are (a header-only PDU), after what is
// queued.
func (c *conn) sendRaw(b []byte) bool {
	select {
	case c.out <- outItem{raw: b}:
		return true
	case <-c.done:
		return false
	}
}

// outItem is a PDU to write, or bytes to write as they are.
type outItem struct {
	p   pdu.PDU
	raw []byte
}

func (o outItem) bytes() []byte {
	if o.raw != nil {
		return o.raw
	}
	buf := pdu.NewBuffer(make([]byte, 0, 128))
	o.p.Marshal(buf)
	return buf.Bytes()
}

func (c *conn) send(p pdu.PDU) bool {
	c.log(">", p)
	select {
	case c.out <- outItem{p: p}:
		return true
	case <-c.done:
		return false
	}
}

func (c *conn) writeLoop() {
	for {
		var p outItem
		select {
		case p = <-c.out:
		case <-c.done:
			return
		}
		for {
			if _, err := c.w.Write(p.bytes()); err != nil {
				c.close()
				return
			}
			select {
			case p = <-c.out:
				continue
			default:
			}
			break
		}
		if err := c.w.Flush(); err != nil {
			c.close()
			return
		}
	}
}

func (c *conn) readLoop() {
	s := c.srv
	r := bufio.NewReaderSize(c.nc, 64<<10)
	defer c.close()
	for {
		p, err := pdu.Parse(r)
		if err != nil {
			return
		}
		c.log("<", p)
		switch p := p.(type) {
		case *pdu.BindRequest:
			var act BindAction
			n := int(s.bindReqs.Add(1))
			if s.OnBind != nil {
				act = s.OnBind(n)
			}
			resp := pdu.NewBindResp(*p)
			resp.SystemID = "smsc"
			switch {
			case act.Refuse != data.ESME_ROK:
				resp.CommandStatus = act.Refuse
			case p.BindingType != pdu.Transceiver:
				resp.CommandStatus = data.ESME_RINVCMDID
			case (s.SystemID != "" && p.SystemID != s.SystemID) || (s.Password != "" && p.Password != s.Password):
				resp.CommandStatus = data.ESME_RINVPASWD
			}
			if resp.CommandStatus != data.ESME_ROK && act.HeaderOnly {
				c.log(">", resp)
				c.sendRaw(headerOnly(resp))
			} else {
				c.send(resp)
			}
			if resp.CommandStatus != data.ESME_ROK {
				time.Sleep(20 * time.Millisecond)
				return
			}
			c.n = int(s.binds.Add(1))
			c.sys = p.SystemID
			if act.Drop {
				time.Sleep(20 * time.Millisecond)
				return
			}
			if act.Unbind {
				c.send(pdu.NewUnbind())
				continue // the ESME answers unbind_resp, then the SMSC closes
			}
			c.bound.Store(true)
			s.kick()
		case *pdu.SubmitSM:
			if !c.bound.Load() {
				r := p.GetResponse()
				r.(*pdu.SubmitSMResp).CommandStatus = data.ESME_RINVBNDSTS
				c.send(r)
				continue
			}
			if !c.submit(p) {
				return
			}
		case *pdu.DeliverSMResp:
			c.mu.Lock()
			d := c.inflight[p.SequenceNumber]
			delete(c.inflight, p.SequenceNumber)
			c.mu.Unlock()
			if d != nil && p.CommandStatus != data.ESME_ROK {
				s.queue(d) // refused: again later
			}
		case *pdu.EnquireLink:
			c.send(p.GetResponse())
		case *pdu.Unbind:
			c.send(p.GetResponse())
			time.Sleep(20 * time.Millisecond)
			return
		case *pdu.UnbindResp:
			return
		case *pdu.EnquireLinkResp, *pdu.GenericNack:
		default:
			if p.CanResponse() {
				nack := pdu.NewGenericNack().(*pdu.GenericNack)
				nack.SetSequenceNumber(p.GetSequenceNumber())
				nack.CommandStatus = data.ESME_RINVCMDID
				c.send(nack)
			}
		}
	}
}

// submit handles a submit_sm; false ends the connection.
func (c *conn) submit(p *pdu.SubmitSM) bool {
	s := c.srv
	sub := &Submit{Seq: p.SequenceNumber, From: p.SourceAddr.Address(), To: p.DestAddr.Address(), Coding: p.Message.Encoding().DataCoding(),
		EsmClass: p.EsmClass, Registered: p.RegisteredDelivery, At: time.Now(), Bind: c.n}
	sub.Text, _ = p.Message.GetMessage()
	if total, part, ref, ok := p.Message.UDH().GetConcatInfo(); ok {
		sub.Total, sub.Part, sub.Ref = int(total), int(part), int(ref)
	} else if ie, ok := p.Message.UDH().FindInfoElement(0x08); ok && len(ie.Data) == 4 {
		sub.Total, sub.Part, sub.Ref, sub.Ref16 = int(ie.Data[2]), int(ie.Data[3]), int(ie.Data[0])<<8|int(ie.Data[1]), true
	}
	sub.SrcTON, sub.SrcNPI, sub.DstTON, sub.DstNPI = p.SourceAddr.Ton(), p.SourceAddr.Npi(), p.DestAddr.Ton(), p.DestAddr.Npi()
	act := Action{}
	s.mu.Lock()
	on := s.OnSubmit
	s.mu.Unlock()
	if on != nil {
		act = on(sub)
	}
	if act.Lose {
		return false
	}
	if act.Status == data.ESME_ROK {
		n := s.nextID.Add(1)
		if s.NextID != nil {
			sub.ID = s.NextID(n)
		} else {
			sub.ID = fmt.Sprintf("%X", n+0x1000)
		}
	}
	s.mu.Lock()
	s.submits = append(s.submits, sub)
	c.mu.Lock()
	c.unanswered++
	s.maxOut = max(s.maxOut, c.unanswered)
	c.mu.Unlock()
	s.mu.Unlock()
	// The receipt follows the answer (or, when the answer is lost, the
	// moment the SMSC took the message).
	receipt := func() {
		if sub.ID != "" && !act.NoReceipt && sub.Registered&0x03 != 0 {
			stat, errc := act.Stat, act.Err
			if stat == "" {
				stat = "DELIVRD"
			}
			if errc == "" {
				errc = "000"
			}
			d := &deliver{p: s.receipt(sub, stat, errc, act.TLVStat), what: "receipt", sys: c.sys}
			if act.ReceiptWait != nil {
				go func() { <-act.ReceiptWait; s.queue(d) }()
			} else {
				s.queue(d)
			}
		}
	}
	if act.Drop {
		receipt()
		return false
	}
	if act.NoAnswer {
		receipt()
		return true
	}
	resp := p.GetResponse().(*pdu.SubmitSMResp)
	resp.CommandStatus = act.Status
	resp.MessageID = sub.ID
	answer := func() {
		if s.OnAnswer != nil && sub.ID != "" {
			s.OnAnswer(sub, time.Now())
		}
		c.mu.Lock()
		c.unanswered--
		c.mu.Unlock()
		c.send(resp)
		receipt()
	}
	switch {
	case act.Wait != nil:
		go func() {
			<-act.Wait
			time.Sleep(act.Delay)
			answer()
		}()
	case act.Delay > 0:
		time.AfterFunc(act.Delay, answer)
	default:
		answer()
	}
	return true
}

var stateOf = map[string]byte{"ENROUTE": 1, "DELIVRD": 2, "EXPIRED": 3, "DELETED": 4, "UNDELIV": 5, "ACCEPTD": 6, "UNKNOWN": 7, "REJECTD": 8}

// receipt builds the delivery receipt of sub (SMPP 3.4 Appendix B).
func (s *Server) receipt(sub *Submit, stat, errc, tlvStat string) *pdu.DeliverSM {
	d := pdu.NewDeliverSM().(*pdu.DeliverSM)
	d.SourceAddr, _ = pdu.NewAddressWithTonNpiAddr(1, 1, sub.To)
	d.DestAddr, _ = pdu.NewAddressWithTonNpiAddr(1, 1, sub.From)
	d.EsmClass = 0x04
	id := sub.ID
	if s.DecimalReceiptIDs {
		var v uint64
		fmt.Sscanf(sub.ID, "%X", &v)
		id = fmt.Sprint(v)
	}
	if s.ReceiptID != nil {
		id = s.ReceiptID(id)
	}
	dlvrd := "000"
	if stat == "DELIVRD" {
		dlvrd = "001"
	}
	now := time.Now().UTC().Format("0601021504")
	text := []rune(sub.Text)
	if len(text) > 20 {
		text = text[:20]
	}
	body := fmt.Sprintf("id:%s sub:001 dlvrd:%s submit date:%s done date:%s stat:%s err:%s text:%s", id, dlvrd, now, now, stat, errc, string(text))
	if s.StateOnlyInTLV {
		body = fmt.Sprintf("id:%s sub:001 dlvrd:%s submit date:%s done date:%s text:%s", id, dlvrd, now, now, string(text))
	}
	var sm pdu.ShortMessage
	enc := data.GSM7BIT
	if len(data.ValidateGSM7String(body)) > 0 {
		enc = data.UCS2
	}
	b, _ := enc.Encode(body)
	if len(b) > 254 {
		b = b[:254]
	}
	sm.SetMessageDataWithEncoding(b, enc)
	d.Message = sm
	if tlvStat == "" {
		tlvStat = stat
	}
	if s.ReceiptTLVs || s.StateOnlyInTLV || tlvStat != stat {
		d.RegisterOptionalParam(pdu.Field{Tag: pdu.TagReceiptedMessageID, Data: append([]byte(id), 0)})
		d.RegisterOptionalParam(pdu.Field{Tag: pdu.TagMessageStateOption, Data: []byte{stateOf[tlvStat]}})
	}
	return d
}

// SendMO sends a text from a handset (from, to as E.164) to the ESME: one
// deliver_sm, or the parts of a long text with a concatenation header, in
// GSM-7 or UCS-2. It is sent again until a bind acknowledges it.
func (s *Server) SendMO(from, to, text string, ref uint8) {
	gsm := len(data.ValidateGSM7String(text)) == 0
	var enc data.Encoding = data.UCS2
	single, part := 70, 67
	if gsm {
		enc, single, part = data.GSM7BIT, 160, 153
	}
	units := func(r rune) int {
		if gsm {
			if data.IsEscapeChar(r) {
				return 2
			}
			return 1
		}
		return max(utf16.RuneLen(r), 1)
	}
	runes := []rune(text)
	total := 0
	for _, r := range runes {
		total += units(r)
	}
	var cuts []string
	if total <= single {
		cuts = []string{text}
	} else {
		start, n := 0, 0
		for i, r := range runes {
			if n+units(r) > part {
				cuts = append(cuts, string(runes[start:i]))
				start, n = i, 0
			}
			n += units(r)
		}
		cuts = append(cuts, string(runes[start:]))
	}
	for i, cut := range cuts {
		d := pdu.NewDeliverSM().(*pdu.DeliverSM)
		d.SourceAddr, _ = pdu.NewAddressWithTonNpiAddr(1, 1, strings.TrimPrefix(from, "+"))
		d.DestAddr, _ = pdu.NewAddressWithTonNpiAddr(1, 1, strings.TrimPrefix(to, "+"))
		b, _ := enc.Encode(cut)
		var sm pdu.ShortMessage
		sm.SetMessageDataWithEncoding(b, enc)
		if len(cuts) > 1 {
			d.EsmClass = data.SM_UDH_GSM
			sm.SetUDH(pdu.UDH{pdu.NewIEConcatMessage(uint8(len(cuts)), uint8(i+1), ref)})
		}
		d.Message = sm
		s.queue(&deliver{p: d, what: "mo"})
	}
}

// SendMOPart sends one part (part of total, with reference ref) of a long
// text from a handset, its text in message_payload when payload is set
// (a part longer than a short_message holds), else in short_message
// (GSM-7). It is sent again until a bind acknowledges it.
func (s *Server) SendMOPart(from, to, text string, ref, total, part int, payload bool) {
	d := pdu.NewDeliverSM().(*pdu.DeliverSM)
	d.SourceAddr, _ = pdu.NewAddressWithTonNpiAddr(1, 1, strings.TrimPrefix(from, "+"))
	d.DestAddr, _ = pdu.NewAddressWithTonNpiAddr(1, 1, strings.TrimPrefix(to, "+"))
	var sm pdu.ShortMessage
	b, _ := data.GSM7BIT.Encode(text)
	if payload {
		sm.SetMessageDataWithEncoding(nil, data.GSM7BIT)
		d.RegisterOptionalParam(pdu.Field{Tag: pdu.TagMessagePayload, Data: b})
	} else {
		sm.SetMessageDataWithEncoding(b, data.GSM7BIT)
	}
	if total > 1 {
		d.EsmClass = data.SM_UDH_GSM
		sm.SetUDH(pdu.UDH{pdu.NewIEConcatMessage(uint8(total), uint8(part), uint8(ref))})
	}
	d.Message = sm
	s.queue(&deliver{p: d, what: "mo"})
}

func (s *Server) queue(d *deliver) {
	s.mu.Lock()
	d.on = nil
	s.outbox = append(s.outbox, d)
	s.mu.Unlock()
	s.kick()
}

func (s *Server) kick() {
	select {
	case s.wakeSend <- struct{}{}:
	default:
	}
}

// dispatch sends what waits in the outbox on a bound connection (a
// receipt on one of the system_id that submitted its message).
func (s *Server) dispatch() {
	for range s.wakeSend {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		var bound []*conn
		for c := range s.conns {
			if c.bound.Load() {
				bound = append(bound, c)
			}
		}
		byConn := map[*conn][]*pdu.DeliverSM{}
		var keep []*deliver
		for _, d := range s.outbox {
			var target *conn
			for _, c := range bound {
				if d.sys == "" || c.sys == d.sys {
					target = c
					break
				}
			}
			if target == nil {
				keep = append(keep, d)
				continue
			}
			// Each bind gets its own numbered copy: a message sent again
			// after its bind dropped may still be in that bind's writer,
			// whose Marshal writes the copy's header; d.p itself is never
			// handed to a writer.
			p := *d.p
			p.AssignSequenceNumber()
			target.mu.Lock()
			d.seq, d.on = p.SequenceNumber, target
			target.inflight[d.seq] = d
			target.mu.Unlock()
			byConn[target] = append(byConn[target], &p)
		}
		s.outbox = keep
		s.mu.Unlock()
		for c, ps := range byConn {
			for _, p := range ps {
				if !c.send(p) {
					break // closed: close() moved the in-flight ones back
				}
			}
		}
	}
}
