package delivery

import (
	"context"
	"log/slog"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Nodes is what Liveness needs from storage: the nodes table of a
// PostgreSQL cluster.
type Nodes interface {
	NodeID() string
	RegisterNode(ctx context.Context, addr string) error
	// Heartbeat records that this node is alive; wasDead reports that
	// another node (declaredDeadBy) had declared it dead and taken its
	// claims over, and that it is registered again.
	Heartbeat(ctx context.Context, addr string) (declaredDeadBy string, wasDead bool, err error)
	TakeOverDead(ctx context.Context, deadAfter time.Duration, now time.Time) ([]sb.Takeover, error)
	LeaveCluster(ctx context.Context, now time.Time) (sb.Takeover, error)
}

// Default liveness timings: a node beats every second and is dead after
// three without a beat, so that its work is taken over within about four
// seconds of its death (three, plus up to one until the next check).
const (
	DefaultHeartbeat = time.Second
	DefaultDeadAfter = 3 * time.Second
)

// Liveness keeps a node of a PostgreSQL cluster registered and beating,
// and takes over the work of nodes that stop beating: at every beat it
// looks for nodes whose last beat is older than DeadAfter, declares them
// dead and makes their claimed messages and leased webhook deliveries due
// at once (whichever live node sees a dead one first does it, once).
type Liveness struct {
	Store Nodes
	// Addr is the address this node listens on, recorded for the operator.
	Addr string
	// Interval is the time between beats (DefaultHeartbeat); DeadAfter how
	// long without a beat makes a node dead (DefaultDeadAfter).
	Interval, DeadAfter time.Duration
	Log                 *slog.Logger

	// beating is when this node's beats last started to succeed without
	// a failure since (zero while they fail).
	beating time.Time
}

func (l *Liveness) defaults() {
	if l.Interval == 0 {
		l.Interval = DefaultHeartbeat
	}
	if l.DeadAfter == 0 {
		l.DeadAfter = DefaultDeadAfter
	}
	if l.Log == nil {
		l.Log = slog.Default()
	}
}

// Register records this node as live; call it before the workers start.
func (l *Liveness) Register(ctx context.Context) error {
	l.defaults()
	if err := l.Store.RegisterNode(ctx, l.Addr); err != nil {
		return err
	}
	l.beating = time.Now()
	l.Log.Info("node registered", "node_id", l.Store.NodeID(), "heartbeat_interval", l.Interval.String(), "dead_after", l.DeadAfter.String())
	return nil
}

// Run beats and takes over dead nodes' work until ctx ends.
func (l *Liveness) Run(ctx context.Context) {
	l.defaults()
	t := time.NewTicker(l.Interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := l.beat(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			// Once per outage: a node that cannot beat is declared dead by
			// the others after DeadAfter, and finds out when it beats again.
			l.Log.Error("node heartbeat failed", "node_id", l.Store.NodeID(), "err", err)
			failing = true
		case err == nil && failing:
			l.Log.Info("node heartbeat recovered", "node_id", l.Store.NodeID())
			failing = false
		}
	}
}

func (l *Liveness) beat(ctx context.Context) error {
	// One beat may not outlast the next: a stuck call would otherwise make
	// this node look dead while it waits.
	ctx, cancel := context.WithTimeout(ctx, l.DeadAfter)
	defer cancel()
	by, wasDead, err := l.Store.Heartbeat(ctx, l.Addr)
	if err != nil {
		l.beating = time.Time{}
		return err
	}
	now := time.Now()
	if l.beating.IsZero() {
		l.beating = now
	}
	if wasDead {
		// Its claims were made due again: what this node still holds in
		// memory (hand-offs and webhook attempts in flight) goes on, so the
		// other nodes may hand the same messages and deliveries over too;
		// the results are recorded once whichever comes first.
		l.Log.Warn("this node had been declared dead and its claimed work taken over; registered again",
			"node_id", l.Store.NodeID(), "declared_dead_by", by)
	}
	if now.Sub(l.beating) < l.DeadAfter {
		// This node could not beat a moment ago (the database was out of
		// its reach, or it is just starting): the others may not have
		// beaten since for the same reason. Judge them once it has beaten
		// for DeadAfter itself, which gives them as long.
		return nil
	}
	moved, err := l.Store.TakeOverDead(ctx, l.DeadAfter, now)
	for _, m := range moved {
		l.Log.Warn("node declared dead; its claimed work taken over", "dead_node_id", m.Node, "node_id", l.Store.NodeID(),
			"last_heartbeat", m.LastHeartbeat.UTC(), "declared_dead_at", m.DeclaredDead.UTC(),
			"silent_for_ms", m.DeclaredDead.Sub(m.LastHeartbeat).Milliseconds(),
			"messages", m.Messages, "webhook_deliveries", m.Deliveries)
	}
	return err
}

// Leave releases this node's claims for the other nodes and deregisters
// it; call it once the workers have stopped.
func (l *Liveness) Leave(ctx context.Context) {
	l.defaults()
	rel, err := l.Store.LeaveCluster(ctx, time.Now())
	if err != nil {
		l.Log.Error("leaving the cluster: releasing this node's claims failed; the other nodes take them over once it is found dead",
			"node_id", l.Store.NodeID(), "err", err)
		return
	}
	l.Log.Info("node left the cluster; its claimed work released", "node_id", rel.Node, "messages", rel.Messages, "webhook_deliveries", rel.Deliveries)
}
