package android

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/clientip"
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

func (p *pairingLimits) init(shared Counter) {
	p.local, p.shared = ratelimit.NewMemory(nil), shared
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

// Failed device credentials. A wrong device token or inbound secret costs a
// database read, so failures are throttled per client as the API's keys
// are (auth.FailureThrottle: a burst of 20, then one every 3 seconds).
// Once a client has used its budget, a credential this node has not seen
// valid answers 429 without a read; one it has seen valid goes on working,
// so that phones behind one address with a misbehaving neighbour are not
// locked out.
type credentialGuard struct {
	failures auth.FailureThrottle
	known    knownSet
}

// knownSet remembers the hashes of credentials seen valid, in two
// generations of at most knownCap each: a hash lives from knownTTL to twice
// that after it was last seen, less when many are seen.
type knownSet struct {
	mu        sync.Mutex
	cur, prev map[string]struct{}
	rotated   time.Time
}

const (
	knownTTL = 10 * time.Minute
	knownCap = 1 << 16
)

func (k *knownSet) has(hash string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rotate(now)
	_, in := k.cur[hash]
	if !in {
		_, in = k.prev[hash]
	}
	return in
}

func (k *knownSet) add(hash string, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rotate(now)
	k.cur[hash] = struct{}{}
}

func (k *knownSet) rotate(now time.Time) {
	switch age := now.Sub(k.rotated); {
	case k.cur == nil || age >= 2*knownTTL:
		k.prev, k.cur, k.rotated = nil, map[string]struct{}{}, now
	case age >= knownTTL || len(k.cur) >= knownCap:
		k.prev, k.cur, k.rotated = k.cur, map[string]struct{}{}, now
	}
}

// Credential labels of the metrics.
const (
	credToken   = "token"
	credInbound = "inbound_secret"
)

// throttled answers 429 and reports true when the request's client must
// wait before trying secret (a token or inbound secret of kind cred) that
// this node has not seen valid.
func (s *Server) throttled(w http.ResponseWriter, r *http.Request, cred, secret string) bool {
	client := clientip.KeyOf(r.RemoteAddr)
	now := s.cfg.Now()
	if client == "" || s.creds.known.has(sb.HashSecret(secret), now) {
		return false
	}
	d := s.creds.failures.Wait(client, now)
	if d <= 0 {
		return false
	}
	s.metrics.credentials.WithLabelValues(cred, "throttled").Inc()
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((d+time.Second-1)/time.Second))))
	writeError(w, http.StatusTooManyRequests, "Too many failed attempts from your address. Wait and try again.")
	return true
}

// checked records the outcome of a lookup of secret: a valid one is known
// from now on, a wrong one (INVALID_TOKEN) counts against the client.
func (s *Server) checked(r *http.Request, cred, secret string, err error) {
	now := s.cfg.Now()
	switch {
	case err == nil:
		s.creds.known.add(sb.HashSecret(secret), now)
	case sb.ErrorCode(err) == sb.CodeInvalidToken:
		s.metrics.credentials.WithLabelValues(cred, "invalid").Inc()
		if client := clientip.KeyOf(r.RemoteAddr); client != "" {
			s.creds.failures.Fail(client, now)
		}
	}
}
