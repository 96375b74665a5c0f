package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	sb "github.com/switchboard/switchboard"
)

const messageCols = `id, tenant_id, environment, direction, from_number, to_number, body, channel, status,
	failure_reason, error_code, template, campaign_id, phone_id, created_at, scheduled_at, sent_at, delivered_at, failed_at, attempts,
	engine, read_at, fallback_from, fallback_reason, ttl, priority`

func scanMessage(row interface{ Scan(...any) error }) (*sb.Message, error) {
	return scanMessageWith(row)
}

// scanMessageWith scans messageCols and then the extra columns into extra.
func scanMessageWith(row interface{ Scan(...any) error }, extra ...any) (*sb.Message, error) {
	var m sb.Message
	var env string
	var reason, code, tmpl, campaign, phone, engine, fbFrom, fbReason sql.NullString
	var created int64
	var sched, sent, delivered, failed, read, ttl sql.NullInt64
	var priority int
	err := row.Scan(append([]any{&m.ID, &m.TenantID, &env, &m.Direction, &m.From, &m.To, &m.Body, &m.Channel, &m.Status,
		&reason, &code, &tmpl, &campaign, &phone, &created, &sched, &sent, &delivered, &failed, &m.Attempts,
		&engine, &read, &fbFrom, &fbReason, &ttl, &priority}, extra...)...)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, sb.ErrNotFound
		}
		return nil, err
	}
	m.Env = sb.Environment(env)
	m.FailureReason, m.ErrorCode, m.Template, m.CampaignID, m.PhoneID = reason.String, code.String, tmpl.String, campaign.String, phone.String
	m.CreatedAt = sb.FromMicros(created)
	m.ScheduledAt, m.SentAt, m.DeliveredAt, m.FailedAt = optTime(sched), optTime(sent), optTime(delivered), optTime(failed)
	m.Engine, m.ReadAt = cmp.Or(engine.String, sb.EngineSimulator), optTime(read)
	if fbFrom.Valid {
		m.Fallback = &sb.Fallback{From: fbFrom.String, Reason: fbReason.String}
	}
	m.TTL = time.Duration(ttl.Int64) * time.Second
	m.HighPriority = priority > 0
	return &m, nil
}

func optTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := sb.FromMicros(v.Int64)
	return &t
}

func microsOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return sb.Micros(*t)
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ErrReplay is returned by AcceptSend when the Idempotency-Key was already
// used with the same request: Record holds the first answer.
type ErrReplay struct{ Record *sb.IdempotencyRecord }

func (e *ErrReplay) Error() string { return "idempotent replay" }

// Idempotency returns the live record stored under key, or nil.
func (db *DB) Idempotency(ctx context.Context, tenantID string, env sb.Environment, key string, now time.Time) (*sb.IdempotencyRecord, error) {
	return idempotency(ctx, db, tenantID, env, key, now)
}

// querier is what *DB and *Tx have in common for reading one row.
type querier interface {
	queryRow(ctx context.Context, query string, args ...any) row
}

