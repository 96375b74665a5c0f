package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
)

const phoneCols = `id, tenant_id, number, kind, daily_limit, rate_limit, channels, status, sim_number, last_seen_at,
	device_id, device_name, device_paired_at, created_at, link, device_push_token,
	health_battery, health_charging, health_network, health_failed, health_at,
	quarantined_at, quarantine_reasons, quarantine_failed, quarantine_of, warmup_start, warmup_days, warmup_from, device_of`

// phoneColsP is phoneCols qualified with the alias p, for joins.
var phoneColsP = "p." + strings.ReplaceAll(strings.ReplaceAll(phoneCols, "\n\t", " "), ", ", ", p.")

func scanPhone(row interface{ Scan(...any) error }, extra ...any) (*sb.Phone, error) {
	var p sb.Phone
	var limit, rate, sim sql.NullInt64
	var seen, paired sql.NullInt64
	var deviceID, deviceName, link sql.NullString
	var channels string
	var created int64
	var pushToken int
	var hBattery, hCharging, hFailed, hAt, qAt, qFailed, qOf, wStart, wDays, wFrom sql.NullInt64
	var hNetwork, qReasons, deviceOf sql.NullString
	dest := append([]any{&p.ID, &p.TenantID, &p.Number, &p.Kind, &limit, &rate, &channels, &p.Status, &sim, &seen,
		&deviceID, &deviceName, &paired, &created, &link, &pushToken,
		&hBattery, &hCharging, &hNetwork, &hFailed, &hAt, &qAt, &qReasons, &qFailed, &qOf, &wStart, &wDays, &wFrom, &deviceOf}, extra...)
	if err := row.Scan(dest...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, sb.ErrNotFound
		}
		return nil, err
	}
	p.DailyLimit, p.RateLimit, p.SimNumber = int(limit.Int64), int(rate.Int64), int(sim.Int64)
	p.Channels = strings.Split(channels, ",")
	p.LastSeenAt = optTime(seen)
	if deviceID.Valid {
		p.Device = &sb.Device{ID: deviceID.String, Name: deviceName.String, PairedAt: sb.FromMicros(paired.Int64), PushToken: pushToken != 0}
	}
	p.CreatedAt = sb.FromMicros(created)
	p.Link, p.DeviceOf = link.String, deviceOf.String
	if hAt.Valid {
		p.Health = &sb.Health{BatteryLevel: int(hBattery.Int64), Charging: hCharging.Int64 != 0, Network: hNetwork.String,
			FailedLastHour: int(hFailed.Int64), ReportedAt: sb.FromMicros(hAt.Int64)}
		if !hBattery.Valid {
			p.Health.BatteryLevel = -1
		}
	}
	if qAt.Valid && p.Status == sb.PhoneQuarantined {
		p.Quarantine = &sb.Quarantine{At: sb.FromMicros(qAt.Int64), Reasons: []string{}}
		if qReasons.Valid {
			_ = json.Unmarshal([]byte(qReasons.String), &p.Quarantine.Reasons)
		}
	}
	p.QuarantinePolicy = sb.QuarantinePolicy{Failed: int(qFailed.Int64), Of: int(qOf.Int64)}
	if wStart.Valid {
		p.Warmup = &sb.Warmup{Start: int(wStart.Int64), Days: int(wDays.Int64), From: sb.FromMicros(wFrom.Int64)}
	}
	return &p, nil
}

// warmupCols are the warm-up's column values of w (NULLs for none).
func warmupCols(w *sb.Warmup) (start, days, from any) {
	if w == nil || w.Start <= 0 {
		return nil, nil, nil
	}
	return w.Start, w.Days, sb.Micros(w.From)
}

func intOrNil(n int) any {
	if n <= 0 {
		return nil
	}
	return n
}

// errDuplicatePhone is the answer for a number that another tenant's phone
// has: it names no phone of the other tenant.
var errDuplicatePhone = sb.Errorf(sb.CodeDuplicatePhone, "This number is already a sending phone.")

// ErrPairingTaken is returned by AddPhone and SetPairing when another
// phone's live pairing code is the same: the caller makes a new code.
var ErrPairingTaken = errors.New("sqlstore: the pairing code is in use")

