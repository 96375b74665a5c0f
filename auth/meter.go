package auth

import (
	"context"
	"log/slog"
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
)

// UsageStore is what metering needs from storage.
type UsageStore interface {
	AddUsage(ctx context.Context, tenantID, month string, calls int64) (int64, error)
	Usage(ctx context.Context, tenantID, month string) (int64, error)
}

// Meter counts live API calls per tenant and calendar month (UTC) and
// enforces the plan's monthly quota. Counting is in memory and written to
// storage in batches, so a call costs no database write; the stored total is
// read back on every flush, so several nodes converge on the shared count
// within one flush interval. A crash loses at most one interval of counts,
// in the tenant's favour.
type Meter struct {
	store UsageStore

	mu       sync.Mutex
	counters map[string]*counter // tenant id -> counter
}

type counter struct {
	mu      sync.Mutex
	month   string
	loaded  bool
	base    int64 // stored total at the last sync
	pending int64 // counted here, not yet stored
}

// NewMeter returns a Meter over store.
func NewMeter(store UsageStore) *Meter {
	return &Meter{store: store, counters: map[string]*counter{}}
}

// Month returns the usage period of t: its calendar month in UTC.
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// Take counts one call for the tenant unless that would pass limit (0 means
// unlimited); it returns QUOTA_EXCEEDED when the month's calls are used up.
func (m *Meter) Take(ctx context.Context, tenantID string, limit int, now time.Time) error {
	c := m.counter(tenantID)
	month := Month(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.month != month || !c.loaded {
		n, err := m.store.Usage(ctx, tenantID, month)
		if err != nil {
			return err
		}
		if c.month != month {
			c.pending = 0 // the flush of the old month's rest is best effort
		}
		c.month, c.base, c.loaded = month, n, true
	}
	if limit > 0 && c.base+c.pending >= int64(limit) {
		return sb.Errorf(sb.CodeQuotaExceeded, "The monthly API call quota of %d calls is used up.", limit)
	}
	c.pending++
	return nil
}

func (m *Meter) counter(tenantID string) *counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.counters[tenantID]
	if !ok {
		c = &counter{}
		m.counters[tenantID] = c
	}
	return c
}

// Flush writes pending counts and refreshes every total from storage.
func (m *Meter) Flush(ctx context.Context) error {
	m.mu.Lock()
	ids := make([]string, 0, len(m.counters))
	for id := range m.counters {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		c := m.counter(id)
		c.mu.Lock()
		month, pending, loaded := c.month, c.pending, c.loaded
		c.mu.Unlock()
		if !loaded {
			continue
		}
		var total int64
		var err error
		if pending > 0 {
			total, err = m.store.AddUsage(ctx, id, month, pending)
		} else {
			total, err = m.store.Usage(ctx, id, month)
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		if c.month == month {
			c.pending -= pending
			c.base = total
		}
		c.mu.Unlock()
	}
	return nil
}

// Run flushes every interval until ctx ends, then once more.
func (m *Meter) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := m.Flush(context.WithoutCancel(ctx)); err != nil {
				slog.Error("flushing usage", "err", err)
			}
			return
		case <-t.C:
			if err := m.Flush(ctx); err != nil && ctx.Err() == nil {
				slog.Error("flushing usage", "err", err)
			}
		}
	}
}