func idempotency(ctx context.Context, q querier, tenantID string, env sb.Environment, key string, now time.Time) (*sb.IdempotencyRecord, error) {
	var r sb.IdempotencyRecord
	var resp string
	var created int64
	err := q.queryRow(ctx, `SELECT key, request_hash, status, response, created_at FROM idempotency_keys
		WHERE tenant_id = ? AND environment = ? AND key = ? AND created_at > ?`,
		tenantID, string(env), key, sb.Micros(now.Add(-sb.IdempotencyWindow))).Scan(&r.Key, &r.RequestHash, &r.Status, &resp, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.Response, r.CreatedAt = []byte(resp), sb.FromMicros(created)
	return &r, nil
}

type recipient struct {
	known    bool
	optedOut bool
	phoneID  string
	// reservedBy is the campaign message that made the recipient known,
	// until anything else uses it (see WithdrawCampaign).
	reservedBy string
}

// recipient reads a recipient, once per transaction: the group commit puts
// concurrent sends in one transaction, and a burst of sends to one number
// (retries, a notification sent twice) looks it up once. Any write to
// recipients in the transaction forgets what it read (see Tx.exec).
func (t *Tx) recipient(ctx context.Context, tenantID string, env sb.Environment, number string) (recipient, error) {
	k := rcpKey{tenantID, env, number}
	if r, ok := t.recipients[k]; ok {
		return r, nil
	}
	r, err := t.readRecipient(ctx, tenantID, env, number)
	if err == nil {
		if t.recipients == nil {
			t.recipients = map[rcpKey]recipient{}
		}
		t.recipients[k] = r
	}
	return r, err
}

type rcpKey struct {
	tenantID string
	env      sb.Environment
	number   string
}

// prefetch reads, on PostgreSQL, what the work of reqs reads first: their
// recipients and their tenants' phones' versions, those the transaction has
// not read yet nor taken from what the node kept (assume), all in one
// statement, and the node keeps what it read for later batches. The group
// commit runs a batch's callers one after the other; reading for each in
// turn cost a round trip per recipient and one per tenant, each waiting
// for a core on a loaded machine, while the batch's callers waited for all
// of them. What it reads is what each caller's own reads would have
// returned a moment later (READ COMMITTED reads what is committed when
// each statement starts), and it is kept in the transaction's caches
// (recipient, phoneList), which forget it when the transaction writes to
// those rows (see wrote).
func (t *Tx) prefetch(reqs []*batchReq) error {
	if t.db.dialect != Postgres {
		return nil
	}
	var ts, es, ns []any
	seen := map[rcpKey]bool{}
	var tenants []any
	seenTenant := map[string]bool{}
	for _, r := range reqs {
		k := r.reads
		if k.tenantID == "" {
			continue
		}
		if _, ok := t.recipients[k]; !ok && !seen[k] {
			seen[k] = true
			ts, es, ns = append(ts, k.tenantID), append(es, string(k.env)), append(ns, k.number)
		}
		if _, ok := t.versions[k.tenantID]; !ok && !seenTenant[k.tenantID] {
			seenTenant[k.tenantID] = true
			tenants = append(tenants, k.tenantID)
		}
	}
	if len(ns) == 0 && len(tenants) == 0 {
		return nil
	}
	readStats.prefetches.Add(1)
	// Not t.query: the rows of insertRecipient are not of these recipients,
	// which the transaction has not read, and can wait for the commit.
	// batch_reads (migration 0016) keeps one plan per connection that is
	// always a nested loop over the primary keys. At the start of the
	// transaction the statement goes with its BEGIN, in one round trip.
	const query = `SELECT * FROM batch_reads($1, $2, $3, $4)`
	args := []any{nonNilSlice(ts), nonNilSlice(es), nonNilSlice(ns), nonNilSlice(tenants)}
	var got readAhead
	if !t.begun {
		err := t.start(func(b *pgx.Batch) {
			b.Queue(query, args...).Query(func(rows pgx.Rows) error {
				got = readAhead{}
				return got.scan(rows)
			})
		})
		if err != nil {
			return err
		}
	} else {
		if err := t.ensureBegun(); err != nil {
			return err
		}
		rows, err := t.tx.QueryContext(context.Background(), query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		if err := got.scan(rows); err != nil {
			return err
		}
	}
	t.db.reads.keep(got)
	if t.versions == nil && len(got.versions) > 0 {
		t.versions = map[string]int64{}
	}
	maps.Copy(t.versions, got.versions)
	if t.recipients == nil && len(got.recipients) > 0 {
		t.recipients = map[rcpKey]recipient{}
	}
	maps.Copy(t.recipients, got.recipients)
	return nil
}

// readAhead is what batch_reads returned: tenants' phones' versions and
// recipients (unknown ones as the zero recipient).
type readAhead struct {
	versions   map[string]int64
	recipients map[rcpKey]recipient
}

// scan reads the rows of batch_reads, from database/sql or from pgx.
func (a *readAhead) scan(rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}) error {
	for rows.Next() {
		var kind int
		var k rcpKey
		var env string
		var opted sql.NullInt64
		var phone, reserved sql.NullString
		var version int64
		if err := rows.Scan(&kind, &k.tenantID, &env, &k.number, &opted, &phone, &reserved, &version); err != nil {
			return err
		}
		if kind == 1 {
			if a.versions == nil {
				a.versions = map[string]int64{}
			}
			a.versions[k.tenantID] = version
			continue
		}
		k.env = sb.Environment(env)
		if a.recipients == nil {
			a.recipients = map[rcpKey]recipient{}
		}
		r := recipient{}
		if opted.Valid {
			r = recipient{known: true, optedOut: opted.Int64 != 0, phoneID: phone.String, reservedBy: reserved.String}
		}
		a.recipients[k] = r
	}
	return rows.Err()
}

// nonNilSlice is s, or an empty slice for nil: an empty array parameter,
// not NULL.
func nonNilSlice(s []any) []any {
	if s == nil {
		return []any{}
	}
	return s
}

// readStats counts the reads of the send path, for tests and benchmarks:
// statements that read for a whole batch (prefetch), and reads of one
// recipient.
var readStats struct{ prefetches, single atomic.Int64 }

func (t *Tx) readRecipient(ctx context.Context, tenantID string, env sb.Environment, number string) (recipient, error) {
	readStats.single.Add(1)
	var r recipient
	var opted int
	var phone, reserved sql.NullString
	err := t.queryRow(ctx, `SELECT opted_out, phone_id, reserved_by FROM recipients WHERE tenant_id = ? AND environment = ? AND number = ?`,
		tenantID, string(env), number).Scan(&opted, &phone, &reserved)
	switch {
	case err == nil:
		r = recipient{known: true, optedOut: opted != 0, phoneID: phone.String, reservedBy: reserved.String}
	case !errors.Is(err, sql.ErrNoRows):
		return r, err
	}
	t.db.reads.keepRecipient(rcpKey{tenantID, env, number}, r)
	return r, nil
}

// insertRecipient records a recipient the transaction read as unknown. On
// PostgreSQL the row is inserted with the batch's messages, in the
// commit's one statement (flushDeferred), or before any other statement
// of the transaction that names recipients (see prepare): a batch of sends
// to new recipients then costs no round trip per recipient. Either way the
// other recipients the transaction read stay as they were (the insert
// changes no other row), and this one reads as known from now on.
func (t *Tx) insertRecipient(ctx context.Context, k rcpKey, phoneID string, now time.Time) error {
	row := []any{k.tenantID, string(k.env), k.number, 0, nullStr(phoneID), sb.Micros(now), sb.Micros(now)}
	kept := t.recipients
	if t.db.dialect == Postgres {
		t.newRecipients = append(t.newRecipients, row)
	} else if _, err := t.exec(ctx, `INSERT INTO recipients (`+recipientInsertCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`, row...); err != nil {
		return err
	}
	if kept == nil {
		kept = map[rcpKey]recipient{}
	}
	r := recipient{known: true, phoneID: phoneID}
	kept[k] = r
	t.recipients = kept
	t.afterCommit(func() { t.db.reads.keepRecipient(k, r) })
	return nil
}

// The columns of a new recipient's row (insertRecipient), and their
// PostgreSQL types.
const recipientInsertCols = `tenant_id, environment, number, opted_out, phone_id, first_seen_at, updated_at`

var recipientInsertTypes = []string{"text", "text", "text", "integer", "text", "bigint", "bigint"}

// insertRecipients inserts the rows of insertRecipient, a column each
// (PostgreSQL).
var insertRecipients = `INSERT INTO recipients (` + recipientInsertCols + `) SELECT * FROM ` + unnest(recipientInsertTypes)

// insertRecipientsNow inserts the rows insertRecipient deferred, before a
// statement that names recipients (PostgreSQL).
func (t *Tx) insertRecipientsNow(ctx context.Context) error {
	if err := t.ensureBegun(); err != nil {
		return err
	}
	rows := t.newRecipients
	t.newRecipients = nil
	_, err := t.tx.ExecContext(context.WithoutCancel(ctx), t.db.q(insertRecipients), t.db.planEach(columns(rows, len(recipientInsertTypes))...)...)
	return err
}

// updateRecipient runs an UPDATE of a recipient that the transaction read as
// known; when no row changes, a withdrawal forgot the recipient meanwhile
// (PostgreSQL), and the work runs again (errLostRace) to see it unknown.
func (t *Tx) updateRecipient(ctx context.Context, query string, args ...any) error {
	res, err := t.exec(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err == nil && n == 0 {
		err = errLostRace
	}
	return err
}

// Recipient reports whether the tenant knows number (has sent to it or
// received from it) and whether it opted out.
func (db *DB) Recipient(ctx context.Context, tenantID string, env sb.Environment, number string) (known, optedOut bool, err error) {
	var opted int
	err = db.queryRow(ctx, `SELECT opted_out FROM recipients WHERE tenant_id = ? AND environment = ? AND number = ?`,
		tenantID, string(env), number).Scan(&opted)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	return err == nil, opted != 0, err
}

// counterKey names one daily counter.
type counterKey struct {
	tenantID string
	env      sb.Environment
	name     string
	day      string
}

// bumpLater adds one to a daily counter when the transaction is about to
// commit, in the transaction's own shard of the counter (see counters.go).
// The counters of a tenant's sending phones are bumped by every send: done
// at once, each bump would cost a statement and hold the row's lock
// (PostgreSQL) for the rest of the batch. Deferred, a batch adds its
// counts in one statement right before the commit. The counts this
// transaction reads (phoneList) include its pending increments. A counter
// with a limit is bumped only for a unit the work took (take). Call it
// only once the caller's checks are all done, like any write.
func (t *Tx) bumpLater(tenantID string, env sb.Environment, name, day string) {
	t.bumpN(counterKey{tenantID, env, name, day}, 1)
}

// bumpN is bumpLater of n.
func (t *Tx) bumpN(k counterKey, n int64) {
	if t.bumps == nil {
		t.bumps = map[counterKey]int64{}
	}
	t.bumps[k] += n
	if t.counted == nil {
		t.counted = map[counterKey]int64{}
	}
	t.counted[k] += n
}

// flushDeferred writes, on SQLite, what the transaction deferred to its
// commit: the rows of insertMessageLater and the increments of bumpLater.
// PostgreSQL sends them with its COMMIT (see deferredStatement and
// commitPostgres).
func (t *Tx) flushDeferred(ctx context.Context) error {
	return cmp.Or(t.flushMessages(ctx), t.flushClaims(ctx), t.flushBumps(ctx))
}

// deferredStatement is, on PostgreSQL, the statement that writes what the
// transaction deferred to its commit: the rows of insertMessageLater (and
// their claims) and of insertRecipient and the increments of bumpLater, all
// in one statement whose text is the same for any batch (see unnest), so
// that PostgreSQL plans it once per connection rather than once per batch
// size. It is "" when nothing was deferred; counters is how many counter
// rows it adds to.
func (t *Tx) deferredStatement() (query string, args []any, counters int) {
	var stmts []string
	if len(t.messages) > 0 {
		stmts = append(stmts, `INSERT INTO messages (`+messageInsertCols+`) SELECT * FROM `+unnest(messageInsertTypes))
		args = append(args, columns(t.messages, len(messageInsertTypes))...)
	}
	if len(t.claims) > 0 {
		stmts = append(stmts, insertClaims)
		args = append(args, columns(t.claims, len(claimTypes))...)
	}
	if len(t.newRecipients) > 0 {
		stmts = append(stmts, insertRecipients)
		args = append(args, columns(t.newRecipients, len(recipientInsertTypes))...)
	}
	rows := t.counterRows()
	if len(rows) > 0 {
		stmts = append(stmts, insertCounters+` SELECT * FROM `+unnest(counterTypes)+addCounters)
		args = append(args, columns(rows, len(counterTypes))...)
	}
	if len(stmts) == 0 {
		return "", nil, 0
	}
	// One statement: each but the last in a WITH, which PostgreSQL runs
	// whether or not the last refers to it.
	var b strings.Builder
	for i, st := range stmts[:len(stmts)-1] {
		if i == 0 {
			b.WriteString("WITH ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "w%d AS (%s)", i, st)
	}
	if len(stmts) > 1 {
		b.WriteString(" ")
	}
	b.WriteString(stmts[len(stmts)-1])
	return t.db.q(b.String()), args, len(rows)
}

// PostgreSQL types of messageInsertCols and of a daily counter's row.
var (
	messageInsertTypes = []string{"text", "text", "text", "text", "text", "text", "text", "text", "text",
		"text", "text", "text", "text", "text", "bigint", "bigint", "bigint", "bigint", "bigint", "integer",
		"text", "bigint", "text", "text", "integer", "integer",
		"bigint", "bigint", "integer", "text", "text", "bigint"}
	counterTypes = []string{"text", "text", "text", "text", "integer", "bigint"}
)

// unnest is PostgreSQL's unnest of one array parameter per column of the
// given types: `INSERT ... SELECT * FROM unnest(...)` with the values of
// columns inserts any number of rows with a statement whose text does not
// depend on their number.
func unnest(types []string) string {
	var b strings.Builder
	b.WriteString("unnest(")
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?::" + t + "[]")
	}
	b.WriteString(")")
	return b.String()
}

// columns turns rows of n values into n arrays, one per column, for unnest.
func columns(rows [][]any, n int) []any {
	cols := make([]any, n)
	for j := range n {
		c := make([]any, len(rows))
		for i, r := range rows {
			c[i] = r[j]
		}
		cols[j] = c
	}
	return cols
}

// inIDs is the condition `column IN ids` and its arguments: on PostgreSQL
// one array parameter (`= ANY`), so that the statement's text is the same
// for any number of ids.
func (db *DB) inIDs(column string, ids []any) (string, []any) {
	if db.dialect == Postgres {
		return column + ` = ANY(?::text[])`, []any{ids}
	}
	return column + ` IN (` + placeholders(len(ids)) + `)`, ids
}

// flushBumps applies the increments of bumpLater to this transaction's
// shard of each counter (see counters.go), all in one statement, in a
// fixed order.
func (t *Tx) flushBumps(ctx context.Context) error {
	rows := t.counterRows()
	if err := t.insertValues(ctx, insertCounters+` VALUES `, addCounters, len(counterTypes), rows); err != nil {
		return err
	}
	t.db.limits.shardWrites.Add(int64(len(rows)))
	t.bumps = nil
	return nil
}

// counterRows is what bumpLater deferred, one row of daily_counters
// (tenant_id, environment, counter, day, shard, n) per counter, on this
// transaction's shard, in a fixed order: transactions that add to the same
// rows lock them in the same order.
func (t *Tx) counterRows() [][]any {
	keys := slices.SortedFunc(maps.Keys(t.bumps), compareCounterKeys)
	rows := make([][]any, len(keys))
	for i, k := range keys {
		rows[i] = []any{k.tenantID, string(k.env), k.name, k.day, t.shard, t.bumps[k]}
	}
	return rows
}

// The statement that adds rows of counterRows to their counters' shards.
const (
	insertCounters = `INSERT INTO daily_counters (tenant_id, environment, counter, day, shard, n)`
	addCounters    = ` ON CONFLICT (tenant_id, environment, counter, day, shard) DO UPDATE SET n = daily_counters.n + excluded.n`
)

// errLostRace is returned when a transaction finds that one that committed
// after it read a row changed it (a recipient forgotten by a withdrawal,
// PostgreSQL): the work is run again, and its checks then see the committed
// rows.
var errLostRace = errors.New("sqlstore: a concurrent transaction changed a row this one read")

// phoneKey names a tenant's phones on one day.
type phoneKey struct {
	tenantID string
	env      sb.Environment
	day      string
}

// phoneCounter is the name of a phone's daily counter.
func phoneCounter(id string) string { return "phone:" + id }

// sendsOn reports whether any of the phones sends on channel.
func sendsOn(uses []sb.PhoneUse, channel string) bool {
	for _, u := range uses {
		if u.Phone.HasChannel(channel) {
			return true
		}
	}
	return false
}

// txPhones is a tenant's phones as a transaction sees them, with their use
// on the day, this transaction's own counts included.
type txPhones struct {
	uses   []sb.PhoneUse
	index  map[string]int // phone id -> position in uses
	cached bool           // taken from the phone cache
}

// phoneList returns key's phones for this transaction. A transaction takes
// a tenant's phones once, from the phone cache or in one query, and counts
// its own sends on them: a batch of sends costs one query at most, not one
// each.
func (t *Tx) phoneList(ctx context.Context, key phoneKey, now time.Time) (*txPhones, error) {
	if tp := t.phones[key]; tp != nil {
		return tp, nil
	}
	version, ok := t.versions[key.tenantID]
	if !ok {
		if err := t.queryRow(ctx, `SELECT phones_version FROM tenants WHERE id = ?`, key.tenantID).Scan(&version); err != nil {
			return nil, err
		}
		t.db.reads.keepVersion(key.tenantID, version)
	}
	uses, cached := t.db.phoneCache.get(key, version)
	if !cached {
		var err error
		if uses, err = t.readPhones(ctx, key); err != nil {
			return nil, err
		}
		t.db.phoneCache.put(key, version, uses)
	}
	return t.keepPhones(key, uses, cached), nil
}

// readPhones reads key's phones with their use from the database.
func (t *Tx) readPhones(ctx context.Context, key phoneKey) ([]sb.PhoneUse, error) {
	ps, err := phonesWithUse(ctx, t.query, key.tenantID, key.env, key.day, "")
	if err != nil {
		return nil, err
	}
	uses := make([]sb.PhoneUse, len(ps))
	for i, p := range ps {
		uses[i] = sb.PhoneUse{Phone: p, Used: p.SentToday}
	}
	return uses, nil
}

// keepPhones makes uses the transaction's list of key's phones, with what
// the transaction has counted on them so far.
func (t *Tx) keepPhones(key phoneKey, uses []sb.PhoneUse, cached bool) *txPhones {
	tp := &txPhones{uses: uses, index: make(map[string]int, len(uses)), cached: cached}
	for i, u := range uses {
		tp.index[u.Phone.ID] = i
	}
	for k, n := range t.counted {
		if id, ok := strings.CutPrefix(k.name, "phone:"); ok && k.tenantID == key.tenantID && k.env == key.env && k.day == key.day {
			if i, ok := tp.index[id]; ok {
				tp.uses[i].Used += n
			}
		}
	}
	for k := range t.full {
		if id, ok := strings.CutPrefix(k.name, "phone:"); ok && k.tenantID == key.tenantID && k.env == key.env && k.day == key.day {
			if i, ok := tp.index[id]; ok {
				tp.uses[i].Used = max(tp.uses[i].Used, int64(tp.uses[i].Phone.DailyLimit))
			}
		}
	}
	if t.phones == nil {
		t.phones = map[phoneKey]*txPhones{}
	}
	t.phones[key] = tp
	return tp
}

// pickPhone chooses the phone of a message by the routing rules
// (sb.Routing.Pick), and takes a unit of its daily limit if it has one
// (take): a phone whose limit is reached across the nodes counts as full
// for the rest of the transaction, and the pick goes on without it. A pick
// that finds no phone in a list taken from the phone cache looks again in
// the database before it gives up, unless no phone sends on the channel at
// all (a change of channels would have changed the phones' version). The
// caller counts the message on the phone (countOnPhone) or gives the unit
// back (returnTake).
func (t *Tx) pickPhone(ctx context.Context, key phoneKey, channel, from, sticky, exclude string, now time.Time) (*sb.Phone, error) {
	tp, err := t.phoneList(ctx, key, now)
	if err != nil {
		return nil, err
	}
	reread := tp.cached && sendsOn(tp.uses, channel)
	for {
		chosen := t.db.routing.Pick(key.env, tp.uses, channel, from, sticky, exclude, now)
		if chosen == nil {
			if !reread {
				return nil, nil
			}
			reread = false
			uses, err := t.readPhones(ctx, key)
			if err != nil {
				return nil, err
			}
			tp = t.keepPhones(key, uses, false)
			continue
		}
		p := chosen.Phone
		limit := p.LimitOn(now) // the daily limit, or its warm-up's
		if limit <= 0 {
			return p, nil
		}
		k := counterKey{p.TenantID, key.env, phoneCounter(p.ID), key.day}
		ok, err := t.take(ctx, k, limit)
		if err != nil || ok {
			return p, err
		}
		if t.full == nil {
			t.full = map[counterKey]bool{}
		}
		t.full[k] = true
		chosen.Used = max(chosen.Used, int64(p.DailyLimit))
	}
}

// countOnPhone counts a message on its phone's daily counter on day, before
// the commit (see bumpLater); for a phone with a limit, pickPhone took the
// unit it spends.
func (t *Tx) countOnPhone(ctx context.Context, env sb.Environment, p *sb.Phone, day string) error {
	t.bumpLater(p.TenantID, env, phoneCounter(p.ID), day)
	if tp := t.phones[phoneKey{p.TenantID, env, day}]; tp != nil {
		if i, ok := tp.index[p.ID]; ok {
			tp.uses[i].Used++
		}
	}
	return nil
}

var errOptedOut = sb.Errorf(sb.CodeRecipientOptedOut, "The recipient opted out (sent STOP) and has not opted back in (START).")

// noPhone is the NO_PHONE_AVAILABLE of a send that found no phone on any of
// channels (from the number from, when set), with how long to wait before
// trying again when waiting can help (see Routing.NoPhoneWait).
func (t *Tx) noPhone(key phoneKey, channels []string, from string, now time.Time) error {
	var e *sb.Error
	tp := t.phones[key]
	switch {
	case tp != nil && len(tp.uses) == 0:
		e = sb.Errorf(sb.CodeNoPhoneAvailable, "No sending phone is available: this tenant has no sending phone. Add one (POST /v1/phones) or ask the operator to bind a number.")
	case from != "" && tp != nil && simulatedNumber(key.env, tp.uses, from):
		e = sb.Errorf(sb.CodeNoPhoneAvailable, "The phone %s is simulated: live messages go out from the tenant's real phones once it has one.", from)
	case from != "":
		e = sb.Errorf(sb.CodeNoPhoneAvailable, "The phone %s cannot send now: it is offline, at its daily limit or does not send %s.", from, channels[len(channels)-1])
	default:
		e = sb.Errorf(sb.CodeNoPhoneAvailable, "No sending phone is available: every phone is offline or at its daily limit.")
	}
	if tp != nil {
		for _, c := range channels {
			if wait, ok := t.db.routing.NoPhoneWait(key.env, tp.uses, c, from, now); ok && (e.RetryAfter == 0 || wait < e.RetryAfter) {
				e.RetryAfter = wait
			}
		}
	}
	return e
}

// onlyLimited reports whether a phone of key's list would take a message on one
// of channels but for its daily limit (sb.Routing.Full).
func (t *Tx) onlyLimited(key phoneKey, channels []string, from string, now time.Time) bool {
	tp := t.phones[key]
	if tp == nil {
		return false
	}
	for _, c := range channels {
		if t.db.routing.Full(tp.uses, c, from, now) {
			return true
		}
	}
	return false
}

// phoneNumbered returns the phone of key's list whose number is from, or
// nil.
func (t *Tx) phoneNumbered(key phoneKey, from string) *sb.Phone {
	if tp := t.phones[key]; tp != nil && from != "" {
		for _, u := range tp.uses {
			if u.Phone.Number == from {
				return u.Phone
			}
		}
	}
	return nil
}

// simulatedNumber reports whether from is the number of a simulated phone
// that a live message of env must skip (sb.SkipsSimulated).
func simulatedNumber(env sb.Environment, uses []sb.PhoneUse, from string) bool {
	if !sb.SkipsSimulated(env, uses) {
		return false
	}
	for _, u := range uses {
		if u.Phone.Number == from && u.Phone.Kind == sb.PhoneSimulated {
			return true
		}
	}
	return false
}

func errNewContactLimit(limit int) error {
	return sb.Errorf(sb.CodeNewContactLimit, "The daily limit of %d new recipients is reached; messages to known recipients are still allowed.", limit)
}

// AcceptSend stores an outbound message durably, in the API's order of
// checks: opt-out, new-contact limit, phone availability; it picks the
// phone (the one named by From, else the one that first wrote to the
// recipient while it is usable, else the least used today), counts the
// message against the phone's and the tenant's daily limits, records the
// recipient and the idempotency answer, and queues the message. It returns
// once the transaction is on disk.
func (db *DB) AcceptSend(ctx context.Context, s *sb.Send) error {
	m := s.Message
	// A direct send due at once goes to this process's delivery worker
	// in memory, stored as claimed (see handover).
	var h *handover
	if m.ScheduledAt == nil && m.CampaignID == "" {
		if h = db.handover.Load(); h != nil && !h.reserve() {
			h = nil
		}
	}
	err := db.writeRacing(ctx, db.acceptFn(ctx, s, h), rcpKey{m.TenantID, m.Env, m.To})
	if h != nil {
		if err != nil || m.ViaDevice() {
			h.release()
		} else {
			c := *m
			h.ch <- &c // the place is reserved: never blocks
		}
	}
	return err
}

// acceptFn is AcceptSend's work in the transaction; h is the hand-over
// place reserved for the message, if any.
func (db *DB) acceptFn(ctx context.Context, s *sb.Send, h *handover) func(*Tx) error {
	m := s.Message
	return func(tx *Tx) error {
		now := m.CreatedAt
		day := sb.Day(now)
		if s.Idempotency != nil {
			rec, err := idempotency(ctx, tx, m.TenantID, m.Env, s.Idempotency.Key, now)
			if err != nil {
				return err
			}
			if rec != nil {
				if !rec.SameRequest(s.Idempotency) {
					return errIdempotencyConflict
				}
				return &ErrReplay{Record: rec}
			}
		}
		rcp, err := tx.recipient(ctx, m.TenantID, m.Env, m.To)
		if err != nil {
			return err
		}
		if rcp.optedOut {
			return errOptedOut
		}
		if !rcp.known && s.NewContactLimit > 0 {
			// The unit goes back to the node if a later check fails (see
			// batcher.exec).
			ok, waited, err := tx.takeWaited(ctx, counterKey{m.TenantID, m.Env, "new_contacts", day}, s.NewContactLimit)
			if err != nil {
				return err
			}
			if !ok && !waited {
				// The last unit may have gone to a transaction that made
				// this recipient known after it was read here, and has
				// committed since (PostgreSQL: a statement sees what other
				// transactions committed before it began).
				again, err := tx.readRecipient(ctx, m.TenantID, m.Env, m.To)
				if err != nil {
					return err
				}
				waited = again.known
			}
			if !ok && waited {
				// Another transaction used the last units meanwhile: it
				// may have made this recipient known. Run again to see.
				return errLostRace
			}
			if !ok {
				return errNewContactLimit(s.NewContactLimit)
			}
		}
		key := phoneKey{m.TenantID, m.Env, day}
		chosen, err := tx.pickPhone(ctx, key, m.Channel, s.From, rcp.phoneID, "", now)
		if err != nil {
			return err
		}
		tried, detected := []string{m.Channel}, m.Channel
		if chosen == nil && s.Auto && m.Channel == sb.ChannelChat {
			// auto: no phone that sends chat can take it, so it goes by sms.
			m.Channel = sb.ChannelSMS
			tried = append(tried, m.Channel)
			if chosen, err = tx.pickPhone(ctx, key, m.Channel, s.From, rcp.phoneID, "", now); err != nil {
				return err
			}
		}
		switch {
		case chosen == nil && m.Env != sb.Live && !tx.onlyLimited(key, tried, s.From, now):
			// Test mode needs no phone: the simulator sends from its
			// sandbox number, or from the named phone whatever its state.
			m.From, m.PhoneID, m.PhoneKind, m.Channel = sb.SandboxNumber, "", sb.PhoneSimulated, detected
			if ph := tx.phoneNumbered(key, s.From); ph != nil {
				m.From, m.PhoneID, m.PhoneKind = ph.Number, ph.ID, ph.Kind
			} else if s.From != "" {
				return tx.noPhone(key, tried, s.From, now)
			}
		case chosen == nil:
			return tx.noPhone(key, tried, s.From, now)
		default:
			m.From, m.PhoneID, m.PhoneKind = chosen.Number, chosen.ID, chosen.Kind
			if err := tx.countOnPhone(ctx, m.Env, chosen, day); err != nil {
				return err
			}
		}
		m.Engine = sb.EngineOf(m.Env, m.PhoneKind)
		if !s.Auto {
			m.TTL = 0
		} else if m.TTL <= 0 {
			m.TTL = sb.ChatFallbackAfter
		}
		m.ChatFallbackAt = m.ChatDeadline()
		if !rcp.known {
			tx.bumpLater(m.TenantID, m.Env, "new_contacts", day)
			if err := tx.insertRecipient(ctx, rcpKey{m.TenantID, m.Env, m.To}, m.PhoneID, now); err != nil {
				return err
			}
		} else if rcp.phoneID == "" || rcp.reservedBy != "" {
			// A recipient a campaign message made known is known for good
			// once this message goes to it too.
			if err := tx.updateRecipient(ctx, `UPDATE recipients SET phone_id = COALESCE(phone_id, ?), reserved_by = NULL
				WHERE tenant_id = ? AND environment = ? AND number = ?`, m.PhoneID, m.TenantID, string(m.Env), m.To); err != nil {
				return err
			}
			kept := recipient{known: true, phoneID: cmp.Or(rcp.phoneID, m.PhoneID)}
			tx.afterCommit(func() { db.reads.keepRecipient(rcpKey{m.TenantID, m.Env, m.To}, kept) })
		}
		runAt := now
		m.Attempts = 0
		switch {
		case m.ScheduledAt != nil:
			runAt = *m.ScheduledAt
		case m.ViaDevice():
			if err := tx.notifyPhone(ctx, m.PhoneID); err != nil {
				return err
			}
		case h != nil:
			runAt, m.Attempts = now.Add(h.lease), 1 // claimed
		default:
			tx.afterCommit(db.wakeMessages)
		}
		claimer := ""
		if h != nil && m.ScheduledAt == nil && !m.ViaDevice() {
			claimer = db.node
		}
		tx.insertMessageLater(m, &runAt, s.From != "", claimer)
		if s.Idempotency != nil {
			rec := s.Idempotency
			rec.Response = s.Render(m)
			// Clear an expired record of the key, and only an expired one:
			// a live record committed since the check above belongs to a
			// concurrent request with the same key, whose insert must make
			// this one fail (and be run again as a replay).
			if _, err := tx.exec(ctx, `DELETE FROM idempotency_keys WHERE tenant_id = ? AND environment = ? AND key = ? AND created_at <= ?`,
				m.TenantID, string(m.Env), rec.Key, sb.Micros(now.Add(-sb.IdempotencyWindow))); err != nil {
				return err
			}
			if _, err := tx.exec(ctx, `INSERT INTO idempotency_keys (tenant_id, environment, key, request_hash, status, response, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, m.TenantID, string(m.Env), rec.Key, rec.RequestHash, rec.Status, string(rec.Response), sb.Micros(now)); err != nil {
				return err
			}
		}
		return nil
	}
}

