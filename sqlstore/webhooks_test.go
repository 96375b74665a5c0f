package sqlstore

import (
	"context"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// Webhook retries with a controlled clock: the store schedules each retry
// at the end of the failed attempt plus the exact delay of the webhook's
// policy, fails the delivery after the policy's last try, and recovers
// failed deliveries in bulk. Each runs on SQLite and PostgreSQL.

// testHook registers a webhook of tn with policy ("" for the default).
func testHook(t *testing.T, db *DB, tn *sb.Tenant, env sb.Environment, policy string) *sb.Webhook {
	t.Helper()
	hook := &sb.Webhook{ID: sb.NewID(), TenantID: tn.ID, Env: env, URL: "https://example.com/h", Events: []string{sb.EventDelivered},
		Secret: "0123456789abcdef", RetryPolicy: policy, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := db.CreateWebhook(context.Background(), hook); err != nil {
		t.Fatal(err)
	}
	return hook
}

// testDelivery stores a delivery to hook created at created, in status,
// and due at created when pending.
func testDelivery(t *testing.T, db *DB, hook *sb.Webhook, status string, created time.Time) string {
	t.Helper()
	id := sb.NewID()
	var next any
	if status == sb.DeliveryPending {
		next = sb.Micros(created)
	}
	if _, err := db.write.ExecContext(context.Background(), db.q(`INSERT INTO webhook_deliveries (id, webhook_id, tenant_id, environment, event, message_id, payload, status, attempts, tries, next_attempt_at, leased, created_at)
		VALUES (?, ?, ?, ?, ?, ?, '{}', ?, 0, 0, ?, 0, ?)`), id, hook.ID, hook.TenantID, string(hook.Env), sb.EventDelivered, sb.NewID(), status, next, sb.Micros(created)); err != nil {
		t.Fatal(err)
	}
	return id
}

func roomFor(string) int { return 100 }

// failUntilFinal claims the delivery when it falls due on a clock that
// jumps to each due time, fails each attempt (taking took), and returns
// the waits between the end of each failed attempt and the next due time,
// until the delivery is failed.
func failUntilFinal(t *testing.T, db *DB, tenantID string, hook *sb.Webhook, id string, start time.Time, took time.Duration) []time.Duration {
	t.Helper()
	ctx := context.Background()
	now := start
	var waits []time.Duration
	for range 20 {
		ds, err := db.ClaimDeliveries(ctx, now, time.Minute, 10, nil, roomFor)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].ID != id {
			t.Fatalf("claim at %v: %d deliveries, want the one due", now, len(ds))
		}
		at := now.Add(3 * time.Millisecond) // the attempt starts a little after the claim
		if err := db.RecordAttempts(ctx, []sb.AttemptResult{{DeliveryID: id, Attempt: sb.Attempt{At: at, StatusCode: 500, Error: "endpoint answered 500", Duration: took}}}); err != nil {
			t.Fatal(err)
		}
		d, err := db.Delivery(ctx, tenantID, hook.Env, hook.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status == sb.DeliveryFailed {
			if d.NextAttemptAt != nil {
				t.Errorf("a failed delivery is still due at %v", d.NextAttemptAt)
			}
			return waits
		}
		if d.Status != sb.DeliveryPending || d.NextAttemptAt == nil {
			t.Fatalf("after a failed attempt: %s, next %v", d.Status, d.NextAttemptAt)
		}
		// Nothing is due before the retry's time, and it is due then.
		before, err := db.ClaimDeliveries(ctx, d.NextAttemptAt.Add(-time.Microsecond), time.Minute, 10, nil, roomFor)
		if err != nil || len(before) != 0 {
			t.Fatalf("claimed %d a microsecond before the retry is due (%v)", len(before), err)
		}
		waits = append(waits, d.NextAttemptAt.Sub(at.Add(took)))
		now = *d.NextAttemptAt
	}
	t.Fatalf("the delivery never failed")
	return nil
}

func TestWebhookRetrySchedules(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		tn := writeTestTenant(t, db)
		start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		for _, c := range []struct {
			policy string
			want   []time.Duration
		}{
			{"", []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}},
			{sb.RetryStandard, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}},
			{sb.RetryExtended, []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 8 * time.Hour, 24 * time.Hour}},
		} {
			hook := testHook(t, db, tn, sb.Live, c.policy)
			if want := c.policy; hook.RetryPolicy != want && !(want == "" && hook.RetryPolicy == sb.RetryStandard) {
				t.Errorf("stored policy %q for %q", hook.RetryPolicy, c.policy)
			}
			id := testDelivery(t, db, hook, sb.DeliveryPending, start)
			waits := failUntilFinal(t, db, tn.ID, hook, id, start, 1500*time.Millisecond)
			if len(waits) != len(c.want) {
				t.Fatalf("policy %q: %d retries %v, want %v", c.policy, len(waits), waits, c.want)
			}
			for i := range waits {
				if waits[i] != c.want[i] {
					t.Errorf("policy %q, retry %d: due %v after the failed attempt ended, want exactly %v", c.policy, i+1, waits[i], c.want[i])
				}
			}
		}
	})
}

