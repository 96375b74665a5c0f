package smpp

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/linxGnu/gosmpp/data"
	"github.com/linxGnu/gosmpp/pdu"

	sb "github.com/switchboard/switchboard"
)

// ackRef names a deliver_sm to answer once what it reported is on disk.
type ackRef struct {
	s   *session
	seq int32
}

// recEvent is an event for the store, with the deliver_sm it answers.
type recEvent struct {
	ev   sb.CarrierEvent
	acks []ackRef
}

// esm_class message types of a deliver_sm (SMPP 3.4 5.2.12, bits 5-2).
const (
	esmTypeMask         = 0x3C
	esmReceipt          = 0x04 // SMSC delivery receipt
	esmIntermediateNote = 0x20 // intermediate delivery notification
)

// deliverSM handles a deliver_sm: a delivery receipt, or a text a
// recipient sent. It is answered once recorded.
func (l *Link) deliverSM(s *session, p *pdu.DeliverSM) {
	ack := ackRef{s: s, seq: p.SequenceNumber}
	text := messageText(p)
	now := time.Now().UTC()
	switch p.EsmClass & esmTypeMask {
	case esmReceipt, esmIntermediateNote:
		r := receiptOf(p, text)
		state, reason, known := r.Outcome()
		if r.ID == "" {
			l.log.Warn("SMPP receipt without a message id: ignored", "stat", r.Stat)
			s.send(deliverResp(p.SequenceNumber))
			return
		}
		if !known {
			l.log.Warn("SMPP receipt with a stat SMPP 3.4 does not define: kept as not final", "stat", r.Stat, "id", r.ID)
		}
		l.opt.Metrics.Receipt(l.cfg.Name, state)
		id := normID(r.ID)
		alts := altIDs(id)
		if raw := strings.TrimSpace(r.ID); raw != id {
			alts = append(alts, raw) // as recorded before ids were normalised
		}
		l.record(recEvent{ev: sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: id, AltIDs: alts, AltLinks: l.siblings, State: state, Reason: reason,
			From: address(p.DestAddr), To: address(p.SourceAddr), Text: r.Text, At: now}, acks: []ackRef{ack}})
	default:
		from, to := address(p.SourceAddr), address(p.DestAddr)
		if total, seq, ref, ok := concatInfo(p); ok && total > 1 {
			l.concatPart(concatKey{from: from, to: to, ref: ref, total: total}, seq, text, ack)
			return
		}
		l.inbound(from, to, text, now, ack)
	}
}

// receiptOf reads a receipt: its text (SMPP 3.4 Appendix B), then the
// TLVs, which take precedence where the SMSC sends them:
// receipted_message_id, message_state and network_error_code.
func receiptOf(p *pdu.DeliverSM, text string) Receipt {
	r, _ := ParseReceipt(text)
	if f, ok := p.OptionalParameters[pdu.TagReceiptedMessageID]; ok {
		if id := strings.TrimRight(string(f.Data), "\x00"); id != "" {
			r.ID = id
		}
	}
	if f, ok := p.OptionalParameters[pdu.TagMessageStateOption]; ok && len(f.Data) == 1 {
		if st := statOfState(f.Data[0]); st != "" {
			r.Stat = st
		}
	}
	if f, ok := p.OptionalParameters[pdu.TagNetworkErrorCode]; ok && len(f.Data) == 3 {
		r.Err = fmt.Sprintf("%03d", binary.BigEndian.Uint16(f.Data[1:]))
	}
	return r
}

func (l *Link) inbound(from, to, text string, at time.Time, acks ...ackRef) {
	text = truncateText(text, MaxInboundBody)
	l.opt.Metrics.Inbound(l.cfg.Name)
	l.record(recEvent{ev: sb.CarrierEvent{Kind: sb.CarrierInbound, At: at,
		Inbound: &sb.Message{From: from, To: to, Body: text, CreatedAt: at}}, acks: acks})
}

func deliverResp(seq int32) pdu.PDU {
	r := pdu.NewDeliverSMResp()
	r.SetSequenceNumber(seq)
	return r
}

