package sqlstore

import (
	"cmp"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Kept reads (PostgreSQL). Before its callers run, a batch of sends needs
// their recipients and their tenants' phones' versions. Read for every
// batch (Tx.prefetch), they cost a round trip of their own besides the one
// of the INSERT and COMMIT: about 100 us of CPU a batch, the node's and
// PostgreSQL's (BenchmarkSendPipeline with 8 callers, 4 sends a batch, in
// alternating runs: 115-117 against 97-106 us of the process and 174-187
// against 160-172 us of PostgreSQL a message). So a node keeps what it
// read, and what its own sends wrote (a recipient made known), and a batch
// whose reads are all kept does not read them: its transaction takes them
// as they were (assume), and checks them in the round trip of its next
// statement: with its BEGIN, or with its COMMIT. A batch of sends alone
// then reaches PostgreSQL once, its BEGIN, the check, its INSERT and its
// COMMIT together (commitPostgres).
//
// check_reads (migration 0021) fails the transaction when any of them
// changed since it was kept (another node's write: an opt-out, a phone
// added); the batch then runs again the careful way (batcher.run), reading
// everything afresh, and the node forgets what it kept of the tenants the
// transaction took from it. The check runs in the transaction after the
// point where the read it replaces ran, and before the writes that rest on
// it (the deferred INSERT): it passes only if a read there would have
// returned what was kept (READ COMMITTED, as the read), and fails too when
// the transaction's own statements changed those rows meanwhile. What is
// kept can cost a batch a second run, never a wrong answer.

// maxKeptRecipients bounds the recipients a node keeps, of all tenants;
// beyond it, the recipients of a tenant are forgotten to make room.
const maxKeptRecipients = 1 << 16

// staleReadsCode is the SQLSTATE of check_reads' error.
const staleReadsCode = "SBR01"

type keptReads struct {
	on      bool // PostgreSQL: set when the DB opens
	max     int  // recipients kept at most; 0 for maxKeptRecipients
	mu      sync.Mutex
	tenants map[string]*keptTenant
	n       int // recipients kept, of all tenants
	// hits counts the reads batches took from here instead of reading
	// them; stale the transactions whose check found something changed.
	hits, stale atomic.Int64
}

type keptTenant struct {
	version    int64
	hasVersion bool
	recipients map[rcpKey]recipient // known recipients only
}

// tenant returns what is kept of tenantID, made when create is set (nil
// otherwise). Call with mu held.
func (c *keptReads) tenant(tenantID string, create bool) *keptTenant {
	kt := c.tenants[tenantID]
	if kt == nil && create {
		if c.tenants == nil {
			c.tenants = map[string]*keptTenant{}
		}
		kt = &keptTenant{recipients: map[rcpKey]recipient{}}
		c.tenants[tenantID] = kt
	}
	return kt
}

// keepRecipient keeps r as k's recipient: a known one; an unknown one is
// forgotten (a batch always reads a recipient it does not know).
func (c *keptReads) keepRecipient(k rcpKey, r recipient) {
	if !c.on {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keepRecipientLocked(k, r)
}

func (c *keptReads) keepRecipientLocked(k rcpKey, r recipient) {
	if !r.known {
		if kt := c.tenant(k.tenantID, false); kt != nil {
			if _, ok := kt.recipients[k]; ok {
				delete(kt.recipients, k)
				c.n--
			}
		}
		return
	}
	kt := c.tenant(k.tenantID, true)
	if _, ok := kt.recipients[k]; !ok {
		if c.n >= cmp.Or(c.max, maxKeptRecipients) {
			c.dropSome(k.tenantID)
		}
		c.n++
	}
	kt.recipients[k] = r
}

// dropSome forgets the recipients of a tenant other than keep if there is
// one with any (map order: an arbitrary one), else keep's.
func (c *keptReads) dropSome(keep string) {
	var victim *keptTenant
	for id, kt := range c.tenants {
		if len(kt.recipients) > 0 {
			victim = kt
			if id != keep {
				break
			}
		}
	}
	if victim != nil {
		c.n -= len(victim.recipients)
		clear(victim.recipients)
	}
}

// keepVersion keeps v as the version of tenantID's phones.
func (c *keptReads) keepVersion(tenantID string, v int64) {
	if !c.on {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keepVersionLocked(tenantID, v)
}

func (c *keptReads) keepVersionLocked(tenantID string, v int64) {
	kt := c.tenant(tenantID, true)
	kt.version, kt.hasVersion = v, true
}

// keep keeps what a batch read (Tx.prefetch).
func (c *keptReads) keep(got readAhead) {
	if !c.on {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, v := range got.versions {
		c.keepVersionLocked(id, v)
	}
	for k, r := range got.recipients {
		c.keepRecipientLocked(k, r)
	}
}

// forgetTenant forgets all that is kept of tenantID.
func (c *keptReads) forgetTenant(tenantID string) {
	if !c.on {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetTenantLocked(tenantID)
}

func (c *keptReads) forgetTenantLocked(tenantID string) {
	if kt := c.tenants[tenantID]; kt != nil {
		c.n -= len(kt.recipients)
		delete(c.tenants, tenantID)
	}
}

// assumedReads is what a transaction took from the kept reads, to check
// with its next statement (see Tx.assume and Tx.queueCheck); the first
// checkedKeys and checkedTenants of them have been checked.
type assumedReads struct {
	keys     []rcpKey
	rcps     []recipient
	tenants  []string
	versions []int64

	checkedKeys, checkedTenants int
}

func (a *assumedReads) empty() bool { return len(a.keys) == 0 && len(a.tenants) == 0 }

// unchecked reports whether some of them are still to be checked.
func (a *assumedReads) unchecked() bool {
	return a.checkedKeys < len(a.keys) || a.checkedTenants < len(a.tenants)
}

// assume takes from the node's kept reads the recipients and phones'
// versions the callers of reqs read first (see batchReq.reads) that the
// transaction has not read. What is not kept, prefetch reads.
//
// What it takes is checked in the round trip of the transaction's next
// statement: with its BEGIN, or with its COMMIT. A check after statements
// of the transaction sees their writes too: one that changed a row taken
// here fails the check, and the batch runs again (never a wrong answer).
func (t *Tx) assume(reqs []*batchReq) {
	if t.db.dialect != Postgres {
		return
	}
	c := &t.db.reads
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range reqs {
		k := r.reads
		if k.tenantID == "" {
			continue
		}
		kt := c.tenants[k.tenantID]
		if kt == nil {
			continue
		}
		if _, ok := t.recipients[k]; !ok {
			if rcp, ok := kt.recipients[k]; ok {
				if t.recipients == nil {
					t.recipients = map[rcpKey]recipient{}
				}
				t.recipients[k] = rcp
				t.assumed.keys, t.assumed.rcps = append(t.assumed.keys, k), append(t.assumed.rcps, rcp)
				c.hits.Add(1)
			}
		}
		if _, ok := t.versions[k.tenantID]; !ok && kt.hasVersion {
			if t.versions == nil {
				t.versions = map[string]int64{}
			}
			t.versions[k.tenantID] = kt.version
			t.assumed.tenants, t.assumed.versions = append(t.assumed.tenants, k.tenantID), append(t.assumed.versions, kt.version)
			c.hits.Add(1)
		}
	}
}

// checkReads fails with staleReadsCode unless every recipient and tenant
// given is as the node kept it (migration 0021).
const checkReads = `SELECT check_reads($1, $2, $3, $4, $5, $6, $7, $8)`

// queueCheck adds to b, before the transaction's statements in b, the
// check of what it assumed and has not checked yet, if anything. The
// caller marks them checked (checked) once b has been sent.
func (t *Tx) queueCheck(b *pgx.Batch) {
	a := &t.assumed
	if !a.unchecked() {
		return
	}
	keys, rcps := a.keys[a.checkedKeys:], a.rcps[a.checkedKeys:]
	n := len(keys)
	ts, es, ns := make([]string, n), make([]string, n), make([]string, n)
	opted, phones, reserved := make([]int32, n), make([]string, n), make([]string, n)
	for i, k := range keys {
		r := rcps[i]
		ts[i], es[i], ns[i] = k.tenantID, string(k.env), k.number
		if r.optedOut {
			opted[i] = 1
		}
		phones[i], reserved[i] = r.phoneID, r.reservedBy
	}
	tenants := append(make([]string, 0, len(a.tenants)-a.checkedTenants), a.tenants[a.checkedTenants:]...)
	versions := append(make([]int64, 0, len(tenants)), a.versions[a.checkedTenants:]...)
	b.Queue(checkReads, ts, es, ns, opted, phones, reserved, tenants, versions)
}

// checked marks what the transaction assumed as checked.
func (a *assumedReads) checked() { a.checkedKeys, a.checkedTenants = len(a.keys), len(a.tenants) }

// staleReads makes the node forget, when err is check_reads' failure,
// what it kept of the tenants whose reads the transaction assumed: their
// next batches read afresh.
func (t *Tx) staleReads(err error) {
	if t.assumed.empty() || sqlState(err) != staleReadsCode {
		return
	}
	c := &t.db.reads
	c.stale.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range t.assumed.keys {
		c.forgetTenantLocked(k.tenantID)
	}
	for _, id := range t.assumed.tenants {
		c.forgetTenantLocked(id)
	}
}

// sqlState is the SQLSTATE of PostgreSQL's error err, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// KeptReadStats returns how many reads of the send path batches took from
// what the node kept instead of reading them (a recipient or a tenant's
// phones' version each), and how many transactions found what they took
// changed and ran again.
func (db *DB) KeptReadStats() (hits, stale int64) {
	return db.reads.hits.Load(), db.reads.stale.Load()
}
