package sqlstore

import (
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// A sign-in link opens one session, once, before it expires; a session is
// found by its hash until it expires or ends, and suspending the tenant
// ends all of its sessions.
func TestStoreDashboardSignIn(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "starter")
		now := time.Now().UTC().Truncate(time.Microsecond)

		link := &sb.DashboardLink{TokenHash: sb.HashSecret("token-1"), TenantID: tn.ID, CreatedAt: now, ExpiresAt: now.Add(sb.DashboardLinkTTL)}
		if err := db.CreateDashboardLink(bg, link); err != nil {
			t.Fatal(err)
		}
		_, err := db.UseDashboardLink(bg, sb.HashSecret("token-2"), now)
		wantCode(t, "an unknown link", err, sb.CodeNotFound)
		_, err = db.UseDashboardLink(bg, link.TokenHash, now.Add(sb.DashboardLinkTTL))
		wantCode(t, "a link at its expiry", err, sb.CodeNotFound)
		got, err := db.UseDashboardLink(bg, link.TokenHash, now.Add(time.Minute))
		if err != nil || got != tn.ID {
			t.Fatalf("first use: %q %v", got, err)
		}
		_, err = db.UseDashboardLink(bg, link.TokenHash, now.Add(2*time.Minute))
		wantCode(t, "a used link", err, sb.CodeNotFound)

		s := &sb.DashboardSession{IDHash: sb.HashSecret("session-1"), TenantID: tn.ID, Method: sb.SignInKey, KeyID: "k1", TestOnly: true,
			CreatedAt: now, ExpiresAt: now.Add(sb.DashboardSessionTTL)}
		if err := db.CreateDashboardSession(bg, s); err != nil {
			t.Fatal(err)
		}
		read, err := db.DashboardSession(bg, s.IDHash, now.Add(time.Hour))
		if err != nil || *read != *s {
			t.Fatalf("read %+v %v, stored %+v", read, err, s)
		}
		_, err = db.DashboardSession(bg, s.IDHash, s.ExpiresAt)
		wantCode(t, "an expired session", err, sb.CodeNotFound)

		if err := db.DeleteDashboardSession(bg, s.IDHash); err != nil {
			t.Fatal(err)
		}
		_, err = db.DashboardSession(bg, s.IDHash, now)
		wantCode(t, "a session signed out", err, sb.CodeNotFound)

		other := newTestTenant(t, db, "starter")
		for _, sess := range []*sb.DashboardSession{
			{IDHash: sb.HashSecret("a"), TenantID: tn.ID, Method: sb.SignInLink, CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
			{IDHash: sb.HashSecret("b"), TenantID: other.ID, Method: sb.SignInLink, CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		} {
			if err := db.CreateDashboardSession(bg, sess); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.SetTenantStatus(bg, tn.ID, sb.TenantSuspended); err != nil {
			t.Fatal(err)
		}
		if got, err := db.DashboardSession(bg, sb.HashSecret("a"), now); err != nil || got.Ended != sb.SessionEndedSuspended {
			t.Errorf("a session of a suspended tenant: %+v %v", got, err)
		}
		if err := db.SetTenantStatus(bg, tn.ID, sb.TenantActive); err != nil {
			t.Fatal(err)
		}
		if got, err := db.DashboardSession(bg, sb.HashSecret("a"), now); err != nil || got.Ended != sb.SessionEndedSuspended {
			t.Errorf("resuming the tenant brought its session back: %+v %v", got, err)
		}
		if got, err := db.DashboardSession(bg, sb.HashSecret("b"), now); err != nil || got.Ended != "" {
			t.Errorf("another tenant's session ended with the suspension: %+v %v", got, err)
		}
	})
}

// The dashboard's filters and sums: messages by number and date, by day
// and status; contacts by a search that treats LIKE's wildcards as text.
func TestStoreDashboardQueries(t *testing.T) {
	forEachDialect(t, func(t *testing.T, url string) {
		db := openTestDB(t, url)
		tn := newTestTenant(t, db, "starter")
		other := newTestTenant(t, db, "starter")
		now := time.Now().UTC().Truncate(time.Microsecond)
		today := now.Truncate(24 * time.Hour)
		inbound := func(tenant, from string, at time.Time) *sb.Message {
			m := &sb.Message{ID: sb.NewID(), TenantID: tenant, Env: sb.Live, Direction: sb.Inbound, From: from, To: "+15550000001",
				Body: "hi", Channel: sb.ChannelSMS, Status: sb.StatusReceived, CreatedAt: at}
			if err := db.Inbound(bg, m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		old := inbound(tn.ID, "+15550000002", today.Add(-48*time.Hour))
		recent := inbound(tn.ID, "+15550000003", now)
		inbound(other.ID, "+15550000003", now)

		ms, err := db.Messages(bg, tn.ID, sb.Live, sb.MessageFilter{Number: "+15550000003"}, sb.Page{Limit: 10})
		if err != nil || len(ms) != 1 || ms[0].ID != recent.ID {
			t.Errorf("by number: %v %v", ms, err)
		}
		ms, err = db.Messages(bg, tn.ID, sb.Live, sb.MessageFilter{Number: "+15550000001"}, sb.Page{Limit: 10})
		if err != nil || len(ms) != 2 {
			t.Errorf("by the number they were sent to: %d messages, %v", len(ms), err)
		}
		ms, err = db.Messages(bg, tn.ID, sb.Live, sb.MessageFilter{Until: today.Add(-24 * time.Hour)}, sb.Page{Limit: 10})
		if err != nil || len(ms) != 1 || ms[0].ID != old.ID {
			t.Errorf("until yesterday: %v %v", ms, err)
		}
		ms, err = db.Messages(bg, tn.ID, sb.Live, sb.MessageFilter{Since: today.Add(-24 * time.Hour)}, sb.Page{Limit: 10})
		if err != nil || len(ms) != 1 || ms[0].ID != recent.ID {
			t.Errorf("since yesterday: %v %v", ms, err)
		}

		days, err := db.MessageDays(bg, tn.ID, sb.Live, today.Add(-72*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want := map[time.Time]int{today.Add(-48 * time.Hour): 1, today: 1}
		if len(days) != len(want) {
			t.Errorf("days: %+v, want %v", days, want)
		}
		for _, d := range days {
			if want[d.Day] != d.N || d.Status != sb.StatusReceived {
				t.Errorf("day %+v, want %v", d, want)
			}
		}

		for i, c := range []struct{ phone, name string }{{"+15550000010", "Ada Lovelace"}, {"+15550000011", "100% Bob_x"}, {"+15550000012", ""}} {
			ct := &sb.Contact{ID: sb.NewID(), TenantID: tn.ID, Env: sb.Live, Phone: c.phone, Name: c.name, CreatedAt: now.Add(time.Duration(i)), UpdatedAt: now}
			if err := db.CreateContact(bg, ct, 0); err != nil {
				t.Fatal(err)
			}
		}
		search := func(q string) []string {
			cs, err := db.Contacts(bg, tn.ID, sb.Live, sb.ContactFilter{Search: q}, sb.Page{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, c := range cs {
				out = append(out, c.Phone)
			}
			return out
		}
		for q, want := range map[string]int{"ADA": 1, "lovelace": 1, "0000011": 1, "%": 1, "_": 1, "5555": 0, "+1555000001": 3} {
			if got := search(q); len(got) != want {
				t.Errorf("search %q: %v, want %d", q, got, want)
			}
		}
	})
}