// writeRacing is Write for work that checks rows and then writes them
// (recipients, idempotency keys, daily counters). On PostgreSQL two
// transactions can both pass a check on the same row: the later one then
// fails with a unique violation (recipient, Idempotency-Key) or errLostRace
// (a limit) once the earlier commits. Running the work again lets its
// checks see the committed rows: a known recipient, an Idempotency-Key to
// replay, a limit reached.
func (db *DB) writeRacing(ctx context.Context, fn func(*Tx) error, reads rcpKey) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = db.writeReading(ctx, fn, reads)
		if !isUniqueViolation(err) && !errors.Is(err, errLostRace) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

var errIdempotencyConflict = sb.Errorf(sb.CodeIdempotencyConflict, "This Idempotency-Key was already used with a different request body.")

// insertMessage inserts m, due at runAt: in the delivery queue (run_at), or
// for a message its phone's device takes, in the device queue
// (device_due). pinned marks a message whose sender was named.
func (t *Tx) insertMessage(ctx context.Context, m *sb.Message, runAt *time.Time, pinned bool) error {
	_, err := t.exec(ctx, `INSERT INTO messages (`+messageInsertCols+`) VALUES (`+placeholders(messageInsertN)+`)`,
		messageRow(m, runAt, pinned, "")...)
	return err
}

