package dashboard

import (
	"context"
	"net/http"
	"time"

	sb "github.com/switchboard/switchboard"
)

// OverviewStore is what the overview needs from storage.
type OverviewStore interface {
	Usage(ctx context.Context, tenantID, month string) (int64, error)
	MessageDays(ctx context.Context, tenantID string, env sb.Environment, since time.Time) ([]sb.DayCount, error)
	Webhooks(ctx context.Context, tenantID string, env sb.Environment) ([]*sb.Webhook, error)
	WebhookHealth(ctx context.Context, tenantID string, env sb.Environment, webhookIDs []string, since time.Time) ([]sb.WebhookHealth, error)
}

// Spans of the overview.
const (
	chartDays       = 14
	failingHookDays = 7
)

type overviewView struct {
	Plan      string
	Month     string
	Calls     int64
	Quota     int // 0: unlimited
	QuotaHigh int // where the meter turns to a warning: 90%
	QuotaLeft int64
	Chart     chart
	Failing   []failingHook
	TotalSent int
}

type failingHook struct {
	Webhook *sb.Webhook
	Health  sb.WebhookHealth
	// Last is the newest attempt of the newest failing delivery.
	Last *sb.Attempt
}

// overview shows the month's usage against the plan's quota, the last 14
// days of messages by status, and the webhooks that are failing.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	now := v.now.UTC()
	out := overviewView{Plan: v.tenant.Plan, Month: now.Format("January 2006"), Quota: v.plan.MonthlyCalls}
	calls, err := h.cfg.Store.Usage(ctx, v.tenant.ID, now.Format("2006-01"))
	if err != nil {
		return err
	}
	out.Calls = calls
	if out.Quota > 0 {
		out.QuotaLeft = max(0, int64(out.Quota)-calls)
		out.QuotaHigh = out.Quota * 9 / 10
	}

	today := now.Truncate(24 * time.Hour)
	since := today.AddDate(0, 0, -(chartDays - 1))
	days, err := h.cfg.Store.MessageDays(ctx, v.tenant.ID, v.env, since)
	if err != nil {
		return err
	}
	out.Chart = newChart(since, chartDays, days)

	hooks, err := h.cfg.Store.Webhooks(ctx, v.tenant.ID, v.env)
	if err != nil {
		return err
	}
	byID := map[string]*sb.Webhook{}
	ids := make([]string, len(hooks))
	for i, wh := range hooks {
		ids[i], byID[wh.ID] = wh.ID, wh
	}
	health, err := h.cfg.Store.WebhookHealth(ctx, v.tenant.ID, v.env, ids, now.Add(-failingHookDays*24*time.Hour))
	if err != nil {
		return err
	}
	for _, hh := range health {
		f := failingHook{Webhook: byID[hh.WebhookID], Health: hh}
		if n := len(hh.Latest.Log); n > 0 {
			f.Last = &hh.Latest.Log[n-1]
		}
		out.Failing = append(out.Failing, f)
	}
	return h.render(w, r, v, http.StatusOK, "overview", "Overview", out)
}