// A change of policy decides the delay after the next failure of a
// delivery already pending; a manual retry starts a full cycle of the
// policy in force.
func TestWebhookRetryPolicyChange(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn := writeTestTenant(t, db)
		hook := testHook(t, db, tn, sb.Live, sb.RetryStandard)
		start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		id := testDelivery(t, db, hook, sb.DeliveryPending, start)
		fail := func(at time.Time) *sb.Delivery {
			t.Helper()
			if _, err := db.ClaimDeliveries(ctx, at, time.Minute, 10, nil, roomFor); err != nil {
				t.Fatal(err)
			}
			if err := db.RecordAttempts(ctx, []sb.AttemptResult{{DeliveryID: id, Attempt: sb.Attempt{At: at, StatusCode: 503}}}); err != nil {
				t.Fatal(err)
			}
			d, err := db.Delivery(ctx, tn.ID, sb.Live, hook.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		d := fail(start)
		if want := start.Add(2 * time.Second); d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(want) {
			t.Fatalf("first retry due %v, want %v", d.NextAttemptAt, want)
		}
		ext := sb.RetryExtended
		if _, err := db.UpdateWebhook(ctx, tn.ID, sb.Live, hook.ID, sb.WebhookPatch{RetryPolicy: &ext}, start); err != nil {
			t.Fatal(err)
		}
		d = fail(*d.NextAttemptAt)
		if want := start.Add(2*time.Second + 5*time.Minute); d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(want) {
			t.Fatalf("after the change to extended, the second retry is due %v, want %v (5 min after the second failure)", d.NextAttemptAt, want)
		}
		// Back to standard after four tries: the next failure is final.
		std := sb.RetryStandard
		at := *d.NextAttemptAt
		d = fail(at)
		if d.Status != sb.DeliveryPending {
			t.Fatalf("after a third failure under extended: %s", d.Status)
		}
		if _, err := db.UpdateWebhook(ctx, tn.ID, sb.Live, hook.ID, sb.WebhookPatch{RetryPolicy: &std}, at); err != nil {
			t.Fatal(err)
		}
		if d = fail(*d.NextAttemptAt); d.Status != sb.DeliveryFailed {
			t.Fatalf("a fourth failure under standard: %s, want failed", d.Status)
		}
		// A manual retry: a fresh cycle of four tries under standard.
		if _, err := db.UpdateWebhook(ctx, tn.ID, sb.Live, hook.ID, sb.WebhookPatch{RetryPolicy: &ext}, at); err != nil {
			t.Fatal(err)
		}
		retryAt := start.Add(48 * time.Hour)
		if _, err := db.RetryDelivery(ctx, tn.ID, sb.Live, hook.ID, id, retryAt); err != nil {
			t.Fatal(err)
		}
		if d = fail(retryAt); d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(retryAt.Add(time.Minute)) {
			t.Errorf("the first failure of a manual retry's cycle under extended: next %v, want a minute later", d.NextAttemptAt)
		}
	})
}

