package switchboard

import "time"

// Takeover is what one node moved from another that stopped beating (or,
// for a node that stops cleanly, what it released itself): its claimed
// messages and leased webhook deliveries, made due at once.
type Takeover struct {
	// Node is the id of the node whose work was moved.
	Node string
	// LastHeartbeat is when that node last beat; DeclaredDead when it was
	// found dead (both by the database's clock). Zero for a release.
	LastHeartbeat, DeclaredDead time.Time
	// Messages and Deliveries count the messages and webhook deliveries
	// made due again. Each may already have been handed over (to the
	// provider, to the endpoint) by the node that held it, so each may
	// become a duplicate: the provider sees the same message id again, the
	// endpoint the same delivery id.
	Messages, Deliveries int
}

// Redeliveries counts the work a node made due again, or claimed again,
// after another claim on it ended without a result: each a possible
// duplicate hand-off.
type Redeliveries struct {
	// TakeoverMessages and TakeoverDeliveries were moved from nodes this
	// node declared dead.
	TakeoverMessages, TakeoverDeliveries int64
	// LeaseMessages and LeaseDeliveries were claimed by this node after the
	// lease of an earlier claim ran out (or a sent message's outcome did
	// not come in time, or on SQLite a restart released it).
	LeaseMessages, LeaseDeliveries int64
}