const (
	messageInsertCols = messageCols + `, run_at, device_due, from_pinned, external_id, claimed_by, chat_fallback_at`
	messageInsertN    = 32
)

// messageRow is the values of messageInsertCols for m.
func messageRow(m *sb.Message, runAt *time.Time, pinned bool, claimer string) []any {
	var queue, device any = microsOrNil(runAt), nil
	if m.ViaDevice() {
		queue, device = nil, microsOrNil(runAt)
	}
	return []any{m.ID, m.TenantID, string(m.Env), m.Direction, m.From, m.To, m.Body, m.Channel, m.Status,
		nullStr(m.FailureReason), nullStr(m.ErrorCode), nullStr(m.Template), nullStr(m.CampaignID), nullStr(m.PhoneID),
		sb.Micros(m.CreatedAt), microsOrNil(m.ScheduledAt), microsOrNil(m.SentAt), microsOrNil(m.DeliveredAt), microsOrNil(m.FailedAt),
		m.Attempts, engineOf(m), microsOrNil(m.ReadAt), fallbackFrom(m), fallbackReason(m), ttlSeconds(m), boolInt(m.HighPriority),
		queue, device, boolInt(pinned), nullStr(m.ExternalID), nullStr(claimer), microsOrNil(m.ChatFallbackAt)}
}