// AddPhone stores a sending phone, with the hash of its pairing code when
// pairing is set. A number is unique within a tenant: one of the tenant's
// phones already is a DUPLICATE_PHONE naming it. An android phone's number
// or a chat engine's may also be another tenant's, so that no tenant can
// hold a number against the others; a carrier or simulated phone's number
// is unique among them all, and one another tenant has is DUPLICATE_PHONE
// naming none (sb.NumberUniqueAcrossTenants).
func (db *DB) AddPhone(ctx context.Context, p *sb.Phone, pairing *sb.Pairing) error {
	return db.AddTenantPhone(ctx, p, pairing, 0)
}

// AddTenantPhone is AddPhone for a phone the tenant adds itself: it holds
// at most maxPhones phones (0: no cap), counted one transaction after the
// other; one more is a VALIDATION_ERROR naming the cap.
func (db *DB) AddTenantPhone(ctx context.Context, p *sb.Phone, pairing *sb.Pairing, maxPhones int) error {
	if p.Kind == "" {
		p.Kind = sb.PhoneSimulated
	}
	var pairHash, pairExp any
	if pairing != nil {
		pairHash, pairExp = db.pairingHash(pairing.Code), sb.Micros(pairing.ExpiresAt)
	}
	err := db.Write(ctx, func(tx *Tx) error {
		if maxPhones > 0 {
			if err := tx.lockTenant(ctx, p.TenantID); err != nil {
				return err
			}
		}
		var existing string
		err := tx.queryRow(ctx, `SELECT id FROM phones WHERE tenant_id = ? AND number = ?`, p.TenantID, p.Number).Scan(&existing)
		switch {
		case err == nil:
			return &sb.Error{Code: sb.CodeDuplicatePhone, Message: "This number is already one of your sending phones.",
				Details: map[string]any{"existing_id": existing}}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if sb.NumberUniqueAcrossTenants(p.Kind) {
			var n int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM phones WHERE number = ? AND kind NOT IN (?, ?, ?)`,
				p.Number, sb.PhoneAndroid, sb.PhoneRBM, sb.PhoneIMessage).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return errDuplicatePhone
			}
		}
		if maxPhones > 0 {
			var n int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM phones WHERE tenant_id = ?`, p.TenantID).Scan(&n); err != nil {
				return err
			}
			if n >= maxPhones {
				return sb.Invalid("number", "Your plan allows at most %d sending phones; delete one first.", maxPhones)
			}
		}
		if pairHash != nil {
			var n int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM phones WHERE pairing_hash = ?`, pairHash).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return ErrPairingTaken
			}
		}
		wStart, wDays, wFrom := warmupCols(p.Warmup)
		_, err = tx.exec(ctx, `INSERT INTO phones (`+phoneCols+`, pairing_hash, pairing_expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.ID, p.TenantID, p.Number, p.Kind, intOrNil(p.DailyLimit), intOrNil(p.RateLimit), strings.Join(p.Channels, ","), p.Status,
			intOrNil(p.SimNumber), nil, nil, nil, nil, sb.Micros(p.CreatedAt), nullStr(p.Link), 0,
			nil, nil, nil, nil, nil, nil, nil, intOrNil(p.QuarantinePolicy.Failed), intOrNil(p.QuarantinePolicy.Of), wStart, wDays, wFrom,
			nullStr(p.DeviceOf), pairHash, pairExp)
		if err == nil && p.DeviceOf != "" {
			err = tx.shareDevice(ctx, p)
		}
		if err != nil {
			return err
		}
		return tx.phonesChanged(ctx, p.TenantID)
	})
	if isUniqueViolation(err) { // a concurrent insert of the number or the code
		return errDuplicatePhone
	}
	return err
}

// shareDevice gives p, just inserted with DeviceOf, the device of that
// phone: another paired android phone of p's tenant with a device of its
// own, none of whose phones sends with p's SIM (p's SimNumber, required).
// When that phone has no SIM of its own, it takes SIM 1.
func (t *Tx) shareDevice(ctx context.Context, p *sb.Phone) error {
	if p.SimNumber <= 0 {
		return sb.Invalid("sim_number", "A phone that shares another's device needs its sim_number (1 to 3).")
	}
	var kind string
	var sim sql.NullInt64
	var deviceID, deviceOf sql.NullString
	err := t.queryRow(ctx, `SELECT kind, sim_number, device_id, device_of FROM phones WHERE tenant_id = ? AND id = ?`, p.TenantID, p.DeviceOf).
		Scan(&kind, &sim, &deviceID, &deviceOf)
	if errors.Is(err, sql.ErrNoRows) {
		return sb.Invalid("device_phone_id", "device_phone_id must be one of your android phones.")
	}
	if err != nil {
		return err
	}
	switch {
	case kind != sb.PhoneAndroid:
		return sb.Invalid("device_phone_id", "device_phone_id must be an android phone; this one is %s.", kind)
	case deviceOf.Valid:
		return sb.Invalid("device_phone_id", "That phone shares the device of another: name the phone the device was paired with (%s).", deviceOf.String)
	case !deviceID.Valid:
		return sb.Invalid("device_phone_id", "That phone is not paired with a device yet: pair it first.")
	}
	if !sim.Valid {
		if p.SimNumber == 1 {
			return sb.Invalid("sim_number", "SIM 1 is taken by the phone the device was paired with; give this one SIM 2 or 3.")
		}
		if _, err := t.exec(ctx, `UPDATE phones SET sim_number = 1 WHERE id = ?`, p.DeviceOf); err != nil {
			return err
		}
	}
	var n int
	if err := t.queryRow(ctx, `SELECT COUNT(*) FROM phones WHERE (id = ? OR device_of = ?) AND id <> ? AND sim_number = ?`,
		p.DeviceOf, p.DeviceOf, p.ID, p.SimNumber).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return sb.Invalid("sim_number", "SIM %d of that device is already one of your phones.", p.SimNumber)
	}
	_, err = t.exec(ctx, `UPDATE phones SET (device_id, device_name, device_paired_at, device_push_token, last_seen_at, health_battery, health_charging,
			health_network, health_failed, health_at) = (SELECT device_id, device_name, device_paired_at, device_push_token, last_seen_at,
			health_battery, health_charging, health_network, health_failed, health_at FROM phones WHERE id = ?) WHERE id = ?`, p.DeviceOf, p.ID)
	return err
}

