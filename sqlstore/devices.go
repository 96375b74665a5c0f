package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// The device queue. A live message of an android phone waits in device_due
// for the phone's device, which takes it (TakeDeviceMessages) and reports
// what becomes of it (ReportDeviceStates). A message handed to a device is
// marked with the device's id and the validUntil handed with it, and from
// then on its device_due is when it fails with its outcome unknown if its
// device never reports on it (Routing.OutcomeUnknownAt), so that the
// sweeper's question (SweepDeviceMessages) reads only what it must act on.
// What may move and when is decided by the routing rules
// (Routing.Sweep, ProvesUnsent); the store hands them rows. Every move of a
// message from one phone to another counts it against the new phone's
// daily limit.

// DeviceBatch is the most messages handed to a device at once.
const DeviceBatch = 100

// TakeDeviceMessages returns the messages waiting for the phone's device:
// first those it was handed and has not reported on (whatever their
// validUntil, which stays the one first handed: the app knows a message by
// its id and answers one it has with its state, and fails one it never got
// as "TTL expired" once its validUntil has passed), then new ones that are
// due, up to DeviceBatch in all and the phone's per-minute pacing, which
// are handed now with validUntil now+validFor; fresh is how many of msgs,
// at the end, were handed now. next is when the pacing allows the next
// message, when messages wait for it; zero otherwise. A device that is not
// (or no longer) the phone's gets INVALID_TOKEN.
func (db *DB) TakeDeviceMessages(ctx context.Context, phoneID, deviceID string, lifo bool, now time.Time, validFor time.Duration) (msgs []*sb.Message, fresh int, next time.Time, err error) {
	order := "ASC"
	if lifo {
		order = "DESC"
	}
	err = db.Write(ctx, func(tx *Tx) error {
		msgs, fresh, next = msgs[:0], 0, time.Time{}
		var rate sql.NullInt64
		var nextAt sql.NullInt64
		err := tx.queryRow(ctx, `SELECT rate_limit, next_handout_at FROM phones WHERE id = ? AND device_id = ?`, phoneID, deviceID).Scan(&rate, &nextAt)
		if errors.Is(err, sql.ErrNoRows) {
			return sb.Errorf(sb.CodeInvalidToken, "This device is no longer paired with the phone.")
		}
		if err != nil {
			return err
		}
		held, err := tx.deviceMessages(ctx, `device_id = ? AND device_due IS NOT NULL AND phone_id = ? AND status = 'queued'
			ORDER BY priority DESC, device_due `+order+`, id `+order+` LIMIT ?`, deviceID, phoneID, DeviceBatch)
		if err != nil {
			return err
		}
		// High priority first: handed out before the others, whatever the
		// order asked for.
		waiting, err := tx.deviceMessages(ctx, `phone_id = ? AND device_due IS NOT NULL AND device_due <= ? AND device_id IS NULL AND status = 'queued'
			ORDER BY priority DESC, device_due `+order+`, id `+order+` LIMIT ?`, phoneID, sb.Micros(now), DeviceBatch-len(held))
		if err != nil {
			return err
		}
		// Pacing: with a rate of r a minute, one message every minute/r.
		room := len(waiting)
		var interval time.Duration
		t := now
		if rate.Valid && rate.Int64 > 0 {
			interval = time.Minute / time.Duration(rate.Int64)
			if nextAt.Valid && sb.FromMicros(nextAt.Int64).After(now) {
				room, t = 0, sb.FromMicros(nextAt.Int64)
			} else {
				room = min(room, 1)
			}
		}
		taken := waiting[:room]
		if len(taken) > 0 {
			valid := now.Add(validFor).Truncate(time.Millisecond)
			args := []any{deviceID, sb.Micros(valid), sb.Micros(db.routing.OutcomeUnknownAt(valid))}
			for _, m := range taken {
				args = append(args, m.ID)
				m.ValidUntil, m.Attempts = &valid, m.Attempts+1
			}
			if _, err := tx.exec(ctx, `UPDATE messages SET device_id = ?, valid_until = ?, device_due = ?, attempts = attempts + 1
				WHERE id IN (`+placeholders(len(taken))+`) AND device_id IS NULL`, args...); err != nil {
				return err
			}
		}
		msgs, fresh = append(held, taken...), len(taken)
		if interval > 0 {
			if len(taken) > 0 {
				t = now.Add(interval)
				if _, err := tx.exec(ctx, `UPDATE phones SET next_handout_at = ? WHERE id = ?`, sb.Micros(t), phoneID); err != nil {
					return err
				}
			}
			if len(waiting) > len(taken) {
				next = t
			}
		}
		return nil
	})
	return msgs, fresh, next, err
}