// ttlSeconds is the ttl column of m: its TTL in seconds, or NULL.
func ttlSeconds(m *sb.Message) any {
	if m.TTL <= 0 {
		return nil
	}
	return int64(m.TTL / time.Second)
}

// engineOf is the engine column of m: its Engine, else the engine of its
// environment and phone kind.
func engineOf(m *sb.Message) string {
	return m.CarriedBy()
}

func fallbackFrom(m *sb.Message) any {
	if m.Fallback == nil {
		return nil
	}
	return m.Fallback.From
}

func fallbackReason(m *sb.Message) any {
	if m.Fallback == nil {
		return nil
	}
	return m.Fallback.Reason
}

// insertMessageLater is insertMessage right before the commit, with the
// other messages of the transaction in multi-row statements: on
// PostgreSQL a statement is a round trip, and an accepted send needs no
// other. Nothing in the transaction may read the row before then; the
// row is as m is now.
//
// claimer, when set, is the node that holds the message's claim (a send
// handed over to this node's worker): then runAt is the claim's end, and
// the message is stored out of the queue with a row in message_claims
// (see queue.go), written with the messages.
func (t *Tx) insertMessageLater(m *sb.Message, runAt *time.Time, pinned bool, claimer string) {
	if claimer != "" {
		t.claims = append(t.claims, []any{m.ID, claimer, sb.Micros(*runAt)})
		runAt = nil
	}
	t.messages = append(t.messages, messageRow(m, runAt, pinned, claimer))
}

