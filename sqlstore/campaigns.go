package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// campaignCols leaves out recipients, which can be large: only the runner
// reads them (CampaignRecipients).
const campaignCols = `id, tenant_id, environment, name, body, template, template_body, data, channel, audience, status, total,
	progress, after_contact, expanded, withdrawn, skipped_opted_out, skipped_invalid, deferred_quiet, deferred_limits,
	created_at, launched_at, completed_at, canceled_at`

var (
	errCampaignNotFound = sb.Errorf(sb.CodeCampaignNotFound, "No campaign with this id exists.")
	errCampaignNotDraft = sb.Errorf(sb.CodeCampaignNotDraft, "Only a draft campaign can be launched.")
)

func scanCampaign(row interface{ Scan(...any) error }) (*sb.Campaign, error) {
	var c sb.Campaign
	var env string
	var body, template, templateBody, data, after sql.NullString
	var expanded, withdrawn int
	var created int64
	var launched, completed, canceled sql.NullInt64
	err := row.Scan(&c.ID, &c.TenantID, &env, &c.Name, &body, &template, &templateBody, &data, &c.Channel, &c.Audience, &c.Status, &c.Total,
		&c.Position, &after, &expanded, &withdrawn, &c.SkippedOptedOut, &c.SkippedInvalid, &c.DeferredQuiet, &c.DeferredLimits,
		&created, &launched, &completed, &canceled)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, errCampaignNotFound
		}
		return nil, err
	}
	c.Env, c.Body, c.Template, c.TemplateBody, c.After = sb.Environment(env), body.String, template.String, templateBody.String, after.String
	c.Expanded, c.Withdrawn = expanded != 0, withdrawn != 0
	if data.Valid {
		if err := json.Unmarshal([]byte(data.String), &c.Data); err != nil {
			return nil, err
		}
	}
	c.CreatedAt = sb.FromMicros(created)
	c.LaunchedAt, c.CompletedAt, c.CanceledAt = optTime(launched), optTime(completed), optTime(canceled)
	return &c, nil
}

// CreateCampaign stores a draft campaign with its recipients, unless the
// environment has maxOpen open (draft or running) campaigns already (when
// maxOpen > 0), which is VALIDATION_ERROR.
func (db *DB) CreateCampaign(ctx context.Context, c *sb.Campaign, maxOpen int) error {
	var data, recipients any
	if c.Data != nil {
		b, _ := json.Marshal(c.Data)
		data = string(b)
	}
	if c.Recipients != nil {
		b, _ := json.Marshal(c.Recipients)
		recipients = string(b)
	}
	err := db.Write(ctx, func(tx *Tx) error {
		if maxOpen > 0 {
			if err := tx.lockTenant(ctx, c.TenantID); err != nil {
				return err
			}
			var n int
			if err := tx.queryRow(ctx, `SELECT COUNT(*) FROM campaigns WHERE tenant_id = ? AND environment = ? AND status IN ('draft', 'running')`,
				c.TenantID, string(c.Env)).Scan(&n); err != nil {
				return err
			}
			if n >= maxOpen {
				return sb.Invalid("name", "This environment already has the maximum of %d open (draft or running) campaigns; launch, cancel or wait for one first.", maxOpen)
			}
		}
		_, err := tx.exec(ctx, `INSERT INTO campaigns (`+campaignCols+`, recipients)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, 0, 0, 0, 0, 0, 0, ?, NULL, NULL, NULL, ?)`,
			c.ID, c.TenantID, string(c.Env), c.Name, nullStr(c.Body), nullStr(c.Template), nullStr(c.TemplateBody), data,
			c.Channel, c.Audience, c.Status, c.Total, sb.Micros(c.CreatedAt), recipients)
		return err
	})
	if err == nil && c.Status != sb.CampaignDraft { // created running (tests, imports): the runner's at once
		wake(db.campaignsDue)
	}
	return err
}

// Campaign returns one campaign with its message counts, or
// CAMPAIGN_NOT_FOUND.
func (db *DB) Campaign(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Campaign, error) {
	c, err := scanCampaign(db.queryRow(ctx, `SELECT `+campaignCols+` FROM campaigns WHERE tenant_id = ? AND environment = ? AND id = ?`,
		tenantID, string(env), id))
	if err != nil {
		return nil, err
	}
	if err := db.countCampaigns(ctx, tenantID, env, []*sb.Campaign{c}); err != nil {
		return nil, err
	}
	return c, nil
}