// DevicePhones returns the phones a device speaks for: the phone it was
// paired with (id) first, then those that share its device, by SIM.
func (db *DB) DevicePhones(ctx context.Context, id, deviceID string) ([]*sb.Phone, error) {
	rows, err := db.query(ctx, `SELECT `+phoneCols+` FROM phones WHERE (id = ? OR device_of = ?) AND device_id = ?
		ORDER BY CASE WHEN id = ? THEN 0 ELSE 1 END, sim_number`, id, id, deviceID, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Phone
	for rows.Next() {
		p, err := scanPhone(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// PhoneKind returns the kind of a phone, whichever tenant it belongs to.
func (db *DB) PhoneKind(ctx context.Context, id string) (string, error) {
	var kind string
	err := db.queryRow(ctx, `SELECT kind FROM phones WHERE id = ?`, id).Scan(&kind)
	if errors.Is(err, sql.ErrNoRows) {
		return "", sb.ErrNotFound
	}
	return kind, err
}

// PhoneLink returns the kind and the carrier link of a phone, whichever
// tenant it belongs to (link is empty for a phone of no link).
func (db *DB) PhoneLink(ctx context.Context, id string) (kind, link string, err error) {
	var l sql.NullString
	err = db.queryRow(ctx, `SELECT kind, link FROM phones WHERE id = ?`, id).Scan(&kind, &l)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", sb.ErrNotFound
	}
	return kind, l.String, err
}

// phonesWithUse reads a tenant's phones (one when id is set), oldest
// first, with the messages counted against their daily limit on day in env.
func phonesWithUse(ctx context.Context, q func(ctx context.Context, query string, args ...any) (*sql.Rows, error),
	tenantID string, env sb.Environment, day, id string) ([]*sb.Phone, error) {
	query := `SELECT ` + phoneColsP + `, (SELECT CAST(COALESCE(SUM(c.n), 0) AS BIGINT) FROM daily_counters c
		  WHERE c.tenant_id = p.tenant_id AND c.environment = ? AND c.counter = 'phone:' || p.id AND c.day = ?)
		FROM phones p WHERE p.tenant_id = ?`
	args := []any{string(env), day, tenantID}
	if id != "" {
		query += ` AND p.id = ?`
		args = append(args, id)
	}
	rows, err := q(ctx, query+` ORDER BY p.id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Phone
	for rows.Next() {
		var used int64
		p, err := scanPhone(rows, &used)
		if err != nil {
			return nil, err
		}
		p.SentToday = used
		out = append(out, p)
	}
	return out, rows.Err()
}

// Phones lists the tenant's phones, oldest first, each with today's count
// (UTC) in env.
func (db *DB) Phones(ctx context.Context, tenantID string, env sb.Environment) ([]*sb.Phone, error) {
	return phonesWithUse(ctx, db.query, tenantID, env, sb.Day(time.Now()), "")
}

// Phone returns one of the tenant's phones with today's count in env.
func (db *DB) Phone(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Phone, error) {
	ps, err := phonesWithUse(ctx, db.query, tenantID, env, sb.Day(time.Now()), id)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, sb.ErrNotFound
	}
	return ps[0], nil
}

// AndroidPhones lists the android phones of every tenant, for the fleet's
// metrics (their counts by state and trouble).
func (db *DB) AndroidPhones(ctx context.Context) ([]*sb.Phone, error) {
	rows, err := db.query(ctx, `SELECT `+phoneCols+` FROM phones WHERE kind = ?`, sb.PhoneAndroid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Phone
	for rows.Next() {
		p, err := scanPhone(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// UpdatePhone applies patch to one of the tenant's phones.
func (db *DB) UpdatePhone(ctx context.Context, tenantID, id string, patch sb.PhonePatch) error {
	return db.Write(ctx, func(tx *Tx) error {
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM phones WHERE tenant_id = ? AND id = ?`, tenantID, id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return sb.ErrNotFound
		}
		if patch.DailyLimit != nil {
			if _, err := tx.exec(ctx, `UPDATE phones SET daily_limit = ? WHERE tenant_id = ? AND id = ?`, intOrNil(*patch.DailyLimit), tenantID, id); err != nil {
				return err
			}
		}
		if patch.RateLimit != nil {
			if _, err := tx.exec(ctx, `UPDATE phones SET rate_limit = ? WHERE tenant_id = ? AND id = ?`, intOrNil(*patch.RateLimit), tenantID, id); err != nil {
				return err
			}
		}
		if patch.Warmup != nil {
			start, days, from := warmupCols(patch.Warmup)
			if _, err := tx.exec(ctx, `UPDATE phones SET warmup_start = ?, warmup_days = ?, warmup_from = ? WHERE tenant_id = ? AND id = ?`,
				start, days, from, tenantID, id); err != nil {
				return err
			}
		}
		if q := patch.QuarantinePolicy; q != nil {
			if _, err := tx.exec(ctx, `UPDATE phones SET quarantine_failed = ?, quarantine_of = ? WHERE tenant_id = ? AND id = ?`,
				intOrNil(q.Failed), intOrNil(q.Of), tenantID, id); err != nil {
				return err
			}
		}
		if patch.Status != nil {
			// Back in rotation: the quarantine and the outcomes that led
			// to it are forgotten. The operator's switch (offline) is not
			// the tenant's to change.
			if _, err := tx.exec(ctx, `UPDATE phones SET status = ?, quarantined_at = NULL, quarantine_reasons = NULL, send_outcomes = NULL
				WHERE tenant_id = ? AND id = ? AND status = ?`, *patch.Status, tenantID, id, sb.PhoneQuarantined); err != nil {
				return err
			}
		}
		return tx.phonesChanged(ctx, tenantID)
	})
}

// PhoneTenant returns the id of the tenant a phone belongs to, or
// sb.ErrNotFound: for operators, who name a phone by its id alone.
func (db *DB) PhoneTenant(ctx context.Context, id string) (string, error) {
	var tenantID string
	err := db.queryRow(ctx, `SELECT tenant_id FROM phones WHERE id = ?`, id).Scan(&tenantID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", sb.ErrNotFound
	}
	return tenantID, err
}

// DeletePhone deletes one of the tenant's phones: its device's token and
// inbound secret die with it, recipients that stuck to it are free to stick
// to another, and its messages that no device holds are due at once for
// the sweeper to move (see SweepDeviceMessages), except those whose sender
// named it (from), which fail at once: they go out from its number or not
// at all (sb.Routing.Sweep). The queued messages of a carrier phone fail:
// they were to go out from its number.
func (db *DB) DeletePhone(ctx context.Context, tenantID, id string, now time.Time) error {
	return db.Write(ctx, func(tx *Tx) error {
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM phones WHERE tenant_id = ? AND id = ?`, tenantID, id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return sb.ErrNotFound
		}
		var link sql.NullString
		var number string
		if err := tx.queryRow(ctx, `SELECT link, number FROM phones WHERE tenant_id = ? AND id = ?`, tenantID, id).Scan(&link, &number); err != nil {
			return err
		}
		// A carrier phone's queued messages cannot go out from its number
		// any more: they fail, saying why. Those the carrier has already
		// are finished by their receipts. Of a device's queue, those whose
		// sender named this phone fail; those a device holds may have been
		// sent, and wait for their outcome (see SweepDeviceMessages).
		only, reason := "", "the carrier phone this message was to go out from was deleted before it went out"
		if !link.Valid {
			only, reason = ` AND from_pinned = 1 AND device_due IS NOT NULL AND device_id IS NULL`, sb.SenderDeletedReason(number, id)
		}
		if err := tx.failQueuedOfPhone(ctx, id, only, reason, now); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `DELETE FROM phones WHERE tenant_id = ? AND id = ?`, tenantID, id); err != nil {
			return err
		}
		// The phones of its device's other SIMs lose the device: unpaired,
		// their waiting messages move.
		if _, err := tx.exec(ctx, `UPDATE messages SET device_due = ? WHERE phone_id IN (SELECT id FROM phones WHERE device_of = ?)
			AND device_due IS NOT NULL AND device_id IS NULL AND status = 'queued'`, sb.Micros(now), id); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `UPDATE phones SET device_of = NULL, device_id = NULL, device_name = NULL, device_paired_at = NULL
			WHERE device_of = ?`, id); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `UPDATE recipients SET phone_id = NULL WHERE tenant_id = ? AND phone_id = ?`, tenantID, id); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `UPDATE messages SET device_due = ? WHERE phone_id = ? AND device_due IS NOT NULL AND device_id IS NULL AND status = 'queued'`,
			sb.Micros(now), id); err != nil {
			return err
		}
		return tx.phonesChanged(ctx, tenantID)
	})
}

// failQueuedOfPhone fails the queued messages of a phone, those of them
// that match the condition only when it is set, with reason.
func (t *Tx) failQueuedOfPhone(ctx context.Context, phoneID, only, reason string, now time.Time) error {
	rows, err := t.query(ctx, `SELECT id FROM messages WHERE phone_id = ? AND status = 'queued' AND direction = 'outbound'`+only, phoneID)
	if err != nil {
		return err
	}
	var outs []sb.Outcome
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		outs = append(outs, sb.Outcome{MessageID: id, FailureReason: reason, At: now})
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(outs) == 0 {
		return err
	}
	return t.finish(ctx, outs)
}

// SetPhoneStatus sets a phone's operator switch online or offline and
// returns the phone.
func (db *DB) SetPhoneStatus(ctx context.Context, id, status string) (*sb.Phone, error) {
	err := db.Write(ctx, func(tx *Tx) error {
		var tenantID string
		err := tx.queryRow(ctx, `SELECT tenant_id FROM phones WHERE id = ?`, id).Scan(&tenantID)
		if errors.Is(err, sql.ErrNoRows) {
			return sb.ErrNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `UPDATE phones SET status = ? WHERE id = ?`, status, id); err != nil {
			return err
		}
		return tx.phonesChanged(ctx, tenantID)
	})
	if err != nil {
		return nil, err
	}
	return scanPhone(db.queryRow(ctx, `SELECT `+phoneCols+` FROM phones WHERE id = ?`, id))
}

// phonesChanged raises the version of the tenant's phones, so that every
// node reads them again (see phoneCache), and drops this node's copy once
// the change has committed.
func (t *Tx) phonesChanged(ctx context.Context, tenantID string) error {
	t.afterCommit(func() {
		t.db.phoneCache.forget(tenantID)
		t.db.allow.forgetEmpty(tenantID)
		t.db.reads.forgetTenant(tenantID)
	})
	_, err := t.exec(ctx, `UPDATE tenants SET phones_version = phones_version + 1 WHERE id = ?`, tenantID)
	return err
}

// SetPairing gives one of the tenant's android phones a new pairing code;
// its earlier code stops working.
func (db *DB) SetPairing(ctx context.Context, tenantID, id string, pairing *sb.Pairing) error {
	hash := db.pairingHash(pairing.Code)
	return db.Write(ctx, func(tx *Tx) error {
		var kind string
		err := tx.queryRow(ctx, `SELECT kind FROM phones WHERE tenant_id = ? AND id = ?`, tenantID, id).Scan(&kind)
		if errors.Is(err, sql.ErrNoRows) {
			return sb.ErrNotFound
		}
		if err != nil {
			return err
		}
		if kind != sb.PhoneAndroid {
			return sb.Invalid("id", "Only android phones are paired with a device; this phone is %s.", kind)
		}
		var n int
		if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM phones WHERE pairing_hash = ? AND id <> ?`, hash, id).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrPairingTaken
		}
		_, err = tx.exec(ctx, `UPDATE phones SET pairing_hash = ?, pairing_expires_at = ? WHERE tenant_id = ? AND id = ?`,
			hash, sb.Micros(pairing.ExpiresAt), tenantID, id)
		return err
	})
}

