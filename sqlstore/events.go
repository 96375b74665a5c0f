package sqlstore

import (
	"context"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// hookCache remembers, within one transaction, the webhooks of each tenant
// and environment, so that a batch of events reads them once.
type hookCache map[string][]hookSub

type hookSub struct {
	id     string
	events string
}

// emit records event about m for every webhook of m's tenant and
// environment subscribed to it, in the caller's transaction: the event is
// durable exactly when the state change it reports is.
func (t *Tx) emit(ctx context.Context, hooks hookCache, m *sb.Message, event string) error {
	if obs := t.db.observer.Load(); obs != nil {
		t.afterCommit(func() { (*obs)(m, event) })
	}
	key := m.TenantID + "/" + string(m.Env)
	subs, ok := hooks[key]
	if !ok {
		rows, err := t.query(ctx, `SELECT id, events FROM webhooks WHERE tenant_id = ? AND environment = ? AND deleted_at IS NULL`,
			m.TenantID, string(m.Env))
		if err != nil {
			return err
		}
		for rows.Next() {
			var s hookSub
			if err := rows.Scan(&s.id, &s.events); err != nil {
				rows.Close()
				return err
			}
			subs = append(subs, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		hooks[key] = subs
	}
	var payload string
	now := time.Now()
	for _, s := range subs {
		if !subscribed(s.events, event) {
			continue
		}
		if payload == "" {
			payload = string(sb.NewEventPayload(event, m, now))
		}
		if _, err := t.exec(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, tenant_id, environment, event, message_id, payload, status, attempts, next_attempt_at, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)`,
			sb.NewID(), s.id, m.TenantID, string(m.Env), event, m.ID, payload, sb.Micros(now), sb.Micros(now)); err != nil {
			return err
		}
		t.afterCommit(t.db.wakeWebhooks)
	}
	return nil
}

func subscribed(events, event string) bool {
	for _, e := range strings.Split(events, ",") {
		if e == event {
			return true
		}
	}
	return false
}

// emitPhone records the phone event ev for every live webhook of the
// tenant subscribed to it, in the caller's transaction. Its deliveries name
// the phone (phone_id) and no message.
func (t *Tx) emitPhone(ctx context.Context, tenantID string, ev sb.PhoneEvent, now time.Time) error {
	rows, err := t.query(ctx, `SELECT id, events FROM webhooks WHERE tenant_id = ? AND environment = ? AND deleted_at IS NULL`,
		tenantID, string(sb.Live))
	if err != nil {
		return err
	}
	var subs []hookSub
	for rows.Next() {
		var s hookSub
		if err := rows.Scan(&s.id, &s.events); err != nil {
			rows.Close()
			return err
		}
		if subscribed(s.events, ev.Event) {
			subs = append(subs, s)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(subs) == 0 {
		return err
	}
	payload := string(sb.NewPhoneEventPayload(ev, now))
	for _, s := range subs {
		if _, err := t.exec(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, tenant_id, environment, event, message_id, phone_id, payload, status, attempts, next_attempt_at, created_at)
			VALUES (?, ?, ?, ?, ?, '', ?, ?, 'pending', 0, ?, ?)`,
			sb.NewID(), s.id, tenantID, string(sb.Live), ev.Event, ev.PhoneID, payload, sb.Micros(now), sb.Micros(now)); err != nil {
			return err
		}
	}
	t.afterCommit(t.db.wakeWebhooks)
	return nil
}