// Campaigns lists the tenant's campaigns with their counts, newest first,
// after the cursor; one more than the page when more remain.
func (db *DB) Campaigns(ctx context.Context, tenantID string, env sb.Environment, p sb.Page) ([]*sb.Campaign, error) {
	q := `SELECT ` + campaignCols + ` FROM campaigns WHERE tenant_id = ? AND environment = ?`
	args := []any{tenantID, string(env)}
	if p.After != "" {
		q += ` AND id < ?`
		args = append(args, p.After)
	}
	out, err := db.queryCampaigns(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, p.Limit+1)...)
	if err != nil {
		return nil, err
	}
	if err := db.countCampaigns(ctx, tenantID, env, out); err != nil {
		return nil, err
	}
	return out, nil
}

// queryCampaigns runs a query of campaigns and scans them all.
func (db *DB) queryCampaigns(ctx context.Context, query string, args ...any) ([]*sb.Campaign, error) {
	rows, err := db.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*sb.Campaign
	for rows.Next() {
		c, err := scanCampaign(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// countCampaigns fills in the message counts of cs, and the total of draft
// all-contacts campaigns (the number of contacts now).
func (db *DB) countCampaigns(ctx context.Context, tenantID string, env sb.Environment, cs []*sb.Campaign) error {
	byID := make(map[string]*sb.Campaign, len(cs))
	args := []any{tenantID}
	for _, c := range cs {
		if c.Status == sb.CampaignDraft {
			if c.Audience == sb.AudienceAllContacts {
				if err := db.queryRow(ctx, `SELECT COUNT(*) FROM contacts WHERE tenant_id = ? AND environment = ?`, tenantID, string(env)).Scan(&c.Total); err != nil {
					return err
				}
			}
			continue
		}
		byID[c.ID] = c
		args = append(args, c.ID)
	}
	if len(byID) == 0 {
		return nil
	}
	rows, err := db.query(ctx, `SELECT campaign_id, status, error_code, COUNT(*) FROM messages
		WHERE tenant_id = ? AND campaign_id IN (`+placeholders(len(byID))+`) GROUP BY campaign_id, status, error_code`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		var code sql.NullString
		var n int
		if err := rows.Scan(&id, &status, &code, &n); err != nil {
			return err
		}
		m := &byID[id].Messages
		switch {
		case status == sb.StatusQueued:
			m.Queued += n
		case status == sb.StatusSent:
			m.Sent += n
		case status == sb.StatusDelivered:
			m.Delivered += n
		case status == sb.StatusFailed && code.String == sb.ErrorCodeCampaignCanceled:
			m.Canceled += n
		case status == sb.StatusFailed:
			m.Failed += n
		}
	}
	return rows.Err()
}

// campaignState reads a campaign's status inside a write, locking its row on
// PostgreSQL so that launches, cancels and chunks of one campaign serialize.
func (t *Tx) campaignState(ctx context.Context, tenantID string, env sb.Environment, id string) (status string, progress int, err error) {
	lock := ""
	if t.db.dialect == Postgres {
		lock = " FOR UPDATE"
	}
	err = t.queryRow(ctx, `SELECT status, progress FROM campaigns WHERE tenant_id = ? AND environment = ? AND id = ?`+lock,
		tenantID, string(env), id).Scan(&status, &progress)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, errCampaignNotFound
	}
	return status, progress, err
}

// LaunchCampaign moves a draft campaign to running and returns it; an
// all-contacts campaign takes the contacts that exist now. Any other status
// is CAMPAIGN_NOT_DRAFT.
func (db *DB) LaunchCampaign(ctx context.Context, tenantID string, env sb.Environment, id string, now time.Time) (*sb.Campaign, error) {
	err := db.Write(ctx, func(tx *Tx) error {
		status, _, err := tx.campaignState(ctx, tenantID, env, id)
		if err != nil {
			return err
		}
		if status != sb.CampaignDraft {
			return errCampaignNotDraft
		}
		_, err = tx.exec(ctx, `UPDATE campaigns SET status = 'running', launched_at = ?,
			total = CASE WHEN audience = 'all_contacts'
				THEN (SELECT COUNT(*) FROM contacts WHERE tenant_id = ? AND environment = ? AND created_at <= ?)
				ELSE total END
			WHERE id = ?`, sb.Micros(now), tenantID, string(env), sb.Micros(now), id)
		return err
	})
	if err != nil {
		return nil, err
	}
	wake(db.campaignsDue)
	return db.Campaign(ctx, tenantID, env, id)
}

// CancelCampaign cancels a draft or running campaign and returns it: no
// more messages are created, and the runner withdraws those not yet handed
// to the provider. A completed or canceled campaign is returned unchanged.
func (db *DB) CancelCampaign(ctx context.Context, tenantID string, env sb.Environment, id string, now time.Time) (*sb.Campaign, error) {
	err := db.Write(ctx, func(tx *Tx) error {
		status, _, err := tx.campaignState(ctx, tenantID, env, id)
		if err != nil {
			return err
		}
		if status != sb.CampaignDraft && status != sb.CampaignRunning {
			return nil
		}
		withdrawn := 0
		if status == sb.CampaignDraft {
			withdrawn = 1 // it has no messages
		}
		_, err = tx.exec(ctx, `UPDATE campaigns SET status = 'canceled', canceled_at = ?, withdrawn = ? WHERE id = ?`, sb.Micros(now), withdrawn, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	wake(db.campaignsDue)
	return db.Campaign(ctx, tenantID, env, id)
}

// ActiveCampaigns returns the campaigns the runner has work for, of every
// tenant, oldest first: running ones, and canceled ones whose unsent
// messages are not withdrawn yet. Counts are not filled in.
func (db *DB) ActiveCampaigns(ctx context.Context) ([]*sb.Campaign, error) {
	return db.queryCampaigns(ctx, `SELECT `+campaignCols+` FROM campaigns
		WHERE status = 'running' OR (status = 'canceled' AND withdrawn = 0) ORDER BY id`)
}

// CampaignRecipients returns the numbers or contact ids of a list campaign.
func (db *DB) CampaignRecipients(ctx context.Context, id string) ([]string, error) {
	var raw sql.NullString
	if err := db.queryRow(ctx, `SELECT recipients FROM campaigns WHERE id = ?`, id).Scan(&raw); err != nil {
		return nil, err
	}
	var out []string
	if raw.Valid {
		if err := json.Unmarshal([]byte(raw.String), &out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CompleteCampaign marks a running, fully expanded campaign completed when
// none of its messages is queued or sent any more, and reports whether it
// did.
func (db *DB) CompleteCampaign(ctx context.Context, c *sb.Campaign, now time.Time) (bool, error) {
	if open, err := db.campaignOpen(ctx, db, c); err != nil || open {
		return false, err
	}
	var done bool
	err := db.Write(ctx, func(tx *Tx) error {
		done = false
		status, _, err := tx.campaignState(ctx, c.TenantID, c.Env, c.ID)
		if err != nil || status != sb.CampaignRunning {
			return err
		}
		if open, err := db.campaignOpen(ctx, tx, c); err != nil || open {
			return err
		}
		res, err := tx.exec(ctx, `UPDATE campaigns SET status = 'completed', completed_at = ? WHERE id = ? AND expanded = 1`, sb.Micros(now), c.ID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		done = n == 1
		return err
	})
	return done, err
}

// campaignOpen reports whether any message of c is still queued or sent.
// On PostgreSQL the campaign's index has no status (so that finishing a
// message is a heap-only update; see migration 0019): the rows are read
// newest first, where the messages not yet finished are.
func (db *DB) campaignOpen(ctx context.Context, q querier, c *sb.Campaign) (bool, error) {
	order := ""
	if db.dialect == Postgres {
		order = " ORDER BY id DESC"
	}
	var one int
	err := q.queryRow(ctx, `SELECT 1 FROM messages WHERE tenant_id = ? AND campaign_id = ? AND status IN ('queued', 'sent')`+order+` LIMIT 1`,
		c.TenantID, c.ID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// WithdrawCampaign fails up to limit messages of a canceled campaign that
// no provider or device holds (queued with no attempt, or waiting in the
// device queue for a device: never handed out, or proven unsent and not
// handed out again), with error_code CAMPAIGN_CANCELED and their
// message.failed events, and marks the campaign withdrawn once none is
// left. It returns how many it withdrew.
//
// In the pass that finds none left, the messages a device holds and has
// not reported Processed (sb.CancelOnDevice) are canceled on the device:
// their cancel_at is set and their devices are woken, whose event streams
// say MessageCancelled (see DeviceCancels and ReportDeviceStates).
//
// A withdrawn message gives back what it reserved of the daily limits (see
// releaseWithdrawn).
func (db *DB) WithdrawCampaign(ctx context.Context, c *sb.Campaign, now time.Time, limit int) (int, error) {
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	var n int
	err := db.Write(ctx, func(tx *Tx) error {
		n = 0
		// The conditions are repeated outside the subquery so that a message
		// claimed or handed to a device meanwhile is left alone on
		// PostgreSQL.
		const unheld = `status = 'queued' AND (attempts = 0 OR (device_due IS NOT NULL AND device_id IS NULL))`
		rows, err := tx.query(ctx, `UPDATE messages SET status = 'failed', failed_at = ?, failure_reason = ?, error_code = ?, run_at = NULL, device_due = NULL
			WHERE id IN (SELECT id FROM messages WHERE tenant_id = ? AND campaign_id = ? AND `+unheld+` LIMIT ?`+lock+`)
			AND `+unheld+` RETURNING `+messageCols+`, counted_day, counted_phone`,
			sb.Micros(now), sb.CanceledReason, sb.ErrorCodeCampaignCanceled, c.TenantID, c.ID, limit)
		if err != nil {
			return err
		}
		failed, err := scanWithdrawn(rows)
		if err != nil {
			return err
		}
		if err := tx.releaseWithdrawn(ctx, c.TenantID, c.Env, failed); err != nil {
			return err
		}
		n = len(failed)
		if n < limit {
			if err := tx.cancelHeld(ctx, c, now); err != nil {
				return err
			}
			_, err = tx.exec(ctx, `UPDATE campaigns SET withdrawn = 1 WHERE id = ?`, c.ID)
		}
		return err
	})
	return n, err
}

// withdrawn is a message failed because its campaign was canceled, with
// the phone whose daily counter it was counted on (counted_phone).
type withdrawn struct {
	*sb.Message
	countedPhone string
}

// scanWithdrawn reads rows of messageCols, counted_day, counted_phone and
// closes them.
func scanWithdrawn(rows *sql.Rows) ([]withdrawn, error) {
	defer rows.Close()
	var out []withdrawn
	for rows.Next() {
		var day, phone sql.NullString
		m, err := scanMessageWith(rows, &day, &phone)
		if err != nil {
			return nil, err
		}
		m.CountedDay = day.String
		out = append(out, withdrawn{m, phone.String})
	}
	return out, rows.Err()
}

// releaseWithdrawn releases what withdrawn messages of a tenant's environment
// reserved of the daily limits, on whatever day they were counted (a
// deferred message, on the day it was deferred to): its count on its
// phone's counter of that day and, when its creation made the recipient
// known and nothing else has used the recipient since, the new contact of
// that day, the recipient becoming unknown again. A recipient that
// something else has used (another message to it or from it) stays known,
// and its count stays charged. It then emits message.failed for each.
func (t *Tx) releaseWithdrawn(ctx context.Context, tenantID string, env sb.Environment, msgs []withdrawn) error {
	release := map[string]int64{} // "counter\x00day" -> count given back
	for _, m := range msgs {
		if m.CountedDay == "" {
			continue
		}
		if m.countedPhone != "" {
			release[phoneCounter(m.countedPhone)+"\x00"+m.CountedDay]++
		}
		res, err := t.exec(ctx, `DELETE FROM recipients WHERE tenant_id = ? AND environment = ? AND number = ? AND reserved_by = ?`,
			m.TenantID, string(m.Env), m.To, m.ID)
		if err != nil {
			return err
		}
		if gone, err := res.RowsAffected(); err != nil {
			return err
		} else if gone > 0 {
			release["new_contacts\x00"+m.CountedDay]++
		}
	}
	if err := t.release(ctx, tenantID, env, release); err != nil {
		return err
	}
	hooks := hookCache{}
	for _, m := range msgs {
		if err := t.emit(ctx, hooks, m.Message, sb.EventFailed); err != nil {
			return err
		}
	}
	return nil
}

// cancelHeld asks the devices that hold messages of the canceled campaign
// c, not reported Processed, to withdraw them (sb.CancelOnDevice): their
// cancel_at is set, and their phones' devices are woken.
func (t *Tx) cancelHeld(ctx context.Context, c *sb.Campaign, now time.Time) error {
	rows, err := t.query(ctx, `SELECT id, phone_id, device_state FROM messages WHERE tenant_id = ? AND campaign_id = ? AND status = 'queued'
		AND device_id IS NOT NULL AND device_due IS NOT NULL AND cancel_at IS NULL`, c.TenantID, c.ID)
	if err != nil {
		return err
	}
	var ids []any
	phones := map[string]bool{}
	for rows.Next() {
		var id string
		var phone, state sql.NullString
		if err := rows.Scan(&id, &phone, &state); err != nil {
			rows.Close()
			return err
		}
		if phone.Valid && sb.CancelOnDevice(state.String) {
			ids = append(ids, id)
			phones[phone.String] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return err
	}
	if _, err := t.exec(ctx, `UPDATE messages SET cancel_at = ? WHERE id IN (`+placeholders(len(ids))+`) AND status = 'queued' AND device_id IS NOT NULL`,
		append([]any{sb.Micros(now)}, ids...)...); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(phones)) {
		if err := t.notifyPhone(ctx, id); err != nil {
			return err
		}
	}
	t.afterCommit(func() {
		t.db.log.Info("campaign canceled: its messages held by phones are withdrawn from them", "tenant_id", c.TenantID, "campaign_id", c.ID,
			"messages", len(ids), "phones", len(phones))
	})
	return nil
}

// release takes counts back from daily counters ("counter\x00day" ->
// count): from the transaction's shard of each (a shard may go below zero,
// the counter's sum does not: it counted the messages given back), and,
// for a counter with a limit, from what the nodes reserved of it, so that
// the units can be reserved again (on PostgreSQL once the transaction has
// committed: see reserveBlock). The phone cache of this node forgets the
// tenant, whose phones' use went down.
func (t *Tx) release(ctx context.Context, tenantID string, env sb.Environment, counts map[string]int64) error {
	if len(counts) == 0 {
		return nil
	}
	var back []counterKey
	for _, key := range slices.Sorted(maps.Keys(counts)) {
		counter, day, _ := strings.Cut(key, "\x00")
		k := counts[key]
		if _, err := t.exec(ctx, `INSERT INTO daily_counters (tenant_id, environment, counter, day, shard, n) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant_id, environment, counter, day, shard) DO UPDATE SET n = daily_counters.n + excluded.n`,
			tenantID, string(env), counter, day, t.shard, -k); err != nil {
			return err
		}
		ck := counterKey{tenantID, env, counter, day}
		if t.db.dialect == Postgres {
			back = append(back, ck)
		} else {
			t.db.giveBack(ctx, t, ck, k)
		}
	}
	t.afterCommit(func() {
		t.db.phoneCache.forget(tenantID)
		for _, ck := range back {
			t.db.giveBack(ctx, nil, ck, counts[ck.name+"\x00"+ck.day])
		}
	})
	return nil
}

// byNumbers selects cols of the rows of table in the tenant's environment
// whose column col is one of values, each found through the table's
// (tenant_id, environment, col) unique index. On PostgreSQL, before a table
// is analyzed the planner takes tenant_id and environment for very
// selective and scans all of the tenant's rows, filtering the values, for
// an IN list or a join alike; one lookup per value, in a LATERAL subquery
// that LIMIT keeps from being flattened, always uses the whole index.
func (t *Tx) byNumbers(ctx context.Context, cols, table, col, tenantID string, env sb.Environment, values []string) (*sql.Rows, error) {
	if t.db.dialect == Postgres {
		return t.query(ctx, `SELECT r.* FROM unnest(?::text[]) AS v(value) JOIN LATERAL
			(SELECT `+cols+` FROM `+table+` WHERE tenant_id = ? AND environment = ? AND `+col+` = v.value LIMIT 1) r ON true`,
			values, tenantID, string(env))
	}
	args := make([]any, 0, len(values)+2)
	args = append(args, tenantID, string(env))
	for _, v := range values {
		args = append(args, v)
	}
	return t.query(ctx, `SELECT `+cols+` FROM `+table+` WHERE tenant_id = ? AND environment = ? AND `+col+` IN (`+placeholders(len(values))+`)`, args...)
}

// maxDeferDays bounds how far ahead a campaign message may be deferred by
// daily limits; a recipient that fits no day within it blocks the campaign.
const maxDeferDays = 366

// insertRows is the most rows one multi-row INSERT carries.
const insertRows = 400

// StoreChunk stores the next recipients of a running campaign, with the
// campaign's progress, in one transaction: the chunk is stored exactly once
// even when several nodes or a restarted runner prepare it again. Each
// recipient gets the rules of a direct send, deferred rather than refused:
// opted out, it is skipped; past the day's new-contact limit or with every
// phone for its channel at its daily limit, its message waits for the first
// UTC day with room (counted against that day); in quiet hours, it waits for
// them to end. Phones are chosen as for a direct send.
func (db *DB) StoreChunk(ctx context.Context, ch *sb.CampaignChunk) (sb.ChunkResult, error) {
	var res sb.ChunkResult
	c := ch.Campaign
	err := db.Write(ctx, func(tx *Tx) error {
		res = sb.ChunkResult{}
		status, progress, err := tx.campaignState(ctx, c.TenantID, c.Env, c.ID)
		if err != nil {
			return err
		}
		if status != sb.CampaignRunning || progress != c.Position {
			return nil // the campaign moved on: write nothing
		}
		pl, err := tx.newPlacer(ctx, ch)
		if err != nil {
			return err
		}
		var skippedOpted, skippedInvalid, deferredQuiet, deferredLimits int
		var msgs []*sb.Message
		after := c.After
		due := false
		for _, r := range ch.Recipients {
			m := r.Message
			switch {
			case m == nil:
				skippedInvalid++
			case pl.rcp[m.To].optedOut:
				skippedOpted++
			default:
				d, ok, err := pl.place(ctx, m)
				if err != nil {
					return err
				}
				if !ok {
					res.Blocked = true
					break
				}
				at := ch.Now
				m.ScheduledAt = nil
				if d > 0 {
					at = pl.today.AddDate(0, 0, d)
				}
				quiet := false
				if r.Quiet != nil {
					if until, q := r.Quiet(at); q {
						at, quiet = until.Truncate(time.Microsecond), true
					}
				}
				switch {
				case d > 0:
					deferredLimits++
				case quiet:
					deferredQuiet++
				}
				if at.After(ch.Now) {
					m.ScheduledAt = &at
				} else {
					due = true
				}
				// A message of an auto campaign that a chat engine carries
				// goes again by SMS if not delivered within its ttl.
				m.ChatFallbackAt = m.ChatDeadline()
				msgs = append(msgs, m)
			}
			if res.Blocked {
				break
			}
			res.Done++
			after = r.After
		}
		if err := tx.insertMessages(ctx, msgs); err != nil {
			return err
		}
		expanded := ch.Last && res.Done == len(ch.Recipients)
		_, err = tx.exec(ctx, `UPDATE campaigns SET progress = progress + ?, after_contact = ?, expanded = ?,
			total = CASE WHEN ? = 1 THEN progress + ? ELSE total END,
			skipped_opted_out = skipped_opted_out + ?, skipped_invalid = skipped_invalid + ?,
			deferred_quiet = deferred_quiet + ?, deferred_limits = deferred_limits + ? WHERE id = ?`,
			res.Done, nullStr(after), boolInt(expanded), boolInt(expanded), res.Done,
			skippedOpted, skippedInvalid, deferredQuiet, deferredLimits, c.ID)
		if err != nil {
			return err
		}
		if err := pl.write(ctx); err != nil { // last: the day counters are shared with direct sends
			return err
		}
		if due {
			tx.afterCommit(db.wakeMessages)
		}
		notified := map[string]bool{}
		for _, m := range msgs {
			if m.ViaDevice() && m.ScheduledAt == nil && !notified[m.PhoneID] {
				notified[m.PhoneID] = true
				if err := tx.notifyPhone(ctx, m.PhoneID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return res, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// insertMessages inserts outbound messages, due at their ScheduledAt or
// their CreatedAt, with multi-row statements: in the delivery queue, or the
// device queue for those their phone's device takes (see insertMessage).
func (t *Tx) insertMessages(ctx context.Context, ms []*sb.Message) error {
	const cols = 31
	for len(ms) > 0 {
		n := min(len(ms), insertRows)
		args := make([]any, 0, n*cols)
		for _, m := range ms[:n] {
			runAt := m.CreatedAt
			if m.ScheduledAt != nil {
				runAt = *m.ScheduledAt
			}
			args = append(args, m.ID, m.TenantID, string(m.Env), m.Direction, m.From, m.To, m.Body, m.Channel, m.Status,
				nullStr(m.FailureReason), nullStr(m.ErrorCode), nullStr(m.Template), nullStr(m.CampaignID), nullStr(m.PhoneID),
				sb.Micros(m.CreatedAt), microsOrNil(m.ScheduledAt), microsOrNil(m.SentAt), microsOrNil(m.DeliveredAt), microsOrNil(m.FailedAt),
				m.Attempts, engineOf(m), microsOrNil(m.ReadAt), fallbackFrom(m), fallbackReason(m), ttlSeconds(m), boolInt(m.HighPriority),
				microsOrNil(m.ChatFallbackAt))
			if m.ViaDevice() {
				args = append(args, nil, sb.Micros(runAt))
			} else {
				args = append(args, sb.Micros(runAt), nil)
			}
			if m.CountedDay != "" {
				args = append(args, m.CountedDay, nullStr(m.PhoneID))
			} else {
				args = append(args, nil, nil)
			}
		}
		if _, err := t.exec(ctx, `INSERT INTO messages (`+messageCols+`, chat_fallback_at, run_at, device_due, counted_day, counted_phone) VALUES `+valueRows(n, cols), args...); err != nil {
			return err
		}
		ms = ms[n:]
	}
	return nil
}

// placer decides, within a chunk's transaction, the day and phone of each
// campaign message, keeping the day counters it reads and the changes it
// makes in memory until write.
type placer struct {
	tx       *Tx
	tenantID string
	env      sb.Environment
	limit    int // new contacts per day; 0 is none
	now      time.Time
	today    time.Time // 00:00 UTC of now's day

	rcp    map[string]recipient // by number
	fresh  []string             // numbers that became known in this chunk, in order
	sticky []string             // known numbers that got their first phone
	// unreserve are known numbers that another campaign's message made
	// known (reserved_by): a second message to them makes the number
	// known for good, whatever becomes of the first.
	unreserve []string
	phones    []*sb.Phone // online phones

	newContacts map[int]int64            // day -> first-time recipients
	phoneUse    map[int]map[string]int64 // day -> phone id -> messages
	bumps       map[string]int64         // "counter\x00day" -> increment
	// Lower bounds, valid for the whole chunk since counters only grow:
	// the first day with room for a new contact, and per channel for a
	// phone.
	ncFrom    int
	phoneFrom map[string]int
}

func (t *Tx) newPlacer(ctx context.Context, ch *sb.CampaignChunk) (*placer, error) {
	c := ch.Campaign
	p := &placer{tx: t, tenantID: c.TenantID, env: c.Env, limit: ch.NewContactLimit, now: ch.Now,
		today: ch.Now.UTC().Truncate(24 * time.Hour), rcp: map[string]recipient{},
		newContacts: map[int]int64{}, phoneUse: map[int]map[string]int64{}, bumps: map[string]int64{}, phoneFrom: map[string]int{}}
	var numbers []string
	for _, r := range ch.Recipients {
		if r.Message != nil {
			numbers = append(numbers, r.Message.To)
		}
	}
	for len(numbers) > 0 {
		n := min(len(numbers), insertRows)
		rows, err := t.byNumbers(ctx, `number, opted_out, phone_id, reserved_by`, `recipients`, `number`, c.TenantID, c.Env, numbers[:n])
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var number string
			var opted int
			var phone, reserved sql.NullString
			if err := rows.Scan(&number, &opted, &phone, &reserved); err != nil {
				rows.Close()
				return nil, err
			}
			p.rcp[number] = recipient{known: true, optedOut: opted != 0, phoneID: phone.String, reservedBy: reserved.String}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		numbers = numbers[n:]
	}
	rows, err := t.query(ctx, `SELECT `+phoneCols+` FROM phones WHERE tenant_id = ? ORDER BY id`, c.TenantID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var all []*sb.Phone
	for rows.Next() {
		ph, err := scanPhone(rows)
		if err != nil {
			return nil, err
		}
		all = append(all, ph)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, ph := range sb.LiveSenders(p.env, all) {
		if t.db.routing.Online(ph, p.now) {
			p.phones = append(p.phones, ph)
		}
	}
	return p, nil
}

func (p *placer) day(d int) string { return sb.Day(p.today.AddDate(0, 0, d)) }

// place finds the first day, from today, on which m may go out under the
// new-contact and phone limits, chooses its phone and records the counts;
// ok is false when no online phone sends on m's channel or no day within
// maxDeferDays has room.
func (p *placer) place(ctx context.Context, m *sb.Message) (day int, ok bool, err error) {
	rcp := p.rcp[m.To]
	newContact := !rcp.known
	limited := newContact && p.limit > 0
	d := p.phoneFrom[m.Channel]
	if limited {
		d = max(d, p.ncFrom)
	}
	for ; d <= maxDeferDays; d++ {
		// A limited counter's unit is taken from what this node reserved
		// (see counters.go); the counts read are a guide for the choice.
		ncKey := counterKey{p.tenantID, p.env, "new_contacts", p.day(d)}
		if limited {
			n, err := p.newContactsOn(ctx, d)
			if err != nil {
				return 0, false, err
			}
			ok := n < int64(p.limit)
			if ok {
				if ok, err = p.tx.take(ctx, ncKey, p.limit); err != nil {
					return 0, false, err
				}
			}
			if !ok {
				p.newContacts[d] = int64(p.limit)
				p.ncFrom = d + 1
				continue
			}
		}
		use, err := p.phoneUseOn(ctx, d)
		if err != nil {
			return 0, false, err
		}
		var chosen *sb.Phone
		capable := false
		for chosen == nil {
			var usable []sb.PhoneUse
			for _, ph := range p.phones {
				if !ph.HasChannel(m.Channel) {
					continue
				}
				capable = true
				if lim := ph.LimitOn(p.today.AddDate(0, 0, d)); lim == 0 || use[ph.ID] < int64(lim) {
					usable = append(usable, sb.PhoneUse{Phone: ph, Used: use[ph.ID], Day: p.today.AddDate(0, 0, d)})
				}
			}
			if len(usable) == 0 {
				break
			}
			ph := p.tx.db.routing.Pick(p.env, usable, m.Channel, "", rcp.phoneID, "", p.now).Phone
			lim := ph.LimitOn(p.today.AddDate(0, 0, d)) // the daily limit, or its warm-up's that day
			if lim == 0 {
				chosen = ph
				break
			}
			ok, err := p.tx.take(ctx, counterKey{p.tenantID, p.env, phoneCounter(ph.ID), p.day(d)}, lim)
			if err != nil {
				return 0, false, err
			}
			if ok {
				chosen = ph
			} else {
				use[ph.ID] = int64(ph.DailyLimit) // used up across the nodes
			}
		}
		// Test mode needs no phone; a phone's daily limit is simulated all
		// the same (the message waits for a day with room).
		sandbox := chosen == nil && p.env != sb.Live && !capable
		if chosen == nil && limited && !sandbox {
			p.tx.returnTake(ncKey)
		}
		if !capable && !sandbox {
			return 0, false, nil
		}
		if chosen == nil && !sandbox {
			p.phoneFrom[m.Channel] = d + 1
			continue
		}
		m.CountedDay = p.day(d)
		if sandbox {
			// Test mode needs no phone: the simulator sends it from its
			// sandbox number, counted on no phone.
			m.From, m.PhoneID, m.PhoneKind = sb.SandboxNumber, "", sb.PhoneSimulated
		} else {
			m.From, m.PhoneID, m.PhoneKind = chosen.Number, chosen.ID, chosen.Kind
			use[chosen.ID]++
			p.bumps[phoneCounter(chosen.ID)+"\x00"+p.day(d)]++
		}
		m.Engine = sb.EngineOf(p.env, m.PhoneKind)
		if newContact {
			p.newContacts[d]++
			p.bumps["new_contacts\x00"+p.day(d)]++
			p.fresh = append(p.fresh, m.To)
			p.rcp[m.To] = recipient{known: true, phoneID: m.PhoneID, reservedBy: m.ID}
			return d, true, nil
		}
		if rcp.reservedBy != "" {
			p.unreserve = append(p.unreserve, m.To)
			rcp.reservedBy = ""
		}
		if rcp.phoneID == "" && m.PhoneID != "" {
			p.sticky = append(p.sticky, m.To)
			rcp.phoneID = m.PhoneID
		}
		p.rcp[m.To] = rcp
		return d, true, nil
	}
	return 0, false, nil
}

func (p *placer) newContactsOn(ctx context.Context, d int) (int64, error) {
	if n, ok := p.newContacts[d]; ok {
		return n, nil
	}
	n, err := p.tx.counter(ctx, p.tenantID, p.env, "new_contacts", p.day(d))
	p.newContacts[d] = n
	return n, err
}

func (p *placer) phoneUseOn(ctx context.Context, d int) (map[string]int64, error) {
	if use, ok := p.phoneUse[d]; ok {
		return use, nil
	}
	use := map[string]int64{}
	rows, err := p.tx.query(ctx, `SELECT counter, CAST(SUM(n) AS BIGINT) FROM daily_counters
		WHERE tenant_id = ? AND environment = ? AND day = ? AND counter LIKE 'phone:%' GROUP BY counter`,
		p.tenantID, string(p.env), p.day(d))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var counter string
		var n int64
		if err := rows.Scan(&counter, &n); err != nil {
			return nil, err
		}
		use[strings.TrimPrefix(counter, "phone:")] = n
	}
	p.phoneUse[d] = use
	return use, rows.Err()
}

// write stores what place recorded: the recipients that became known, the
// phones that became sticky and, last because direct sends of the tenant
// update the same rows, the day counters.
func (p *placer) write(ctx context.Context) error {
	now := sb.Micros(p.now)
	for fresh := p.fresh; len(fresh) > 0; {
		n := min(len(fresh), insertRows)
		args := make([]any, 0, n*8)
		for _, number := range fresh[:n] {
			r := p.rcp[number]
			args = append(args, p.tenantID, string(p.env), number, 0, r.phoneID, now, now, nullStr(r.reservedBy))
		}
		// A direct send may have made one of them known meanwhile (several
		// writers on PostgreSQL): its row stays, the count stays charged.
		if _, err := p.tx.exec(ctx, `INSERT INTO recipients (tenant_id, environment, number, opted_out, phone_id, first_seen_at, updated_at, reserved_by)
			VALUES `+valueRows(n, 8)+` ON CONFLICT (tenant_id, environment, number) DO NOTHING`, args...); err != nil {
			return err
		}
		fresh = fresh[n:]
	}
	for _, number := range p.sticky {
		if _, err := p.tx.exec(ctx, `UPDATE recipients SET phone_id = ? WHERE tenant_id = ? AND environment = ? AND number = ?`,
			p.rcp[number].phoneID, p.tenantID, string(p.env), number); err != nil {
			return err
		}
	}
	for _, number := range p.unreserve {
		res, err := p.tx.exec(ctx, `UPDATE recipients SET reserved_by = NULL WHERE tenant_id = ? AND environment = ? AND number = ?`,
			p.tenantID, string(p.env), number)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			// A withdrawal forgot the recipient after this chunk read it
			// (PostgreSQL): prepare the chunk again.
			return cmp.Or(err, errLostRace)
		}
	}
	// The counts go to the transaction's shards with the direct sends'
	// (see flushBumps).
	for key, n := range p.bumps {
		counter, day, _ := strings.Cut(key, "\x00")
		p.tx.bumpN(counterKey{p.tenantID, p.env, counter, day}, n)
	}
	return nil
}
