package android

import (
	"context"
	"time"

	"github.com/switchboard/switchboard/ratelimit"
)

// Pairing limits. A pairing code has 8 digits and lives 15 minutes
// (sb.PairingTTL); what keeps it from being guessed is the number of codes
// tried while it lives, whichever codes they were aimed at. So every
// attempt is counted, before its code is looked up, against three budgets
// (GCRA: a burst of the limit, then one every minute/limit):
//
//   - its client (ratelimit key "client:"+clientip.Key: an IPv4 address,
//     the /64 of an IPv6 one, the client behind a trusted proxy);
//   - this node, all clients together: it bounds the store lookups a node
//     makes for codes;
//   - all nodes together, through the store's shared table on PostgreSQL
//     (Config.Shared): the bound that makes the arithmetic of
//     docs/security.md true however many nodes serve.
//
// An attempt refused by one budget gives back what the others took, and a
// pairing that succeeds gives back all three: pairing many phones from one
// address is not limited. Counting before the lookup makes the limits hold
// for requests that arrive at once: a burst of a thousand gets its budget's
// worth of lookups, and 429 for the rest.
const (
	PairingPerClient = 10 // a minute, per client
	PairingPerNode   = 60 // a minute, on one node
	PairingInAll     = 60 // a minute, across nodes
	pairingPeriod    = time.Minute
	// pairingShared is the key of the budget of all nodes in the store's
	// rate_limits table (API buckets are key ids and "tenant:" ids).
	pairingShared = "device-pairing"
)

// Counter is a budget of attempts shared between nodes: ratelimit.Postgres.
type Counter interface {
	Allow(ctx context.Context, key string, limit int, period time.Duration) (ratelimit.Decision, error)
	Refund(ctx context.Context, key string, limit int, period time.Duration) error
}

// pairingLimits counts pairing attempts (see the constants above).
type pairingLimits struct {
	local  *ratelimit.Memory // per client and per node
	shared Counter           // across nodes; nil on one node
}

func (p *pairingLimits) init(shared Counter, now func() time.Time) {
	p.local, p.shared = ratelimit.NewMemory(now), shared
}

// budget is one of an attempt's budgets.
type budget struct {
	name  string // the limit label of the metrics: client, node or cluster
	key   string
	limit int
	c     Counter
}

// budgets are the budgets an attempt of client is counted against, in the
// order they are asked.
func (p *pairingLimits) budgets(client string) []budget {
	bs := make([]budget, 0, 3)
	if client != "" {
		bs = append(bs, budget{"client", "client:" + client, PairingPerClient, p.local})
	}
	bs = append(bs, budget{"node", "node", PairingPerNode, p.local})
	if p.shared != nil {
		bs = append(bs, budget{"cluster", pairingShared, PairingInAll, p.shared})
	}
	return bs
}

// take counts an attempt of client against every budget. When one refuses
// it, the others are given back and take returns the budget's name and the
// Retry-After in seconds. An error (the store's) also gives back what was
// taken.
func (p *pairingLimits) take(ctx context.Context, client string) (refusedBy string, retryAfter int, err error) {
	bs := p.budgets(client)
	for i, b := range bs {
		d, err := b.c.Allow(ctx, b.key, b.limit, pairingPeriod)
		if err != nil || !d.Allowed {
			p.giveBack(ctx, bs[:i])
			if err != nil {
				return "", 0, err
			}
			return b.name, d.RetryAfterSeconds(), nil
		}
	}
	return "", 0, nil
}

// refund gives back the attempt of client that paired a device.
func (p *pairingLimits) refund(ctx context.Context, client string) {
	p.giveBack(ctx, p.budgets(client))
}

func (p *pairingLimits) giveBack(ctx context.Context, bs []budget) {
	ctx = context.WithoutCancel(ctx)
	for _, b := range bs {
		b.c.Refund(ctx, b.key, b.limit, pairingPeriod) // a refund lost costs one attempt of a budget
	}
}