// messageText decodes the text of a deliver_sm: its short_message, or its
// message_payload when short_message is empty, in its data_coding.
func messageText(p *pdu.DeliverSM) string {
	text, err := p.Message.GetMessage()
	if err == nil && text != "" {
		return text
	}
	if f, ok := p.OptionalParameters[pdu.TagMessagePayload]; ok {
		enc := p.Message.Encoding()
		if enc == nil {
			enc = data.GSM7BIT
		}
		if t, err := enc.Decode(f.Data); err == nil {
			return t
		}
	}
	return text
}

// address turns an SMPP address into E.164 where it is a number: SMSCs
// give numbers as digits, with TON international or unknown. An
// alphanumeric sender stays as it is.
func address(a pdu.Address) string {
	s := strings.TrimSpace(a.Address())
	digits := strings.TrimPrefix(s, "+")
	if digits == "" || a.Ton() == data.GSM_TON_ALPHANUMERIC {
		return s
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return s
		}
	}
	return "+" + digits
}

// concatInfo reads the concatenation header (8- or 16-bit reference) of a
// long text's part.
func concatInfo(p *pdu.DeliverSM) (total, seq int, ref uint16, ok bool) {
	if p.EsmClass&data.SM_UDH_GSM == 0 {
		return 0, 0, 0, false
	}
	udh := p.Message.UDH()
	if ie, found := udh.FindInfoElement(0x00); found && len(ie.Data) == 3 {
		return int(ie.Data[1]), int(ie.Data[2]), uint16(ie.Data[0]), true
	}
	if ie, found := udh.FindInfoElement(0x08); found && len(ie.Data) == 4 {
		return int(ie.Data[2]), int(ie.Data[3]), binary.BigEndian.Uint16(ie.Data[:2]), true
	}
	return 0, 0, 0, false
}

type concatKey struct {
	from, to string
	ref      uint16
	total    int
}

type concatMsg struct {
	parts map[int]string
	acks  []ackRef
	first time.Time
}

// MaxInboundBody bounds the text of an inbound message, in characters, as
// for the android phones: a longer one is cut.
const MaxInboundBody = 10 * sb.MaxBodyLength

// concatPart keeps one part of a long inbound text; once every part is
// there, the whole text is recorded (and every part answered). The parts
// waiting are bounded per link (Options.ConcatMaxParts, ConcatMaxBytes):
// past either, the oldest unfinished texts are stored with the parts that
// came.
func (l *Link) concatPart(k concatKey, seq int, text string, ack ackRef) {
	if seq < 1 || seq > k.total {
		l.log.Warn("a part of a long inbound text with a part number out of range: stored alone", "part", seq, "of", k.total)
		l.inbound(k.from, k.to, text, time.Now().UTC(), ack)
		return
	}
	text = truncateText(text, MaxInboundBody)
	l.mu.Lock()
	c := l.concat[k]
	if c == nil {
		c = &concatMsg{parts: map[int]string{}, first: time.Now()}
		l.concat[k] = c
	}
	if old, dup := c.parts[seq]; dup {
		l.concatBytes -= len(old)
		l.concatParts--
	}
	c.parts[seq] = text
	c.acks = append(c.acks, ack)
	l.concatBytes += len(text)
	l.concatParts++
	var out []concatDone
	if len(c.parts) >= k.total {
		out = append(out, concatDone{k, c})
		l.dropConcat(k, c)
	}
	for l.concatParts > l.opt.ConcatMaxParts || l.concatBytes > l.opt.ConcatMaxBytes {
		var oldest concatKey
		var oc *concatMsg
		for k2, c2 := range l.concat {
			if oc == nil || c2.first.Before(oc.first) {
				oldest, oc = k2, c2
			}
		}
		if oc == nil {
			break
		}
		out = append(out, concatDone{oldest, oc})
		l.dropConcat(oldest, oc)
	}
	l.mu.Unlock()
	for _, d := range out {
		if len(d.c.parts) < d.k.total {
			l.log.Warn("a long inbound text is incomplete, and the link holds as many waiting parts as it may: stored with the parts that came",
				"parts", len(d.c.parts), "of", d.k.total)
		}
		l.inbound(d.k.from, d.k.to, d.c.join(), d.c.first.UTC(), d.c.acks...)
	}
}

type concatDone struct {
	k concatKey
	c *concatMsg
}