// deviceMessages reads the messages of the device queue that where (a
// WHERE clause with its ORDER BY and LIMIT, the limit the last argument)
// selects, each with its validUntil.
func (t *Tx) deviceMessages(ctx context.Context, where string, args ...any) ([]*sb.Message, error) {
	if args[len(args)-1].(int) <= 0 {
		return nil, nil
	}
	rows, err := t.query(ctx, `SELECT `+messageCols+`, valid_until, cancel_at FROM messages WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Message
	for rows.Next() {
		var valid, cancelAt sql.NullInt64
		m, err := scanMessageWith(rows, &valid, &cancelAt)
		if err != nil {
			return nil, err
		}
		m.ValidUntil, m.PhoneKind, m.Cancelling = optTime(valid), sb.PhoneAndroid, cancelAt.Valid
		out = append(out, m)
	}
	return out, rows.Err()
}

// DeviceWorkWaiting reports whether the phone's device has something to
// take now (a safety net for a wake-up that was lost): a message that is
// due, or one it holds past its validUntil without a report, or one it
// holds whose cancel it has not confirmed, which it is handed again so
// that it reports.
func (db *DB) DeviceWorkWaiting(ctx context.Context, phoneID, deviceID string, now time.Time) (bool, error) {
	var n int
	err := db.queryRow(ctx, `SELECT COUNT(*) FROM messages WHERE phone_id = ? AND device_due IS NOT NULL AND status = 'queued'
		AND ((device_id IS NULL AND device_due <= ?) OR (device_id = ? AND (valid_until <= ? OR cancel_at IS NOT NULL)))`,
		phoneID, sb.Micros(now), deviceID, sb.Micros(now)).Scan(&n)
	return n > 0, err
}

// DeviceCancels returns the ids of the messages the device holds whose
// cancel was asked of it and that it has not confirmed (nor reported
// Processed): what its event stream says MessageCancelled for.
func (db *DB) DeviceCancels(ctx context.Context, deviceID string) ([]string, error) {
	rows, err := db.query(ctx, `SELECT id FROM messages WHERE device_id = ? AND device_due IS NOT NULL AND cancel_at IS NOT NULL
		AND status = 'queued' ORDER BY id`, deviceID)
	if err != nil {
		return nil, err
	}
	return scanStrings(rows)
}

// cancelOnDevice makes a message its device withdrew canceled: failed with
// CAMPAIGN_CANCELED at at, what it reserved of the daily limits given back,
// and message.failed emitted.
func (t *Tx) cancelOnDevice(ctx context.Context, id string, at time.Time) error {
	rows, err := t.query(ctx, `UPDATE messages SET status = 'failed', failed_at = ?, failure_reason = ?, error_code = ?, run_at = NULL, device_due = NULL
		WHERE id = ? AND status = 'queued' RETURNING `+messageCols+`, counted_day, counted_phone`,
		sb.Micros(at), sb.CanceledOnPhoneReason, sb.ErrorCodeCampaignCanceled, id)
	if err != nil {
		return err
	}
	msgs, err := scanWithdrawn(rows)
	if err != nil || len(msgs) == 0 {
		return err
	}
	return t.releaseWithdrawn(ctx, msgs[0].TenantID, msgs[0].Env, msgs)
}

// ReportDeviceStates applies what a device reports about messages it holds.
// A report about a message the device does not hold (never handed to it,
// or moved to another phone since), an unknown state, and one that does not
// move the message forward (a repeat, or a stale report arriving late)
// change nothing. The states make the statuses of sb.DeviceStatus:
// Processed and Sent make a message sent (sent_at the first of them), and
// it leaves the device queue; Delivered and Failed make it final with its
// event. A report that proves the message unsent (sb.ProvesUnsent) moves it
// to another phone instead of failing it, or fails it when no other phone
// can take it (this device would report the same again).
//
// A message whose cancel was asked of its device (see WithdrawCampaign)
// becomes canceled, failed with CAMPAIGN_CANCELED, when the device reports
// it Cancelled, or proves it unsent (sb.ConfirmsCancel); a Cancelled report
// on a message the device has reported Processed changes nothing.
//
// The reports that are outcomes for quarantine (sb.CountsForQuarantine) are
// added to the phone's recent outcomes, and a phone in rotation whose
// policy they trip is quarantined (phone.quarantined).
func (db *DB) ReportDeviceStates(ctx context.Context, phoneID, deviceID string, reports []sb.DeviceReport, now time.Time) error {
	return db.Write(ctx, func(tx *Tx) error {
		var outcomes []sb.SendOutcome
		for _, r := range reports {
			rank := sb.DeviceStateRank(r.State)
			if rank == 0 {
				continue
			}
			var status string
			var state, holder sql.NullString
			var created int64
			var cancelAt sql.NullInt64
			err := tx.queryRow(ctx, `SELECT status, device_state, device_id, created_at, cancel_at FROM messages WHERE id = ? AND phone_id = ?`,
				r.MessageID, phoneID).Scan(&status, &state, &holder, &created, &cancelAt)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if holder.String != deviceID || (status != sb.StatusQueued && status != sb.StatusSent) || rank <= sb.DeviceStateRank(state.String) {
				continue
			}
			floor := sb.FromMicros(created)
			at := sb.DeviceTime(r.At, floor, now)
			canceled := status == sb.StatusQueued && sb.ConfirmsCancel(r, state.String, cancelAt.Valid)
			if r.State == sb.DeviceCancelled && !canceled {
				continue // the app cancels only what it has not processed: a sent message stays sent
			}
			if o, ok := sb.CountsForQuarantine(r, state.String); ok {
				o.At = now
				outcomes = append(outcomes, o)
			}
			if canceled {
				if cancelAt.Valid {
					err = tx.cancelOnDevice(ctx, r.MessageID, at)
				} else { // canceled on the phone by its owner: not sent, and not to be sent
					err = tx.finish(ctx, []sb.Outcome{{MessageID: r.MessageID, FailureReason: sb.CanceledByPhoneReason, At: at}})
				}
				if err != nil {
					return err
				}
				continue
			}
			var sentAt time.Time // when the device says the message left it, if it says
			if !r.SentAt.IsZero() {
				sentAt = sb.DeviceTime(r.SentAt, floor, at)
			}
			switch sb.DeviceStatus(r.State) {
			case sb.StatusQueued:
				_, err = tx.exec(ctx, `UPDATE messages SET device_state = ? WHERE id = ?`, r.State, r.MessageID)
			case sb.StatusSent:
				if sentAt.IsZero() {
					sentAt = at
				}
				_, err = tx.exec(ctx, `UPDATE messages SET device_state = ?, status = 'sent', sent_at = COALESCE(sent_at, ?), device_due = NULL
					WHERE id = ? AND status IN ('queued', 'sent')`, r.State, sb.Micros(sentAt), r.MessageID)
			case sb.StatusFailed:
				if sb.ProvesUnsent(r, state.String) && status == sb.StatusQueued {
					// Not sent: another phone may send it. Not this one: the
					// app knows the message by its id and would report the
					// same again.
					var m *routeRow
					if m, err = tx.routeRow(ctx, r.MessageID); err == nil {
						_, err = tx.reroute(ctx, m, now, routeCache{}, false)
					}
					if !errors.Is(err, errNowhere) {
						break
					}
					r.Error = "TTL expired: the phone did not send the message before its validUntil, and no other phone could take it"
				}
				reason := r.Error
				if reason == "" {
					reason = "the phone reported the message as failed"
				}
				err = tx.finish(ctx, []sb.Outcome{{MessageID: r.MessageID, FailureReason: reason, At: at, SentAt: sentAt}})
			case sb.StatusDelivered:
				if sentAt.IsZero() {
					sentAt = at
				}
				err = tx.finish(ctx, []sb.Outcome{{MessageID: r.MessageID, Delivered: true, At: at, SentAt: sentAt}})
			}
			if err != nil {
				return err
			}
		}
		if len(outcomes) == 0 {
			return nil
		}
		return tx.recordOutcomes(ctx, phoneID, outcomes, now)
	})
}

// recordOutcomes adds outcomes to the phone's recent ones and quarantines
// it when they trip its policy while it is in rotation.
func (t *Tx) recordOutcomes(ctx context.Context, phoneID string, outcomes []sb.SendOutcome, now time.Time) error {
	var tenantID, number, status string
	var recentJSON sql.NullString
	var qFailed, qOf sql.NullInt64
	err := t.queryRow(ctx, `SELECT tenant_id, number, status, send_outcomes, quarantine_failed, quarantine_of FROM phones WHERE id = ?`, phoneID).
		Scan(&tenantID, &number, &status, &recentJSON, &qFailed, &qOf)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	policy := sb.QuarantinePolicy{Failed: int(qFailed.Int64), Of: int(qOf.Int64)}
	var recent []sb.SendOutcome
	if recentJSON.Valid {
		_ = json.Unmarshal([]byte(recentJSON.String), &recent) // unreadable: start again
	}
	recent = policy.Recent(append(recent, outcomes...), now)
	b, err := json.Marshal(recent)
	if err != nil {
		return err
	}
	if _, err := t.exec(ctx, `UPDATE phones SET send_outcomes = ? WHERE id = ?`, string(b), phoneID); err != nil {
		return err
	}
	if status != sb.PhoneOnline {
		return nil
	}
	q := policy.Trips(recent, now)
	if q == nil {
		return nil
	}
	reasons, err := json.Marshal(q.Reasons)
	if err != nil {
		return err
	}
	if _, err := t.exec(ctx, `UPDATE phones SET status = ?, quarantined_at = ?, quarantine_reasons = ? WHERE id = ?`,
		sb.PhoneQuarantined, sb.Micros(now), string(reasons), phoneID); err != nil {
		return err
	}
	// Its messages no device holds are due at once, for the sweeper to move.
	if _, err := t.exec(ctx, `UPDATE messages SET device_due = ? WHERE phone_id = ? AND device_due IS NOT NULL AND device_id IS NULL AND status = 'queued'`,
		sb.Micros(now), phoneID); err != nil {
		return err
	}
	t.afterCommit(func() {
		slog.Warn("phone quarantined: its own reports say its sends fail", "tenant_id", tenantID, "phone_id", phoneID,
			"policy_failed", policy.OrDefault().Failed, "policy_of", policy.OrDefault().Of)
	})
	ev := sb.PhoneEvent{Event: sb.EventPhoneQuarantined, PhoneID: phoneID, Number: number, Reason: strings.Join(q.Reasons, "; ")}
	if err := t.emitPhone(ctx, tenantID, ev, now); err != nil {
		return err
	}
	return t.phonesChanged(ctx, tenantID)
}

// AnnouncePresence emits phone.offline for each paired android phone in
// rotation that went offline since it was last announced (its device not
// seen since cutoff, sb.Routing.SeenCutoff), and phone.online for each
// that came back, at most limit of them; it returns how many of each. A
// phone paired for the first time is announced online. Each change is
// announced once across the nodes: the row's presence is changed only
// where it still says what was read.
func (db *DB) AnnouncePresence(ctx context.Context, now, cutoff time.Time, limit int) (offline, online int, err error) {
	const changed = `SELECT id, tenant_id, number, presence, last_seen_at FROM phones
			WHERE kind = ? AND status = ? AND device_id IS NOT NULL AND last_seen_at IS NOT NULL AND (
				((presence IS NULL OR presence = 'online') AND last_seen_at <= ?) OR
				((presence IS NULL OR presence = 'offline') AND last_seen_at > ?)) LIMIT ?`
	args := []any{sb.PhoneAndroid, sb.PhoneOnline, sb.Micros(cutoff), sb.Micros(cutoff), limit}
	// Asked first outside a write transaction: most passes find nothing,
	// and a write transaction costs a commit (and holds a group commit).
	var any bool
	if err := db.queryRow(ctx, `SELECT COUNT(*) > 0 FROM (`+changed+`) c`, args...).Scan(&any); err != nil || !any {
		return 0, 0, err
	}
	err = db.Write(ctx, func(tx *Tx) error {
		offline, online = 0, 0
		rows, err := tx.query(ctx, changed, args...)
		if err != nil {
			return err
		}
		type change struct {
			id, tenantID, number string
			was                  sql.NullString
			seen                 int64
		}
		var todo []change
		for rows.Next() {
			var c change
			if err := rows.Scan(&c.id, &c.tenantID, &c.number, &c.was, &c.seen); err != nil {
				rows.Close()
				return err
			}
			todo = append(todo, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, c := range todo {
			seen := sb.FromMicros(c.seen)
			next, event, reason := sb.PhoneOnline, sb.EventPhoneOnline, ""
			if !seen.After(cutoff) {
				if !c.was.Valid {
					// Never announced and already quiet: nothing changed
					// that anyone was told of.
					next, event = sb.PhoneOffline, ""
				} else {
					next, event = sb.PhoneOffline, sb.EventPhoneOffline
					reason = "its device was last seen at " + seen.UTC().Format(time.RFC3339)
				}
			}
			res, err := tx.exec(ctx, `UPDATE phones SET presence = ? WHERE id = ? AND presence IS NOT DISTINCT FROM ?`, next, c.id, c.was)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 || event == "" {
				continue
			}
			if err := tx.emitPhone(ctx, c.tenantID, sb.PhoneEvent{Event: event, PhoneID: c.id, Number: c.number, Reason: reason}, now); err != nil {
				return err
			}
			if event == sb.EventPhoneOffline {
				offline++
			} else {
				online++
			}
		}
		return nil
	})
	return offline, online, err
}

// DeviceConfig returns the hashes of the settings and the webhook
// subscriptions the phone's device last fetched ("" for none since it
// paired).
func (db *DB) DeviceConfig(ctx context.Context, phoneID, deviceID string) (settings, webhooks string, err error) {
	var s, w sql.NullString
	err = db.queryRow(ctx, `SELECT settings_hash, webhooks_hash FROM phones WHERE id = ? AND device_id = ?`, phoneID, deviceID).Scan(&s, &w)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	return s.String, w.String, err
}

// SetDeviceConfig records the hash of what the phone's device just fetched:
// its settings (webhooks false) or its webhook subscriptions.
func (db *DB) SetDeviceConfig(ctx context.Context, phoneID, deviceID string, webhooks bool, hash string) error {
	col := "settings_hash"
	if webhooks {
		col = "webhooks_hash"
	}
	return db.Write(ctx, func(tx *Tx) error {
		_, err := tx.exec(ctx, `UPDATE phones SET `+col+` = ? WHERE id = ? AND device_id = ? AND (`+col+` IS NULL OR `+col+` <> ?)`,
			hash, phoneID, deviceID, hash)
		return err
	})
}

// RecordHealth stores what a paired device said of itself in its ping, if
// deviceID is still the phone's device and no newer health is stored: a
// node writes the confirmations of unchanged healths late, together
// (android's flushHealth), and one must not overwrite the change another
// node wrote meanwhile.
func (db *DB) RecordHealth(ctx context.Context, phoneID, deviceID string, h sb.Health) error {
	var battery any = h.BatteryLevel
	if h.BatteryLevel < 0 {
		battery = nil
	}
	at := sb.Micros(h.ReportedAt)
	return db.Write(ctx, func(tx *Tx) error {
		_, err := tx.exec(ctx, `UPDATE phones SET health_battery = ?, health_charging = ?, health_network = ?, health_failed = ?, health_at = ?
			WHERE (id = ? OR device_of = ?) AND device_id = ? AND (health_at IS NULL OR health_at <= ?)`,
			battery, boolInt(h.Charging), h.Network, h.FailedLastHour, at, phoneID, phoneID, deviceID, at)
		return err
	})
}

// routeRow is what moving a message to another phone needs to know.
type routeRow struct {
	id, tenantID, to, channel string
	phoneID, from             string
	pinned                    bool
}

func (t *Tx) routeRow(ctx context.Context, id string) (*routeRow, error) {
	var r routeRow
	var phone sql.NullString
	var pinned int
	err := t.queryRow(ctx, `SELECT id, tenant_id, to_number, channel, phone_id, from_number, from_pinned FROM messages WHERE id = ?`, id).
		Scan(&r.id, &r.tenantID, &r.to, &r.channel, &phone, &r.from, &pinned)
	r.phoneID, r.pinned = phone.String, pinned != 0
	return &r, err
}

// routeCache remembers, within one pass, the tenants and channels for which
// no phone could be found.
type routeCache map[[2]string]bool

// reroutePause is how long a message that found no phone to move to waits
// before it is considered again.
const reroutePause = 15 * time.Second

// errNowhere is reroute's answer when no phone but the message's own can
// take it and it may not go back to its own.
var errNowhere = errors.New("sqlstore: no other phone can take the message")

// reroute moves a live device message to a phone that can take it now: its
// sender if the sender was named, else the recipient's sticky phone or the
// least used one, preferring any phone but the one it leaves, and going
// back to that one (its device takes it again) only when sameOK. The move
// counts it against the new phone's daily limit; if the new phone is not an
// android phone the message joins the delivery queue. With no phone to go
// to, it waits (its device hand-out undone) and is considered again after
// reroutePause; or, when !sameOK, reroute writes nothing and answers
// errNowhere. It reports whether the message moved to another phone.
func (t *Tx) reroute(ctx context.Context, m *routeRow, now time.Time, cache routeCache, sameOK bool) (bool, error) {
	day := sb.Day(now)
	wait := func() (bool, error) {
		_, err := t.exec(ctx, `UPDATE messages SET device_id = NULL, valid_until = NULL, device_state = NULL, device_due = ? WHERE id = ?`,
			sb.Micros(now.Add(reroutePause)), m.id)
		return false, err
	}
	if cache[[2]string{m.tenantID, m.channel}] && !m.pinned && sameOK {
		return wait()
	}
	var sticky, from string
	if m.pinned {
		from = m.from
	} else {
		rcp, err := t.recipient(ctx, m.tenantID, sb.Live, m.to)
		if err != nil {
			return false, err
		}
		sticky = rcp.phoneID
	}
	key := phoneKey{m.tenantID, sb.Live, day}
	p, err := t.pickPhone(ctx, key, m.channel, from, sticky, m.phoneID, now)
	if err != nil {
		return false, err
	}
	if p == nil && sameOK { // its own phone, if nothing else can take it
		if p, err = t.pickPhone(ctx, key, m.channel, from, sticky, "", now); err != nil {
			return false, err
		}
	}
	if p == nil {
		if !sameOK {
			return false, errNowhere
		}
		if !m.pinned {
			cache[[2]string{m.tenantID, m.channel}] = true
		}
		return wait()
	}
	if p.ID != m.phoneID {
		if err := t.countOnPhone(ctx, sb.Live, p, day); err != nil {
			return false, err
		}
	} else if p.LimitOn(now) > 0 {
		// Back to its own phone, where it is counted already: the unit
		// pickPhone took goes back.
		t.returnTake(counterKey{p.TenantID, sb.Live, phoneCounter(p.ID), day})
	}
	var runAt, deviceDue any = nil, sb.Micros(now)
	if p.Kind != sb.PhoneAndroid {
		runAt, deviceDue = sb.Micros(now), nil
		t.afterCommit(t.db.wakeMessages)
	} else if err := t.notifyPhone(ctx, cmp.Or(p.DeviceOf, p.ID)); err != nil {
		return false, err
	}
	// A campaign message's reservation on its first phone (counted_phone)
	// stays where it was counted: the message no longer holds it.
	_, err = t.exec(ctx, `UPDATE messages SET phone_id = ?, from_number = ?, engine = ?, device_id = NULL, valid_until = NULL, device_state = NULL,
		device_due = ?, run_at = ?, counted_phone = CASE WHEN counted_phone = ? THEN counted_phone ELSE NULL END WHERE id = ?`,
		p.ID, p.Number, sb.EngineOf(sb.Live, p.Kind), deviceDue, runAt, p.ID, m.id)
	return p.ID != m.phoneID, err
}

// deviceDueProbe counts 1 when a device message is due by its argument.
const deviceDueProbe = `SELECT COUNT(*) FROM (SELECT 1 FROM messages WHERE device_due IS NOT NULL AND device_due <= ? LIMIT 1) due`

// SweepDeviceMessages acts, up to limit messages at a time, on the device
// messages the routing rules (Routing.Sweep) say cannot stay as they are:
// it moves those no device was handed whose phone went offline or was
// deleted (or fails them, when their sender named that deleted phone), and
// fails (message.failed) those a device took and never reported on by
// their OutcomeUnknownAt. A message a device holds never moves.
func (db *DB) SweepDeviceMessages(ctx context.Context, now time.Time, limit int) (sb.DeviceSweep, error) {
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE OF m SKIP LOCKED"
	}
	// Whether any device message is due at all, asked first on its own:
	// the search below runs in a group-commit transaction, which holds
	// the callers of its batch (sends among them) until it is done, and on
	// PostgreSQL without statistics (a new table, autovacuum off) its plan
	// read the whole messages table, every two seconds on every node.
	// Measured in the send bench with three nodes: 27 ms of PostgreSQL's
	// CPU a call, for a table without a device message.
	if n, err := db.queueCount(ctx, deviceDueProbe, sb.Micros(now)); err != nil || n == 0 {
		return sb.DeviceSweep{}, err
	}
	var sw sb.DeviceSweep
	err := db.Write(ctx, func(tx *Tx) error {
		sw = sb.DeviceSweep{}
		// Held messages are due at their OutcomeUnknownAt; waiting ones
		// whose phone is online are the device's to take, and are left out
		// here (the routing rules decide again below).
		rows, err := tx.query(ctx, `SELECT m.id, m.tenant_id, m.to_number, m.channel, m.phone_id, m.from_number, m.from_pinned,
				m.device_id, m.valid_until, p.id, p.status, p.device_id, p.last_seen_at
			FROM messages m LEFT JOIN phones p ON p.id = m.phone_id
			WHERE m.device_due IS NOT NULL AND m.device_due <= ? AND m.status = 'queued' AND (m.device_id IS NOT NULL
				OR p.id IS NULL OR p.status <> 'online' OR p.device_id IS NULL OR p.last_seen_at IS NULL OR p.last_seen_at <= ?)
			ORDER BY m.device_due LIMIT ?`+lock,
			sb.Micros(now), sb.Micros(db.routing.SeenCutoff(now)), limit)
		if err != nil {
			return err
		}
		type row struct {
			route *routeRow
			q     sb.DeviceQueued
		}
		var todo []row
		for rows.Next() {
			var r routeRow
			var phone, holder, pid, pstatus, pdevice sql.NullString
			var pinned int
			var valid, seen sql.NullInt64
			if err := rows.Scan(&r.id, &r.tenantID, &r.to, &r.channel, &phone, &r.from, &pinned, &holder, &valid, &pid, &pstatus, &pdevice, &seen); err != nil {
				rows.Close()
				return err
			}
			r.phoneID, r.pinned = phone.String, pinned != 0
			q := sb.DeviceQueued{Holder: holder.String, ValidUntil: sb.FromMicros(valid.Int64), Pinned: r.pinned}
			if pid.Valid {
				q.Phone = &sb.Phone{ID: pid.String, Kind: sb.PhoneAndroid, Status: pstatus.String, LastSeenAt: optTime(seen)}
				if pdevice.Valid {
					q.Phone.Device = &sb.Device{ID: pdevice.String}
				}
			}
			todo = append(todo, row{&r, q})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		cache := routeCache{}
		for _, r := range todo {
			sw.Considered++
			switch db.routing.Sweep(r.q, now) {
			case sb.DeviceMove:
				ok, err := tx.reroute(ctx, r.route, now, cache, true)
				if err != nil {
					return err
				}
				if ok {
					sw.Moved++
				}
			case sb.DeviceOutcomeUnknown:
				reason := sb.OutcomeUnknownReason(r.route.from, r.route.phoneID, r.q.ValidUntil)
				if err := tx.finish(ctx, []sb.Outcome{{MessageID: r.route.id, FailureReason: reason, At: now}}); err != nil {
					return err
				}
				sw.Unknown++
			case sb.DeviceSenderDeleted:
				reason := sb.SenderDeletedReason(r.route.from, r.route.phoneID)
				if err := tx.finish(ctx, []sb.Outcome{{MessageID: r.route.id, FailureReason: reason, At: now}}); err != nil {
					return err
				}
				sw.SenderDeleted++
			default:
				if r.q.Holder != "" { // due by an earlier setting: due again when the rules say
					if _, err := tx.exec(ctx, `UPDATE messages SET device_due = ? WHERE id = ?`,
						sb.Micros(db.routing.OutcomeUnknownAt(r.q.ValidUntil)), r.route.id); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	return sw, err
}
