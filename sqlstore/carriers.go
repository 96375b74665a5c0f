package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Carrier links: what the store keeps of the messages that went out over a
// carrier link (see the carrier_* tables of migration 0010 and sb.CarrierEvent).
// A message has one or more parts; each part is written to the carrier,
// accepted with an id (or refused), and later receipted. The message is sent
// once every part is accepted, delivered once every part is delivered, and
// failed as soon as one part fails.

// orphanTTL is how long a receipt for an id no part has is kept, waiting for
// the answer that gives the id.
const orphanTTL = 7 * 24 * time.Hour

// CarrierPhone returns the phone of the link whose number is number.
func (db *DB) CarrierPhone(ctx context.Context, link, number string) (*sb.Phone, error) {
	return scanPhone(db.queryRow(ctx, `SELECT `+phoneCols+` FROM phones WHERE link = ? AND number = ?`, link, number))
}

// CarrierParts returns what the store knows of the parts of the messages
// ids, by message id; a message none of whose parts were written has none.
func (db *DB) CarrierParts(ctx context.Context, ids []string) (map[string][]sb.CarrierPart, error) {
	out := map[string][]sb.CarrierPart{}
	for len(ids) > 0 {
		n := min(len(ids), 500)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		rows, err := db.query(ctx, `SELECT message_id, part, parts, state, written_at FROM carrier_parts WHERE message_id IN (`+placeholders(n)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var p sb.CarrierPart
			var written sql.NullInt64
			if err := rows.Scan(&p.MessageID, &p.Part, &p.Parts, &p.State, &written); err != nil {
				rows.Close()
				return nil, err
			}
			if written.Valid {
				p.WrittenAt = sb.FromMicros(written.Int64)
			}
			out[p.MessageID] = append(out[p.MessageID], p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		ids = ids[n:]
	}
	return out, nil
}

// RecordCarrier applies, in one transaction and in order, what a link
// learned. Parts written and answered are recorded with the carrier's id, a
// refusal fails its message, a receipt moves its part and, when that decides
// it, its message (with its webhook event), and an inbound text is stored as
// Inbound stores it (STOP/START, message.received) for the tenant whose
// phone of the link has the number it was sent to. A receipt whose id no part
// has adopts the oldest part in doubt of a message with the receipt's
// addresses, or waits for the id (carrier_orphans). Repeats change nothing:
// a final part or message never changes again.
func (db *DB) RecordCarrier(ctx context.Context, link string, evs []sb.CarrierEvent) (sb.CarrierResult, error) {
	var res sb.CarrierResult
	err := db.writeRacing(ctx, func(tx *Tx) error {
		res = sb.CarrierResult{}
		c := &carrierTx{tx: tx, link: link, hooks: hookCache{}, res: &res}
		for i := range evs {
			if err := c.apply(ctx, &evs[i]); err != nil {
				return err
			}
		}
		// Deliveries are written together, in one statement.
		if len(c.delivered) > 0 {
			return tx.finish(ctx, c.delivered)
		}
		return nil
	}, rcpKey{})
	return res, err
}

type carrierTx struct {
	tx    *Tx
	link  string
	hooks hookCache
	res   *sb.CarrierResult
	// delivered are the messages this batch delivered, finished together
	// at its end (a final message never changes: a later event of the
	// batch about one of them changes nothing either way).
	delivered []sb.Outcome
}

// deliver notes a message delivered by this batch.
func (c *carrierTx) deliver(messageID string, at time.Time) {
	c.res.Done = append(c.res.Done, messageID)
	c.delivered = append(c.delivered, sb.Outcome{MessageID: messageID, Delivered: true, At: at, SentAt: at})
}

func (c *carrierTx) apply(ctx context.Context, e *sb.CarrierEvent) error {
	at := e.At
	if at.IsZero() {
		at = time.Now()
	}
	switch e.Kind {
	case sb.CarrierWritten:
		res, err := c.tx.exec(ctx, `INSERT INTO carrier_parts (message_id, part, parts, link, state, written_at, updated_at) VALUES (?, ?, ?, ?, 'written', ?, ?)
			ON CONFLICT (message_id, part) DO UPDATE SET written_at = excluded.written_at, updated_at = excluded.updated_at WHERE carrier_parts.state = 'written'`,
			e.MessageID, e.Part, max(e.Parts, 1), c.link, sb.Micros(at), sb.Micros(at))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // answered already
		}
		return c.adoptOrphan(ctx, e.MessageID, e.Part)
	case sb.CarrierAccepted:
		if err := c.keepID(ctx, e.ExternalID, e.MessageID, e.Part, at); err != nil {
			return err
		}
		if e.Parts <= 1 {
			// A message of one part, the common case: it keeps no part row
			// (its id decides; a final message never changes), unless it was
			// recorded as written.
			if _, err := c.tx.exec(ctx, `UPDATE carrier_parts SET state = 'accepted', written_at = NULL, updated_at = ?
				WHERE message_id = ? AND part = 0 AND state = 'written'`, sb.Micros(at), e.MessageID); err != nil {
				return err
			}
			if err := c.sent(ctx, e.MessageID, at); err != nil {
				return err
			}
		} else {
			if _, err := c.accept(ctx, e.MessageID, e.Part, e.Parts, at); err != nil {
				return err
			}
			if err := c.evaluate(ctx, e.MessageID, "", at); err != nil {
				return err
			}
		}
		// A receipt that came first (through another node's bind) waits here,
		// if it is about this message's recipient: the SMSC may have given
		// the id to another message before.
		if e.ExternalID == "" {
			return nil
		}
		var state int
		var reason, orphanTo string
		var orphanAt int64
		err := c.tx.queryRow(ctx, `SELECT state, reason, at, to_number FROM carrier_orphans WHERE link = ? AND external_id = ?`, c.link, e.ExternalID).
			Scan(&state, &reason, &orphanAt, &orphanTo)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if orphanTo != "" {
			var to string
			if err := c.tx.queryRow(ctx, `SELECT to_number FROM messages WHERE id = ?`, e.MessageID).Scan(&to); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if !sameNumber(to, orphanTo) {
				return nil
			}
		}
		if _, err := c.tx.exec(ctx, `DELETE FROM carrier_orphans WHERE link = ? AND external_id = ?`, c.link, e.ExternalID); err != nil {
			return err
		}
		return c.receipt(ctx, e.MessageID, e.Part, state, reason, sb.FromMicros(orphanAt))
	case sb.CarrierRefused:
		if _, err := c.partState(ctx, e.MessageID, e.Part, e.Parts, sb.PartFailed, at); err != nil {
			return err
		}
		return c.evaluate(ctx, e.MessageID, e.Reason, at)
	case sb.CarrierReceipt:
		return c.receiptEvent(ctx, e, at)
	case sb.CarrierInbound:
		return c.inbound(ctx, e.Inbound)
	}
	return fmt.Errorf("sqlstore: unknown carrier event %d", e.Kind)
}

// accept records that the carrier has a part (it gave it an id, or a
// receipt named it): a part written, or not known yet, becomes accepted. It
// reports whether the part changed.
func (c *carrierTx) accept(ctx context.Context, messageID string, part, parts int, at time.Time) (bool, error) {
	res, err := c.tx.exec(ctx, `INSERT INTO carrier_parts (message_id, part, parts, link, state, written_at, updated_at) VALUES (?, ?, ?, ?, 'accepted', NULL, ?)
		ON CONFLICT (message_id, part) DO UPDATE SET state = 'accepted', written_at = NULL, updated_at = excluded.updated_at
		WHERE carrier_parts.state = 'written'`,
		messageID, part, max(parts, 1), c.link, sb.Micros(at))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// partState makes a part final (delivered or failed) unless it is already,
// and reports whether it changed.
func (c *carrierTx) partState(ctx context.Context, messageID string, part, parts int, state string, at time.Time) (bool, error) {
	res, err := c.tx.exec(ctx, `INSERT INTO carrier_parts (message_id, part, parts, link, state, written_at, updated_at) VALUES (?, ?, ?, ?, ?, NULL, ?)
		ON CONFLICT (message_id, part) DO UPDATE SET state = excluded.state, written_at = NULL, updated_at = excluded.updated_at
		WHERE carrier_parts.state IN ('written', 'accepted')`,
		messageID, part, max(parts, 1), c.link, state, sb.Micros(at))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// sent makes a message sent, and takes it out of the delivery queue: its
// receipts finish it.
func (c *carrierTx) sent(ctx context.Context, messageID string, at time.Time) error {
	c.res.Done = append(c.res.Done, messageID)
	query, args, err := c.tx.unclaiming(ctx, messageID,
		`UPDATE messages SET status = 'sent', sent_at = COALESCE(sent_at, ?), run_at = NULL
		WHERE id = ? AND status IN ('queued', 'sent')`, []any{sb.Micros(at), messageID})
	if err != nil {
		return err
	}
	_, err = c.tx.exec(ctx, query, args...)
	return err
}

func (c *carrierTx) receiptEvent(ctx context.Context, e *sb.CarrierEvent, at time.Time) error {
	messageID, part := e.MessageID, e.Part
	if messageID != "" {
		// The receipt names its message (a status callback to the
		// message's own URL): its id may not be recorded yet. It settles
		// only a message that went out over this link (its phone's link):
		// an id of another link's message, or another tenant's, changes
		// nothing.
		var n int
		if err := c.tx.queryRow(ctx, `SELECT COUNT(*) FROM messages m JOIN phones p ON p.id = m.phone_id
			WHERE m.id = ? AND m.direction = 'outbound' AND p.link = ?`, messageID, c.link).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if err := c.keepID(ctx, e.ExternalID, messageID, part, at); err != nil {
			return err
		}
		return c.receipt(ctx, messageID, part, e.State, e.Reason, at)
	}
	found, err := c.findID(ctx, e)
	if err != nil {
		return err
	}
	if found != nil {
		return c.receiptOf(ctx, found.messageID, found.part, found.parts, e.State, e.Reason, at)
	}
	ref, err := c.adopt(ctx, e)
	if err != nil {
		return err
	}
	if ref != nil {
		if err := c.keepID(ctx, e.ExternalID, ref.MessageID, ref.Part, at); err != nil {
			return err
		}
		c.res.Adopted = append(c.res.Adopted, *ref)
		return c.receipt(ctx, ref.MessageID, ref.Part, e.State, e.Reason, at)
	}
	// Nobody has the id yet: keep the receipt for it (the latest one).
	if _, err := c.tx.exec(ctx, `DELETE FROM carrier_orphans WHERE at < ?`, sb.Micros(at.Add(-orphanTTL))); err != nil {
		return err
	}
	_, err = c.tx.exec(ctx, `INSERT INTO carrier_orphans (link, external_id, state, reason, at, from_number, to_number, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (link, external_id) DO UPDATE SET state = excluded.state, reason = excluded.reason, at = excluded.at
		WHERE carrier_orphans.state = 0`,
		c.link, e.ExternalID, e.State, e.Reason, sb.Micros(at), e.From, e.To, e.Text)
	return err
}

// keepID records that the carrier knows part part of messageID as id. An
// id the carrier gave before to another message is kept beside it: a
// receipt tells them apart by its recipient (see findID).
func (c *carrierTx) keepID(ctx context.Context, id, messageID string, part int, at time.Time) error {
	if id == "" {
		return nil
	}
	_, err := c.tx.exec(ctx, `INSERT INTO carrier_ids (link, external_id, message_id, part, at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (link, external_id, message_id, part) DO NOTHING`, c.link, id, messageID, part, sb.Micros(at))
	return err
}

// idMatch is a part a receipt's id names.
type idMatch struct {
	messageID string
	part      int
	parts     int // 0: the part has no row
	final     bool
	at        int64
}

// findID finds the part a receipt is about: one the link (or a sibling)
// knows by the receipt's id, in any of its forms, whose message went to
// the receipt's source address (its To) when the receipt has one. Of
// several (an id the carrier reused), one not final yet wins, then the
// latest recorded. Nil when no part matches.
func (c *carrierTx) findID(ctx context.Context, e *sb.CarrierEvent) (*idMatch, error) {
	var best *idMatch
	for _, link := range append([]string{c.link}, e.AltLinks...) {
		for _, id := range append([]string{e.ExternalID}, e.AltIDs...) {
			rows, err := c.tx.query(ctx, `SELECT i.message_id, i.part, i.at, m.to_number, m.status, p.parts, p.state FROM carrier_ids i
				JOIN messages m ON m.id = i.message_id
				LEFT JOIN carrier_parts p ON p.message_id = i.message_id AND p.part = i.part
				WHERE i.link = ? AND i.external_id = ?`, link, id)
			if err != nil {
				return nil, err
			}
			for rows.Next() {
				var m idMatch
				var to, status string
				var parts sql.NullInt64
				var state sql.NullString
				if err := rows.Scan(&m.messageID, &m.part, &m.at, &to, &status, &parts, &state); err != nil {
					rows.Close()
					return nil, err
				}
				if e.To != "" && !sameNumber(to, e.To) {
					continue // the id of another message, to another recipient
				}
				m.parts = int(parts.Int64)
				m.final = status == sb.StatusDelivered || status == sb.StatusFailed || state.String == sb.PartDelivered || state.String == sb.PartFailed
				if best == nil || (best.final && !m.final) || (best.final == m.final && m.at > best.at) {
					best = &m
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, err
			}
		}
		if best != nil {
			return best, nil
		}
	}
	return best, nil
}

// sameNumber reports whether two phone numbers are the same: the same
// digits, or, where an SMSC wrote one in a national form, the one's
// digits ending the other's (at least 7 of them).
func sameNumber(a, b string) bool {
	da, db := digitsOf(a), digitsOf(b)
	if da == "" || db == "" {
		return a == b
	}
	if len(da) < len(db) {
		da, db = db, da
	}
	return da == db || (len(db) >= 7 && strings.HasSuffix(da, db))
}

func digitsOf(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if r != '+' && r != ' ' && r != '-' {
			return "" // not a number (an alphanumeric sender)
		}
	}
	return b.String()
}

// adoptOrphan gives a part just recorded as written (in doubt) the oldest
// receipt kept for an unknown id with its message's addresses and text: a
// receipt that came before the part's answer, which was then lost.
func (c *carrierTx) adoptOrphan(ctx context.Context, messageID string, part int) error {
	var from, to, body string
	err := c.tx.queryRow(ctx, `SELECT from_number, to_number, body FROM messages WHERE id = ?`, messageID).Scan(&from, &to, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	rows, err := c.tx.query(ctx, `SELECT external_id, state, reason, at, text FROM carrier_orphans
		WHERE link = ? AND from_number = ? AND to_number = ? ORDER BY at LIMIT 20`, c.link, from, to)
	if err != nil {
		return err
	}
	var id, reason, text string
	var state int
	var at int64
	found := false
	for rows.Next() {
		if err := rows.Scan(&id, &state, &reason, &at, &text); err != nil {
			rows.Close()
			return err
		}
		if text == "" || strings.Contains(body, text) {
			found = true
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || !found {
		return err
	}
	if _, err := c.tx.exec(ctx, `DELETE FROM carrier_orphans WHERE link = ? AND external_id = ?`, c.link, id); err != nil {
		return err
	}
	if err := c.keepID(ctx, id, messageID, part, time.Now()); err != nil {
		return err
	}
	c.res.Adopted = append(c.res.Adopted, sb.PartRef{MessageID: messageID, Part: part})
	return c.receipt(ctx, messageID, part, state, reason, sb.FromMicros(at))
}

// adopt finds the part in doubt that a receipt with an unknown id is about:
// the oldest part of the link written and never answered, of a message from
// the receipt's To to its From whose body holds the receipt's text.
func (c *carrierTx) adopt(ctx context.Context, e *sb.CarrierEvent) (*sb.PartRef, error) {
	if e.From == "" || e.To == "" {
		return nil, nil
	}
	rows, err := c.tx.query(ctx, `SELECT p.message_id, p.part, m.body FROM carrier_parts p JOIN messages m ON m.id = p.message_id
		WHERE p.link = ? AND p.state = 'written' AND m.from_number = ? AND m.to_number = ?
		ORDER BY p.written_at LIMIT 20`, c.link, e.From, e.To)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var ref sb.PartRef
		var body string
		if err := rows.Scan(&ref.MessageID, &ref.Part, &body); err != nil {
			return nil, err
		}
		if e.Text == "" || strings.Contains(body, e.Text) {
			return &ref, rows.Close()
		}
	}
	return nil, rows.Err()
}

// receipt applies a receipt to a part, then to its message.
func (c *carrierTx) receipt(ctx context.Context, messageID string, part, state int, reason string, at time.Time) error {
	var parts int
	err := c.tx.queryRow(ctx, `SELECT parts FROM carrier_parts WHERE message_id = ? AND part = ?`, messageID, part).Scan(&parts)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return c.receiptOf(ctx, messageID, part, parts, state, reason, at)
}

// receiptOf is receipt for a part of a message of parts parts (0: the
// part has no row, which only the part of a message of one part can lack).
func (c *carrierTx) receiptOf(ctx context.Context, messageID string, part, parts, state int, reason string, at time.Time) error {
	if parts == 0 {
		// No part row: the message alone decides (a final message never
		// changes).
		switch state {
		case sb.ReceiptDelivered:
			c.deliver(messageID, at)
			return nil
		case sb.ReceiptFailed:
			c.res.Done = append(c.res.Done, messageID)
			return c.tx.finish(ctx, []sb.Outcome{{MessageID: messageID, FailureReason: reason, At: at, SentAt: at}})
		}
		return c.sent(ctx, messageID, at)
	}
	var err error
	var changed bool
	switch state {
	case sb.ReceiptDelivered:
		changed, err = c.partState(ctx, messageID, part, parts, sb.PartDelivered, at)
	case sb.ReceiptFailed:
		changed, err = c.partState(ctx, messageID, part, parts, sb.PartFailed, at)
	default:
		changed, err = c.accept(ctx, messageID, part, parts, at)
	}
	if err != nil {
		return err
	}
	if state != sb.ReceiptFailed {
		reason = ""
	} else if parts > 1 {
		reason = fmt.Sprintf("part %d of %d: %s", part+1, parts, reason)
	}
	if parts <= 1 {
		// The one part decides the message, without reading it back.
		switch {
		case !changed:
			return nil // a repeat, or a receipt after the part was final
		case state == sb.ReceiptPending:
			return c.sent(ctx, messageID, at)
		case state == sb.ReceiptDelivered:
			c.deliver(messageID, at)
			return nil
		default:
			c.res.Done = append(c.res.Done, messageID)
			return c.tx.finish(ctx, []sb.Outcome{{MessageID: messageID, FailureReason: reason, At: at, SentAt: at}})
		}
	}
	return c.evaluate(ctx, messageID, reason, at)
}

// evaluate decides a message from its parts: failed (with reason, when a
// part failed in this event) as soon as a part failed; delivered once every
// part is delivered; sent, and out of the delivery queue, once every part is
// accepted or final.
func (c *carrierTx) evaluate(ctx context.Context, messageID, reason string, at time.Time) error {
	rows, err := c.tx.query(ctx, `SELECT parts, state FROM carrier_parts WHERE message_id = ?`, messageID)
	if err != nil {
		return err
	}
	parts, accepted, delivered, failed := 0, 0, 0, 0
	for rows.Next() {
		var n int
		var state string
		if err := rows.Scan(&n, &state); err != nil {
			rows.Close()
			return err
		}
		parts = max(parts, n)
		switch state {
		case sb.PartAccepted:
			accepted++
		case sb.PartDelivered:
			delivered++
		case sb.PartFailed:
			failed++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	switch {
	case parts == 0:
		return nil
	case failed > 0:
		if reason == "" {
			return nil // failed already, by an earlier part
		}
		c.res.Done = append(c.res.Done, messageID)
		return c.tx.finish(ctx, []sb.Outcome{{MessageID: messageID, FailureReason: reason, At: at, SentAt: at}})
	case delivered == parts:
		c.deliver(messageID, at)
		return nil
	case accepted+delivered == parts:
		return c.sent(ctx, messageID, at)
	}
	return nil
}

// inbound stores a text received on one of the link's numbers.
// RecordRead keeps when the chat message that the link knows as
// externalID was read (read_at); a second READ changes nothing.
func (db *DB) RecordRead(ctx context.Context, link, externalID string, at time.Time) error {
	return db.Write(ctx, func(tx *Tx) error {
		_, err := tx.exec(ctx, `UPDATE messages SET read_at = ? WHERE read_at IS NULL AND id =
			(SELECT message_id FROM carrier_ids WHERE link = ? AND external_id = ?)`, sb.Micros(at), link, externalID)
		return err
	})
}

func (c *carrierTx) inbound(ctx context.Context, m *sb.Message) error {
	if m == nil {
		return nil
	}
	var p *sb.Phone
	var err error
	if m.To == "" {
		// A chat engine's user writes to the agent (the brand), not to a
		// number, and several tenants may share the engine: the text
		// belongs to the tenant whose phone of the link last wrote to the
		// user live. No tenant wrote to them: it is dropped. (From the
		// link's phones to each one's messages to the user, by the index
		// messages_tenant_to, not a scan of every message.)
		p, err = scanPhone(c.tx.queryRow(ctx, `SELECT `+phoneColsP+` FROM phones p JOIN messages m
			ON m.tenant_id = p.tenant_id AND m.environment = 'live' AND m.to_number = ? AND m.phone_id = p.id
			WHERE p.link = ? AND m.direction = 'outbound' ORDER BY m.id DESC LIMIT 1`, m.From, c.link))
		if err == nil {
			m.To = p.Number
		}
	} else {
		p, err = scanPhone(c.tx.queryRow(ctx, `SELECT `+phoneCols+` FROM phones WHERE link = ? AND number = ?`, c.link, m.To))
	}
	if sb.ErrorCode(err) == sb.CodeNotFound {
		// No tenant has the number (any more), or wrote to this chat user:
		// nothing to store, and the link says so.
		c.res.Dropped++
		return nil
	}
	if err != nil {
		return err
	}
	in := *m
	in.ID, in.TenantID, in.Env, in.PhoneID, in.PhoneKind = sb.NewID(), p.TenantID, sb.Live, p.ID, p.Kind
	in.Direction, in.Status, in.Channel = sb.Inbound, sb.StatusReceived, cmp.Or(in.Channel, sb.ChannelSMS)
	if in.CreatedAt.IsZero() {
		in.CreatedAt = time.Now().UTC()
	}
	err = c.tx.inbound(ctx, &in, c.hooks)
	if errors.Is(err, sb.ErrAlreadyStored) {
		return nil
	}
	if err == nil {
		m.ID, m.TenantID = in.ID, in.TenantID
	}
	return err
}
