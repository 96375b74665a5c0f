package switchboard

import (
	"fmt"
	"time"
)

// Carrier links (docs/carriers.md) carry a tenant's numbers at an SMS
// carrier or aggregator. A message sent from a carrier phone is split into
// parts (SMPP segments; one part for an HTTP API, which segments on its
// own), and each part is tracked at the link by the carrier's id for it, so
// that a delivery receipt finds its message, also after a restart.
//
// What a link records, in the order it learns it, is a list of
// CarrierEvents; the store applies them in one transaction (see
// sqlstore.RecordCarrier), so that a carrier's id is on disk before the
// link acknowledges the receipt that names it.

// Deferred is what a Provider's Send returns for a message it cannot take
// now, because its carrier link is down or its queue is full: the message
// stays queued, due again at Until, and the hand-off does not count as an
// attempt. It is never a failure.
type Deferred struct {
	Until  time.Time
	Reason string
}

func (d *Deferred) Error() string { return "deferred: " + d.Reason }

// HandoffRecorder is implemented by a Provider that records a message's
// hand-off itself, when the carrier has accepted it (status sent), instead
// of the delivery worker recording it when Send returns: until then the
// message stays queued, and is handed over again (the provider knows it by
// its id) if its claim runs out.
type HandoffRecorder interface {
	RecordsHandoff(m *Message) bool
}

// CarrierEventKind says what a CarrierEvent reports.
type CarrierEventKind int

const (
	// CarrierWritten: a part was written to the carrier and its answer has
	// not come yet. Until the answer comes, the part is in doubt: the
	// carrier may or may not have it.
	CarrierWritten CarrierEventKind = iota + 1
	// CarrierAccepted: the carrier accepted a part and gave it ExternalID.
	CarrierAccepted
	// CarrierRefused: the carrier refused a part for good; the message
	// fails with Reason.
	CarrierRefused
	// CarrierReceipt: a delivery receipt (or status callback) about the
	// part the carrier knows as ExternalID, or, when MessageID is set, about
	// that message's only part.
	CarrierReceipt
	// CarrierInbound: a text a recipient sent to one of the link's numbers.
	CarrierInbound
)

// Receipt states: what a receipt says about a part.
const (
	// ReceiptPending: not final (en route, accepted, sent to the handset's
	// network); it only confirms that the carrier has the part.
	ReceiptPending = iota
	ReceiptDelivered
	ReceiptFailed
)

// CarrierEvent is one thing a carrier link learned.
type CarrierEvent struct {
	Kind       CarrierEventKind
	MessageID  string
	Part       int // 0-based
	Parts      int
	ExternalID string
	// AltIDs are other forms of a receipt's ExternalID, tried when it is
	// unknown (an SMSC may give an id in decimal in one place and in hex in
	// another).
	AltIDs []string
	// AltLinks are the other links to the same carrier account, whose
	// receipts the carrier may deliver on this link's bind.
	AltLinks []string
	At       time.Time
	// State and Reason of a receipt (Reason: the carrier's words, e.g.
	// "stat:UNDELIV err:005", the failure_reason of a failed message), or
	// the Reason of a refusal.
	State  int
	Reason string
	// From and To of a receipt are the addresses it carries (the
	// recipient, and the number the message went out from), with Text its
	// "text:" field: they let a receipt whose ExternalID is unknown, because
	// the answer that gave the id was lost, find a part in doubt.
	From, To, Text string
	// Inbound is the received text, with From, To, Body, ExternalID (when
	// the carrier gives an id) and CreatedAt set; the store finds the phone
	// by To among the link's numbers.
	Inbound *Message
}

// Part states of a message at a carrier link.
const (
	PartWritten   = "written"
	PartAccepted  = "accepted"
	PartDelivered = "delivered"
	PartFailed    = "failed"
)

// CarrierPart is what the store knows of one part of a message at a link.
type CarrierPart struct {
	MessageID string
	Part      int
	Parts     int
	State     string
	// WrittenAt is when a part in doubt was written.
	WrittenAt time.Time
}

// CarrierResult is what applying a batch of events changed that the link
// should know: parts in doubt that a receipt adopted (they must not be
// written again), and messages with every part accepted or final.
type CarrierResult struct {
	Adopted []PartRef
	Done    []string
	// Dropped counts the inbound texts no tenant takes: sent to a number
	// no phone of the link has, or, on a chat engine, from a user no
	// tenant wrote to. They are not stored.
	Dropped int
}

// PartRef names one part of a message.
type PartRef struct {
	MessageID string
	Part      int
}

func (p PartRef) String() string { return fmt.Sprintf("%s/%d", p.MessageID, p.Part) }