// flushMessages inserts the rows of insertMessageLater.
func (t *Tx) flushMessages(ctx context.Context) error {
	if err := t.insertValues(ctx, `INSERT INTO messages (`+messageInsertCols+`) VALUES `, "", messageInsertN, t.messages); err != nil {
		return err
	}
	t.messages = nil
	return nil
}

// insertValues inserts rows of width values each with head, a VALUES list
// and tail, in statements of up to insertRows rows.
func (t *Tx) insertValues(ctx context.Context, head, tail string, width int, rows [][]any) error {
	for len(rows) > 0 {
		n := min(len(rows), insertRows)
		args := make([]any, 0, n*width)
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		if _, err := t.exec(ctx, head+valueRows(n, width)+tail, args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// Message returns one message of the tenant's environment.
func (db *DB) Message(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Message, error) {
	return scanMessage(db.queryRow(ctx, `SELECT `+messageCols+` FROM messages WHERE tenant_id = ? AND environment = ? AND id = ?`,
		tenantID, string(env), id))
}

// Messages lists the tenant's messages, newest first, after the cursor.
// It returns one item more than the limit when more remain.
func (db *DB) Messages(ctx context.Context, tenantID string, env sb.Environment, f sb.MessageFilter, p sb.Page) ([]*sb.Message, error) {
	var where strings.Builder
	args := []any{tenantID, string(env)}
	where.WriteString(`tenant_id = ? AND environment = ?`)
	if f.Status != "" {
		where.WriteString(` AND status = ?`)
		args = append(args, f.Status)
	}
	if f.Direction != "" {
		where.WriteString(` AND direction = ?`)
		args = append(args, f.Direction)
	}
	if f.To != "" {
		where.WriteString(` AND to_number = ?`)
		args = append(args, f.To)
	}
	if f.From != "" {
		where.WriteString(` AND from_number = ?`)
		args = append(args, f.From)
	}
	if f.Number != "" {
		where.WriteString(` AND (to_number = ? OR from_number = ?)`)
		args = append(args, f.Number, f.Number)
	}
	if f.CampaignID != "" {
		where.WriteString(` AND campaign_id = ?`)
		args = append(args, f.CampaignID)
	}
	// Ids grow with time, and a message's id is made when it is created or
	// just after: the lower bound on id keeps the scan of the tenant's
	// index short, the bounds on created_at make the range exact.
	if !f.Since.IsZero() {
		where.WriteString(` AND id >= ? AND created_at >= ?`)
		args = append(args, sb.IDFloor(f.Since), sb.Micros(f.Since))
	}
	if !f.Until.IsZero() {
		where.WriteString(` AND created_at < ?`)
		args = append(args, sb.Micros(f.Until))
	}
	if f.CreatedAfter != nil {
		where.WriteString(` AND id >= ? AND created_at > ?`)
		args = append(args, sb.IDFloor(*f.CreatedAfter), sb.Micros(*f.CreatedAfter))
	}
	if f.CreatedBefore != nil {
		where.WriteString(` AND created_at < ?`)
		args = append(args, sb.Micros(*f.CreatedBefore))
	}
	if p.After != "" {
		where.WriteString(` AND id < ?`)
		args = append(args, p.After)
	}
	args = append(args, p.Limit+1)
	rows, err := db.query(ctx, `SELECT `+messageCols+` FROM messages WHERE `+where.String()+` ORDER BY id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Inbound stores a message received from a recipient and applies its
// STOP/START keyword; the recipient becomes known and, if it has no phone
// yet, keeps the one it wrote to. A message whose ExternalID its phone
// already has is not stored again: sb.ErrAlreadyStored.
func (db *DB) Inbound(ctx context.Context, m *sb.Message) error {
	return db.writeRacing(ctx, func(tx *Tx) error { return tx.inbound(ctx, m, hookCache{}) }, rcpKey{})
}

// inbound is Inbound in the caller's transaction.
func (tx *Tx) inbound(ctx context.Context, m *sb.Message, hooks hookCache) error {

	now := m.CreatedAt
	if m.ExternalID != "" {
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM messages WHERE phone_id = ? AND external_id = ?`, m.PhoneID, m.ExternalID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return sb.ErrAlreadyStored
		}
	}
	opt := sb.OptKeyword(m.Body)
	rcp, err := tx.recipient(ctx, m.TenantID, m.Env, m.From)
	if err != nil {
		return err
	}
	opted := rcp.optedOut
	switch opt {
	case -1:
		opted = true
	case 1:
		opted = false
	}
	optedInt := 0
	if opted {
		optedInt = 1
	}
	if !rcp.known {
		_, err = tx.exec(ctx, `INSERT INTO recipients (tenant_id, environment, number, opted_out, phone_id, first_seen_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, m.TenantID, string(m.Env), m.From, optedInt, nullStr(m.PhoneID), sb.Micros(now), sb.Micros(now))
	} else {
		err = tx.updateRecipient(ctx, `UPDATE recipients SET opted_out = ?, phone_id = COALESCE(phone_id, ?), updated_at = ?, reserved_by = NULL
			WHERE tenant_id = ? AND environment = ? AND number = ?`, optedInt, nullStr(m.PhoneID), sb.Micros(now), m.TenantID, string(m.Env), m.From)
	}
	if err != nil {
		return err
	}
	// Kept as it was read, the recipient would cost the next batch of
	// sends to it a second run (see keptreads.go).
	tx.afterCommit(func() { tx.db.reads.keepRecipient(rcpKey{m.TenantID, m.Env, m.From}, recipient{}) })
	if err := tx.insertMessage(ctx, m, nil, false); err != nil {
		return err
	}
	return tx.emit(ctx, hooks, m, sb.EventReceived)
}
