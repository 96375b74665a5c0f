package sqlstore

import (
	"context"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// emit records event about m for every webhook of m's tenant and
// environment subscribed to it, in the caller's transaction: the event is
// durable exactly when the state change it reports is.
func (t *Tx) emit(ctx context.Context, m *sb.Message, event string) error {
	rows, err := t.query(ctx, `SELECT id, events FROM webhooks WHERE tenant_id = ? AND environment = ? AND deleted_at IS NULL`,
		m.TenantID, string(m.Env))
	if err != nil {
		return err
	}
	var hooks []string
	for rows.Next() {
		var id, events string
		if err := rows.Scan(&id, &events); err != nil {
			rows.Close()
			return err
		}
		if subscribed(events, event) {
			hooks = append(hooks, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(hooks) == 0 {
		return err
	}
	now := time.Now()
	payload := string(sb.NewEventPayload(event, m, now))
	for _, hook := range hooks {
		if _, err := t.exec(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, tenant_id, environment, event, message_id, payload, status, attempts, next_attempt_at, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)`,
			sb.NewID(), hook, m.TenantID, string(m.Env), event, m.ID, payload, sb.Micros(now), sb.Micros(now)); err != nil {
			return err
		}
	}
	t.afterCommit(t.db.wakeWebhooks)
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
