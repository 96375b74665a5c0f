package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

const messageCols = `id, tenant_id, environment, direction, from_number, to_number, body, channel, status,
	failure_reason, error_code, template, campaign_id, phone_id, created_at, scheduled_at, sent_at, delivered_at, failed_at, attempts`

func scanMessage(row interface{ Scan(...any) error }) (*sb.Message, error) {
	return scanMessageWith(row)
}

// scanMessageWith scans messageCols and then the extra columns into extra.
func scanMessageWith(row interface{ Scan(...any) error }, extra ...any) (*sb.Message, error) {
	var m sb.Message
	var env string
	var reason, code, tmpl, campaign, phone sql.NullString
	var created int64
	var sched, sent, delivered, failed sql.NullInt64
	err := row.Scan(append([]any{&m.ID, &m.TenantID, &env, &m.Direction, &m.From, &m.To, &m.Body, &m.Channel, &m.Status,
		&reason, &code, &tmpl, &campaign, &phone, &created, &sched, &sent, &delivered, &failed, &m.Attempts}, extra...)...)
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

func (t *Tx) recipient(ctx context.Context, tenantID string, env sb.Environment, number string) (recipient, error) {
	var r recipient
	var opted int
	var phone, reserved sql.NullString
	err := t.queryRow(ctx, `SELECT opted_out, phone_id, reserved_by FROM recipients WHERE tenant_id = ? AND environment = ? AND number = ?`,
		tenantID, string(env), number).Scan(&opted, &phone, &reserved)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	return recipient{known: true, optedOut: opted != 0, phoneID: phone.String, reservedBy: reserved.String}, nil
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

func (t *Tx) counter(ctx context.Context, tenantID string, env sb.Environment, name, day string) (int64, error) {
	var n int64
	err := t.queryRow(ctx, `SELECT n FROM daily_counters WHERE tenant_id = ? AND environment = ? AND counter = ? AND day = ?`,
		tenantID, string(env), name, day).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// bump adds one to a daily counter at once, and notes it (see count).
func (t *Tx) bump(ctx context.Context, tenantID string, env sb.Environment, name, day string) error {
	_, err := t.exec(ctx, `INSERT INTO daily_counters (tenant_id, environment, counter, day, n) VALUES (?, ?, ?, ?, 1)
		ON CONFLICT (tenant_id, environment, counter, day) DO UPDATE SET n = daily_counters.n + 1`, tenantID, string(env), name, day)
	if err == nil {
		t.count(counterKey{tenantID, env, name, day})
	}
	return err
}

// counterKey names one daily counter.
type counterKey struct {
	tenantID string
	env      sb.Environment
	name     string
	day      string
}

// bumpLater adds one to a daily counter that has no limit, when the
// transaction is about to commit. The counters of a tenant's sending phones
// are bumped by every send: done at once, the first bump would hold the
// counter row's lock (PostgreSQL) for the rest of a whole batch and its
// commit, so concurrent writers would queue behind it, and every send
// would cost a statement. Deferred, a batch adds its count to each counter
// in one statement, right before the commit. The counts this transaction
// reads (phoneList) include its pending increments. Call it only once
// the caller's checks are all done, like any write.
func (t *Tx) bumpLater(tenantID string, env sb.Environment, name, day string) {
	if t.bumps == nil {
		t.bumps = map[counterKey]int64{}
	}
	k := counterKey{tenantID, env, name, day}
	t.bumps[k]++
	t.count(k)
}

// count notes an increment this transaction made to a counter.
func (t *Tx) count(k counterKey) {
	if t.counted == nil {
		t.counted = map[counterKey]int64{}
	}
	t.counted[k]++
}

// flushBumps applies the increments of bumpLater, counter by counter in a
// fixed order (so that writers lock the rows in the same order).
func (t *Tx) flushBumps(ctx context.Context) error {
	if len(t.bumps) == 0 {
		return nil
	}
	keys := make([]counterKey, 0, len(t.bumps))
	for k := range t.bumps {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b counterKey) int {
		return cmp.Or(cmp.Compare(a.tenantID, b.tenantID), cmp.Compare(a.env, b.env), cmp.Compare(a.name, b.name), cmp.Compare(a.day, b.day))
	})
	for _, k := range keys {
		if _, err := t.exec(ctx, `INSERT INTO daily_counters (tenant_id, environment, counter, day, n) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (tenant_id, environment, counter, day) DO UPDATE SET n = daily_counters.n + excluded.n`,
			k.tenantID, string(k.env), k.name, k.day, t.bumps[k]); err != nil {
			return err
		}
	}
	t.bumps = nil
	return nil
}

// errLostRace is returned by bumpUnder when a transaction that committed
// after this one read the counter has used up the limit (PostgreSQL, several
// writers): the work is run again, and its checks then see the committed
// count and answer the limit's error.
var errLostRace = errors.New("sqlstore: a concurrent transaction reached the daily limit first")

// bumpUnder is bump for a counter with a daily limit (0: none) that the
// caller has already checked. The increment is conditional, so two
// transactions that both read a count under the limit cannot both pass it:
// the later one waits for the earlier's row lock and then finds the limit
// reached (errLostRace).
func (t *Tx) bumpUnder(ctx context.Context, tenantID string, env sb.Environment, name, day string, limit int) error {
	if limit <= 0 {
		return t.bump(ctx, tenantID, env, name, day)
	}
	res, err := t.exec(ctx, `INSERT INTO daily_counters (tenant_id, environment, counter, day, n) VALUES (?, ?, ?, ?, 1)
		ON CONFLICT (tenant_id, environment, counter, day) DO UPDATE SET n = daily_counters.n + 1 WHERE daily_counters.n < ?`,
		tenantID, string(env), name, day, limit)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		t.db.phoneCache.forget(tenantID) // it counted less than the database
		return errLostRace
	}
	t.count(counterKey{tenantID, env, name, day})
	return nil
}

// NewContactsToday returns how many first-time recipients the tenant has
// messaged on day.
func (db *DB) NewContactsToday(ctx context.Context, tenantID string, env sb.Environment, day string) (int64, error) {
	var n int64
	err := db.queryRow(ctx, `SELECT n FROM daily_counters WHERE tenant_id = ? AND environment = ? AND counter = 'new_contacts' AND day = ?`,
		tenantID, string(env), day).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

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
	var version int64
	if err := t.queryRow(ctx, `SELECT phones_version FROM tenants WHERE id = ?`, key.tenantID).Scan(&version); err != nil {
		return nil, err
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
	if t.phones == nil {
		t.phones = map[phoneKey]*txPhones{}
	}
	t.phones[key] = tp
	return tp
}

// pickPhone chooses the phone of a message by the routing rules
// (sb.Routing.Pick). A pick that finds no phone in a list taken from the
// phone cache looks again in the database before it gives up, unless no
// phone sends on the channel at all (a change of channels would have
// changed the phones' version).
func (t *Tx) pickPhone(ctx context.Context, key phoneKey, channel, from, sticky, exclude string, now time.Time) (*sb.Phone, error) {
	tp, err := t.phoneList(ctx, key, now)
	if err != nil {
		return nil, err
	}
	chosen := t.db.routing.Pick(tp.uses, channel, from, sticky, exclude, now)
	if chosen == nil && tp.cached && sendsOn(tp.uses, channel) {
		uses, err := t.readPhones(ctx, key)
		if err != nil {
			return nil, err
		}
		tp = t.keepPhones(key, uses, false)
		chosen = t.db.routing.Pick(tp.uses, channel, from, sticky, exclude, now)
	}
	if chosen == nil {
		return nil, nil
	}
	return chosen.Phone, nil
}

// countOnPhone counts a message against its phone's daily limit on day:
// at once (and conditionally) when the phone has a limit, before the
// commit when it has none (see bumpLater).
func (t *Tx) countOnPhone(ctx context.Context, env sb.Environment, p *sb.Phone, day string) error {
	if p.DailyLimit > 0 {
		if err := t.bumpUnder(ctx, p.TenantID, env, phoneCounter(p.ID), day, p.DailyLimit); err != nil {
			return err
		}
	} else {
		t.bumpLater(p.TenantID, env, phoneCounter(p.ID), day)
	}
	if tp := t.phones[phoneKey{p.TenantID, env, day}]; tp != nil {
		if i, ok := tp.index[p.ID]; ok {
			tp.uses[i].Used++
		}
	}
	return nil
}

var (
	errOptedOut = sb.Errorf(sb.CodeRecipientOptedOut, "The recipient opted out (sent STOP) and has not opted back in (START).")
	errNoPhone  = sb.Errorf(sb.CodeNoPhoneAvailable, "No sending phone is available: every phone is offline or at its daily limit.")
)

func errNewContactLimit(limit int) error {
	return sb.Errorf(sb.CodeNewContactLimit, "The daily limit of %d new recipients is reached; messages to known recipients are still allowed.", limit)
}

// AcceptSend stores an outbound message durably, in the contract's order of
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
	err := db.writeRacing(ctx, db.acceptFn(ctx, s, h))
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
			n, err := tx.counter(ctx, m.TenantID, m.Env, "new_contacts", day)
			if err != nil {
				return err
			}
			if n >= int64(s.NewContactLimit) {
				return errNewContactLimit(s.NewContactLimit)
			}
		}
		key := phoneKey{m.TenantID, m.Env, day}
		chosen, err := tx.pickPhone(ctx, key, m.Channel, s.From, rcp.phoneID, "", now)
		if err != nil {
			return err
		}
		if chosen == nil && s.Auto && m.Channel == sb.ChannelChat {
			// auto: no phone that sends chat can take it, so it goes by sms.
			m.Channel = sb.ChannelSMS
			if chosen, err = tx.pickPhone(ctx, key, m.Channel, s.From, rcp.phoneID, "", now); err != nil {
				return err
			}
		}
		if chosen == nil {
			if s.From != "" {
				return sb.Errorf(sb.CodeNoPhoneAvailable, "The phone %s cannot send now: it is offline, at its daily limit or does not send %s.", s.From, m.Channel)
			}
			return errNoPhone
		}
		m.From, m.PhoneID, m.PhoneKind = chosen.Number, chosen.ID, chosen.Kind
		if err := tx.countOnPhone(ctx, m.Env, chosen, day); err != nil {
			return err
		}
		if !rcp.known {
			if err := tx.bumpUnder(ctx, m.TenantID, m.Env, "new_contacts", day, s.NewContactLimit); err != nil {
				return err
			}
			if _, err := tx.exec(ctx, `INSERT INTO recipients (tenant_id, environment, number, opted_out, phone_id, first_seen_at, updated_at)
				VALUES (?, ?, ?, 0, ?, ?, ?)`, m.TenantID, string(m.Env), m.To, m.PhoneID, sb.Micros(now), sb.Micros(now)); err != nil {
				return err
			}
		} else if rcp.phoneID == "" || rcp.reservedBy != "" {
			// A recipient a campaign message made known is known for good
			// once this message goes to it too.
			if err := tx.updateRecipient(ctx, `UPDATE recipients SET phone_id = COALESCE(phone_id, ?), reserved_by = NULL
				WHERE tenant_id = ? AND environment = ? AND number = ?`, m.PhoneID, m.TenantID, string(m.Env), m.To); err != nil {
				return err
			}
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
		if err := tx.insertMessage(ctx, m, &runAt, s.From != "", claimer); err != nil {
			return err
		}
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
func (db *DB) writeRacing(ctx context.Context, fn func(*Tx) error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = db.Write(ctx, fn)
		if !isUniqueViolation(err) && !errors.Is(err, errLostRace) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

var errIdempotencyConflict = sb.Errorf(sb.CodeIdempotencyConflict, "This Idempotency-Key was already used with a different request body.")

// insertMessage inserts m, due at runAt: in the delivery queue (run_at), or
// for a message its phone's device takes, in the device queue
// (device_due). pinned marks a message whose sender was named; claimer,
// when set, is the node that holds its claim (a send handed over to this
// node's worker).
func (t *Tx) insertMessage(ctx context.Context, m *sb.Message, runAt *time.Time, pinned bool, claimer string) error {
	var queue, device any = microsOrNil(runAt), nil
	if m.ViaDevice() {
		queue, device = nil, microsOrNil(runAt)
	}
	_, err := t.exec(ctx, `INSERT INTO messages (`+messageCols+`, run_at, device_due, from_pinned, external_id, claimed_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.TenantID, string(m.Env), m.Direction, m.From, m.To, m.Body, m.Channel, m.Status,
		nullStr(m.FailureReason), nullStr(m.ErrorCode), nullStr(m.Template), nullStr(m.CampaignID), nullStr(m.PhoneID),
		sb.Micros(m.CreatedAt), microsOrNil(m.ScheduledAt), microsOrNil(m.SentAt), microsOrNil(m.DeliveredAt), microsOrNil(m.FailedAt),
		m.Attempts, queue, device, boolInt(pinned), nullStr(m.ExternalID), nullStr(claimer))
	return err
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
	return db.writeRacing(ctx, func(tx *Tx) error { return tx.inbound(ctx, m, hookCache{}) })
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
	if err := tx.insertMessage(ctx, m, nil, false, ""); err != nil {
		return err
	}
	return tx.emit(ctx, hooks, m, sb.EventReceived)
}