// dropConcat forgets a long text being put together. l.mu is held.
func (l *Link) dropConcat(k concatKey, c *concatMsg) {
	delete(l.concat, k)
	for _, p := range c.parts {
		l.concatBytes -= len(p)
		l.concatParts--
	}
}

// truncateText cuts s to at most n characters.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

func (c *concatMsg) join() string {
	seqs := make([]int, 0, len(c.parts))
	for s := range c.parts {
		seqs = append(seqs, s)
	}
	sort.Ints(seqs)
	var b strings.Builder
	for _, s := range seqs {
		b.WriteString(c.parts[s])
	}
	return b.String()
}

// flushConcat records the long texts whose parts stopped coming (all of
// them when all is set) with the parts that came.
func (l *Link) flushConcat(all bool) {
	now := time.Now()
	type done struct {
		k concatKey
		c *concatMsg
	}
	var out []done
	l.mu.Lock()
	for k, c := range l.concat {
		if all || now.Sub(c.first) > l.opt.ConcatTimeout {
			out = append(out, done{k, c})
			l.dropConcat(k, c)
		}
	}
	l.mu.Unlock()
	for _, d := range out {
		l.log.Warn("a long inbound text is incomplete: stored with the parts that came", "parts", len(d.c.parts), "of", d.k.total)
		l.inbound(d.k.from, d.k.to, d.c.join(), d.c.first.UTC(), d.c.acks...)
	}
}

// record queues events for the recorder.
func (l *Link) record(evs ...recEvent) {
	if len(evs) == 0 {
		return
	}
	l.recMu.Lock()
	l.pending = append(l.pending, evs...)
	l.recMu.Unlock()
	signal(l.recWake)
}

// recordBatch is the most events one transaction records.
const recordBatch = 2000

// recorder writes what the link learns to the store, in order and in
// batches, then answers the deliver_sm that reported it and forgets the
// messages it is done with.
func (l *Link) recorder(ctx context.Context) {
	for {
		select {
		case <-l.recWake:
		case <-ctx.Done():
		}
		for {
			l.recMu.Lock()
			n := min(len(l.pending), recordBatch)
			batch := append([]recEvent(nil), l.pending[:n]...)
			l.pending = l.pending[n:]
			if len(l.pending) == 0 {
				l.pending = nil
			}
			l.recMu.Unlock()
			if n == 0 {
				break
			}
			l.commit(ctx, batch)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (l *Link) commit(ctx context.Context, batch []recEvent) {
	evs := make([]sb.CarrierEvent, len(batch))
	for i, e := range batch {
		evs[i] = e.ev
	}
	var res sb.CarrierResult
	for attempt := 0; ; attempt++ {
		var err error
		res, err = l.store.RecordCarrier(context.WithoutCancel(ctx), l.cfg.Name, evs)
		if err == nil {
			break
		}
		if ctx.Err() != nil && attempt >= 3 {
			// Shutting down: unanswered, the SMSC sends the receipts and
			// texts again; the parts stay in doubt after the restart.
			l.log.Error("recording what the SMPP link learned failed while shutting down", "err", err, "events", len(evs))
			return
		}
		l.log.Error("recording what the SMPP link learned; retrying", "err", err)
		time.Sleep(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second))
	}
	for _, e := range batch {
		for _, a := range e.acks {
			a.s.send(deliverResp(a.seq))
		}
	}
	l.mu.Lock()
	for _, ref := range res.Adopted {
		if om := l.msgs[ref.MessageID]; om != nil && ref.Part < len(om.parts) {
			if p := om.parts[ref.Part]; p.state == partDoubt {
				p.state, p.recorded = partAnswered, true
			}
			l.forgetIfDone(om)
		}
	}
	if len(res.Adopted) > 0 {
		l.countDoubt()
	}
	for _, e := range batch {
		switch e.ev.Kind {
		case sb.CarrierAccepted, sb.CarrierRefused:
			if om := l.msgs[e.ev.MessageID]; om != nil && e.ev.Part < len(om.parts) {
				om.parts[e.ev.Part].recorded = true
				l.forgetIfDone(om)
			}
		}
	}
	l.mu.Unlock()
	if len(res.Adopted) > 0 {
		l.log.Info("receipts settled parts in doubt: not written again", "parts", len(res.Adopted))
	}
}