// Recovery sends again the failed deliveries of one webhook created in
// [since, until), and nothing else: not pending or succeeded ones, not
// another webhook's, tenant's or environment's.
func TestRecoverDeliveries(t *testing.T) {
	eachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		tn, other := writeTestTenant(t, db), writeTestTenant(t, db)
		hook := testHook(t, db, tn, sb.Live, sb.RetryExtended)
		sibling := testHook(t, db, tn, sb.Live, "")
		testEnv := testHook(t, db, tn, sb.Test, "")
		theirs := testHook(t, db, other, sb.Live, "")
		t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		since, until := t0.Add(time.Hour), t0.Add(3*time.Hour)
		before := testDelivery(t, db, hook, sb.DeliveryFailed, since.Add(-time.Microsecond))
		atSince := testDelivery(t, db, hook, sb.DeliveryFailed, since)
		inside := testDelivery(t, db, hook, sb.DeliveryFailed, since.Add(time.Hour))
		atUntil := testDelivery(t, db, hook, sb.DeliveryFailed, until)
		pending := testDelivery(t, db, hook, sb.DeliveryPending, since.Add(time.Hour))
		succeeded := testDelivery(t, db, hook, sb.DeliverySucceeded, since.Add(time.Hour))
		for _, h := range []*sb.Webhook{sibling, testEnv, theirs} {
			testDelivery(t, db, h, sb.DeliveryFailed, since.Add(time.Hour))
		}
		now := t0.Add(5 * time.Hour)
		n, err := db.RecoverDeliveries(ctx, tn.ID, sb.Live, hook.ID, since, until, now)
		if err != nil || n != 2 {
			t.Fatalf("recovered %d (%v), want 2", n, err)
		}
		for id, want := range map[string]string{before: sb.DeliveryFailed, atSince: sb.DeliveryPending, inside: sb.DeliveryPending,
			atUntil: sb.DeliveryFailed, pending: sb.DeliveryPending, succeeded: sb.DeliverySucceeded} {
			d, err := db.Delivery(ctx, tn.ID, sb.Live, hook.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != want {
				t.Errorf("delivery created %v: %s, want %s", d.CreatedAt, d.Status, want)
			}
			if (id == atSince || id == inside) && (d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(now) || d.Tries != 0) {
				t.Errorf("a recovered delivery: due %v, tries %d; want due now with a fresh cycle", d.NextAttemptAt, d.Tries)
			}
		}
		for _, h := range []*sb.Webhook{sibling, testEnv, theirs} {
			ds, err := db.Deliveries(ctx, h.TenantID, h.Env, h.ID, sb.Page{Limit: 10})
			if err != nil || len(ds) != 1 || ds[0].Status != sb.DeliveryFailed {
				t.Errorf("another webhook's delivery was touched: %v %v", ds, err)
			}
		}
		// Recovered deliveries are claimed now, at once.
		ds, err := db.ClaimDeliveries(ctx, now, time.Minute, 10, nil, roomFor)
		if err != nil || len(ds) != 3 { // the two recovered and the pending one
			t.Errorf("claimed %d (%v) after the recovery, want 3", len(ds), err)
		}
		// Another tenant's, another environment's or a deleted webhook: not found.
		for _, c := range []struct {
			tenant string
			env    sb.Environment
			hook   string
		}{{other.ID, sb.Live, hook.ID}, {tn.ID, sb.Test, hook.ID}, {tn.ID, sb.Live, theirs.ID}} {
			if _, err := db.RecoverDeliveries(ctx, c.tenant, c.env, c.hook, t0, now, now); sb.ErrorCode(err) != sb.CodeNotFound {
				t.Errorf("recover %+v: %v, want not found", c, err)
			}
		}
		if err := db.DeleteWebhook(ctx, tn.ID, sb.Live, sibling.ID, now); err != nil {
			t.Fatal(err)
		}
		if _, err := db.RecoverDeliveries(ctx, tn.ID, sb.Live, sibling.ID, t0, now, now); sb.ErrorCode(err) != sb.CodeNotFound {
			t.Errorf("recover a deleted webhook: %v, want not found", err)
		}
	})
}