// PairDevice pairs a device with the phone whose live pairing code is code:
// the code is used up, the device (and its token and inbound secret)
// replaces any earlier one, whose token stops working. An unknown, used or
// expired code is INVALID_TOKEN.
func (db *DB) PairDevice(ctx context.Context, code string, dev *sb.Device, creds sb.DeviceCredentials, now time.Time) (*sb.Phone, error) {
	var id string
	err := db.Write(ctx, func(tx *Tx) error {
		err := tx.queryRow(ctx, `SELECT id FROM phones WHERE pairing_hash = ? AND pairing_expires_at > ?`,
			db.pairingHash(code), sb.Micros(now)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return errBadCode
		}
		if err != nil {
			return err
		}
		_, err = tx.exec(ctx, `UPDATE phones SET pairing_hash = NULL, pairing_expires_at = NULL, device_id = ?, device_name = ?,
			device_paired_at = ?, token_hash = ?, inbound_hash = ?, last_seen_at = ?, device_push_token = ?,
			settings_hash = NULL, webhooks_hash = NULL, presence = NULL WHERE id = ?`,
			dev.ID, dev.Name, sb.Micros(dev.PairedAt), sb.HashSecret(creds.Token), sb.HashSecret(creds.InboundSecret), sb.Micros(now),
			boolInt(dev.PushToken), id)
		if err != nil {
			return err
		}
		// The phones of its other SIMs share the new device.
		if _, err := tx.exec(ctx, `UPDATE phones SET device_id = ?, device_name = ?, device_paired_at = ?, last_seen_at = ?, device_push_token = ?,
			presence = NULL WHERE device_of = ?`, dev.ID, dev.Name, sb.Micros(dev.PairedAt), sb.Micros(now), boolInt(dev.PushToken), id); err != nil {
			return err
		}
		var tenantID string
		if err := tx.queryRow(ctx, `SELECT tenant_id FROM phones WHERE id = ?`, id).Scan(&tenantID); err != nil {
			return err
		}
		return tx.phonesChanged(ctx, tenantID)
	})
	if err != nil {
		return nil, err
	}
	return scanPhone(db.queryRow(ctx, `SELECT `+phoneCols+` FROM phones WHERE id = ?`, id))
}

