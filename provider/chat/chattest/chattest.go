// Package chattest helps the tests of the chat engines (provider/rbm,
// provider/imessage): a real store holding a tenant with a phone bound to
// an engine's link, and the engines' event counts.
package chattest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/sqlstore"
)

// Store opens a SQLite store for the test, closed when it ends, with a
// live tenant whose phone number (of kind, bound to link) sends chat.
func Store(t testing.TB, kind, link, number string) (*sqlstore.DB, *sb.Tenant, *sb.Phone) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().UTC().Truncate(time.Microsecond)
	tn := &sb.Tenant{ID: sb.NewID(), Name: "t", Plan: "scale", Status: sb.TenantActive, TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now}
	if err := db.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	ph := &sb.Phone{ID: sb.NewID(), TenantID: tn.ID, Number: number, Kind: kind, Link: link, Channels: []string{sb.ChannelChat},
		Status: sb.PhoneOnline, CreatedAt: now}
	if err := db.AddPhone(ctx, ph, nil); err != nil {
		t.Fatal(err)
	}
	return db, tn, ph
}

// Events returns switchboard_chat_events_total{engine, link, kind} as
// gathered from reg (0 when it has no such series).
func Events(t testing.TB, reg prometheus.Gatherer, engine, link, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchboard_chat_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["engine"] == engine && l["link"] == link && l["kind"] == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