var errBadCode = sb.Errorf(sb.CodeInvalidToken, "The pairing code is unknown, used or expired.")

// PhoneByToken returns the phone whose device holds token; a token that no
// device holds (never issued, replaced by a new pairing, or of a deleted
// phone) is INVALID_TOKEN.
func (db *DB) PhoneByToken(ctx context.Context, token string) (*sb.Phone, error) {
	p, err := scanPhone(db.queryRow(ctx, `SELECT `+phoneCols+` FROM phones WHERE token_hash = ?`, sb.HashSecret(token)))
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return nil, sb.Errorf(sb.CodeInvalidToken, "The device token is not valid.")
	}
	return p, err
}

// PhoneByInboundSecret returns the phone whose device's inbound callback
// secret is secret, or INVALID_TOKEN.
func (db *DB) PhoneByInboundSecret(ctx context.Context, secret string) (*sb.Phone, error) {
	p, err := scanPhone(db.queryRow(ctx, `SELECT `+phoneCols+` FROM phones WHERE inbound_hash = ?`, sb.HashSecret(secret)))
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return nil, sb.Errorf(sb.CodeInvalidToken, "The callback secret is not valid.")
	}
	return p, err
}

// TouchDevice records that the phone's device was seen at now, and reports
// whether deviceID is still the phone's device (not replaced by another
// pairing, its phone not deleted). It shares the group commit of other
// writes: devices touch their phone often.
func (db *DB) TouchDevice(ctx context.Context, phoneID, deviceID string, now time.Time) (bool, error) {
	var ok bool
	err := db.Write(ctx, func(tx *Tx) error {
		res, err := tx.exec(ctx, `UPDATE phones SET last_seen_at = ? WHERE (id = ? OR device_of = ?) AND device_id = ?`, sb.Micros(now), phoneID, phoneID, deviceID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n > 0
		return err
	})
	return ok, err
}

// UpdateDevice records what a paired device says of itself: its name (an
// empty name keeps the one it has) and whether its app registered a push
// token.
func (db *DB) UpdateDevice(ctx context.Context, id, deviceID, name string, pushToken bool) error {
	return db.Write(ctx, func(tx *Tx) error {
		_, err := tx.exec(ctx, `UPDATE phones SET device_name = CASE WHEN ? = '' THEN device_name ELSE ? END, device_push_token = ?
			WHERE (id = ? OR device_of = ?) AND device_id = ?`, name, name, boolInt(pushToken), id, id, deviceID)
		return err
	})
}

// The phone cache. Every send picks a phone among its tenant's, by their
// use today: read from the database, that is every phone of the tenant
// (with its counter) in each group-commit batch, which for a tenant with a
// thousand Android phones was a third of the server's CPU. The cache keeps
// each tenant's phones with their use, as read with the version of the
// tenant's phones (raised by any change to them, whichever process makes
// it), and adds to the use what this node's transactions count once they
// commit. A batch reads the version (one row) and uses the cached phones
// while it is the same and the entry younger than phoneCacheTTL, so that
// other nodes' counts and last-seen times show within that. The use is only
// a guide: a limited phone's limit is enforced by the units its sends take
// (see counters.go), and a pick that finds no phone in a cached list looks
// again in the database before it refuses.
const phoneCacheTTL = time.Second

type phoneCache struct {
	mu      sync.Mutex
	entries map[phoneKey]*phoneSnap
}

type phoneSnap struct {
	loaded  time.Time
	version int64
	uses    []sb.PhoneUse    // as read; never changed
	added   map[string]int64 // phone id -> counted by this node since
}

// get returns a copy of key's phones with their use, if an entry of
// version younger than phoneCacheTTL (by the clock, not a message's time)
// has them.
func (c *phoneCache) get(key phoneKey, version int64) ([]sb.PhoneUse, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.entries[key]
	if s == nil || s.version != version || time.Since(s.loaded) >= phoneCacheTTL {
		return nil, false
	}
	out := slices.Clone(s.uses)
	for i := range out {
		out[i].Used += s.added[out[i].Phone.ID]
	}
	return out, true
}

func (c *phoneCache) put(key phoneKey, version int64, uses []sb.PhoneUse) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[phoneKey]*phoneSnap{}
	}
	for k, s := range c.entries { // keep the map small: drop what expired
		if now.Sub(s.loaded) >= phoneCacheTTL {
			delete(c.entries, k)
		}
	}
	c.entries[key] = &phoneSnap{loaded: now, version: version, uses: slices.Clone(uses), added: map[string]int64{}}
}

// committed adds what a committed transaction counted on phones.
func (c *phoneCache) committed(counted map[counterKey]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range counted {
		id, ok := strings.CutPrefix(k.name, "phone:")
		if !ok {
			continue
		}
		if s := c.entries[phoneKey{k.tenantID, k.env, k.day}]; s != nil {
			s.added[id] += n
		}
	}
}

// forget drops every entry of the tenant.
func (c *phoneCache) forget(tenantID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.tenantID == tenantID {
			delete(c.entries, k)
		}
	}
}
