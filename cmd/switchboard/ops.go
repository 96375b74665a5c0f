package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/httpapi"
	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/sqlstore"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

func openDB(ctx context.Context, url string) (*sqlstore.DB, error) {
	return sqlstore.Open(ctx, url)
}

func tenantCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("tenant: expected create, plan, trial, suspend or resume")
	}
	f := newFlags("tenant "+args[0], getenv, stderr)
	dbURL := f.database()
	plans := f.string("plans", "", "JSON file overriding per-plan limits")
	var name, plan, ends *string
	switch args[0] {
	case "create":
		name = f.String("name", "", "tenant name (required)")
		plan = f.String("plan", sb.TrialPlan, "plan: trial, starter, growth or scale")
	case "trial":
		ends = f.String("ends", "", "new end of the trial, RFC 3339 (required)")
	case "plan", "suspend", "resume":
	default:
		return fmt.Errorf("tenant: unknown subcommand %q", args[0])
	}
	pos, err := f.parse(args[1:])
	if err != nil {
		return err
	}
	if err := checkDatabase(*dbURL); err != nil {
		return err
	}
	table, err := sb.LoadPlans(*plans)
	if err != nil {
		return err
	}
	// Validate everything before touching the database.
	var endsAt time.Time
	switch args[0] {
	case "create":
		if strings.TrimSpace(*name) == "" {
			return fmt.Errorf("tenant create: --name is required")
		}
		if _, ok := table[*plan]; !ok {
			return fmt.Errorf("tenant create: unknown plan %q (known: %s)", *plan, strings.Join(table.Names(), ", "))
		}
		if len(pos) != 0 {
			return fmt.Errorf("tenant create: unexpected argument %q", pos[0])
		}
	case "plan":
		if err := wantArgs(pos, 2, "TENANT_ID PLAN"); err != nil {
			return fmt.Errorf("tenant plan: %w", err)
		}
		if _, ok := table[pos[1]]; !ok {
			return fmt.Errorf("tenant plan: unknown plan %q (known: %s)", pos[1], strings.Join(table.Names(), ", "))
		}
	case "trial":
		if err := wantArgs(pos, 1, "TENANT_ID"); err != nil {
			return fmt.Errorf("tenant trial: %w", err)
		}
		endsAt, err = time.Parse(time.RFC3339, *ends)
		if err != nil {
			return fmt.Errorf("tenant trial: --ends must be an RFC 3339 time, e.g. 2026-12-01T00:00:00Z")
		}
	default:
		if err := wantArgs(pos, 1, "TENANT_ID"); err != nil {
			return fmt.Errorf("tenant %s: %w", args[0], err)
		}
	}

	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	switch args[0] {
	case "create":
		return createTenant(ctx, db, *name, *plan, stdout)
	case "plan":
		err = db.SetTenantPlan(ctx, pos[0], pos[1])
	case "trial":
		err = db.SetTrialEnd(ctx, pos[0], endsAt)
	case "suspend":
		err = db.SetTenantStatus(ctx, pos[0], sb.TenantSuspended)
	case "resume":
		err = db.SetTenantStatus(ctx, pos[0], sb.TenantActive)
	}
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return fmt.Errorf("tenant %s: no tenant %q", args[0], pos[0])
	}
	if err != nil {
		return err
	}
	t, err := db.Tenant(ctx, pos[0])
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"tenant_id": t.ID, "name": t.Name, "plan": t.Plan, "status": t.Status, "trial_ends_at": t.TrialEndsAt})
}

func createTenant(ctx context.Context, db *sqlstore.DB, name, plan string, stdout io.Writer) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	t := &sb.Tenant{ID: sb.NewID(), Name: name, Plan: plan, Status: sb.TenantActive, TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now}
	if err := db.CreateTenant(ctx, t); err != nil {
		return err
	}
	out := map[string]any{"tenant_id": t.ID}
	for _, env := range []sb.Environment{sb.Live, sb.Test} {
		text, err := sb.NewKeyText(env)
		if err != nil {
			return err
		}
		k := &sb.APIKey{ID: sb.NewID(), TenantID: t.ID, Name: "Default " + string(env) + " key", Hash: sb.HashKey(text),
			Hint: sb.KeyHint(text), Environment: env, Status: sb.KeyActive, CreatedAt: now}
		if err := db.CreateKey(ctx, k); err != nil {
			return err
		}
		out[string(env)+"_key"] = text
	}
	// The simulator is the live provider: give the tenant one simulated
	// sending phone with no daily limit.
	for attempt := 0; ; attempt++ {
		p := &sb.Phone{ID: sb.NewID(), TenantID: t.ID, Number: simulatedNumber(), Kind: sb.PhoneSimulated, Channels: []string{sb.ChannelSMS, sb.ChannelChat},
			Status: sb.PhoneOnline, CreatedAt: now}
		err := db.AddPhone(ctx, p, nil)
		if err == nil {
			out["phone"] = map[string]string{"id": p.ID, "number": p.Number}
			break
		}
		if sb.ErrorCode(err) != sb.CodeDuplicatePhone || attempt == 10 {
			return err
		}
	}
	return printJSON(stdout, out)
}

// simulatedNumber returns a random number in the +1 555 range that no real
// phone uses.
func simulatedNumber() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(10_000_000))
	return fmt.Sprintf("+1555%07d", n.Int64())
}

func keyCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "activate" && args[0] != "deactivate") {
		return fmt.Errorf("key: expected activate or deactivate")
	}
	f := newFlags("key "+args[0], getenv, stderr)
	dbURL := f.database()
	pos, err := f.parse(args[1:])
	if err != nil {
		return err
	}
	if err := checkDatabase(*dbURL); err != nil {
		return err
	}
	if err := wantArgs(pos, 1, "KEY_ID"); err != nil {
		return fmt.Errorf("key %s: %w", args[0], err)
	}
	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	status := sb.KeyActive
	if args[0] == "deactivate" {
		status = sb.KeyInactive
	}
	k, err := db.SetKeyStatus(ctx, pos[0], status)
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return fmt.Errorf("key %s: no unrevoked key %q", args[0], pos[0])
	}
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]string{"id": k.ID, "status": k.Status})
}

func phoneCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("phone: expected add, offline, online or list")
	}
	f := newFlags("phone "+args[0], getenv, stderr)
	dbURL := f.database()
	offlineAfter := f.duration("phone-offline-after", sb.DefaultPhoneOfflineAfter, "how long an android phone stays online after its device was last seen, as serve has it (for the status shown)")
	var tenant, number, channels, link, providers *string
	var limit *int
	switch args[0] {
	case "add":
		tenant = f.String("tenant", "", "tenant id (required)")
		number = f.String("number", "", "E.164 number (required)")
		limit = f.Int("daily-limit", sb.DefaultPhoneDailyLimit, "messages per UTC day; 0 for no limit")
		channels = f.String("channels", "", "channels the phone sends on (default sms,chat; a carrier phone sends sms only)")
		link = f.String("provider", "", "the carrier link (a name of the providers file) the number lives at: the phone's kind is the link's type")
		providers = f.string("providers", "", "the providers file serve runs with, to find the link's type (only names and types are read)")
	case "list":
		tenant = f.String("tenant", "", "tenant id (required)")
	case "offline", "online":
	default:
		return fmt.Errorf("phone: unknown subcommand %q", args[0])
	}
	pos, err := f.parse(args[1:])
	if err != nil {
		return err
	}
	if err := checkDatabase(*dbURL); err != nil {
		return err
	}
	var p *sb.Phone
	switch args[0] {
	case "add":
		if *tenant == "" {
			return fmt.Errorf("phone add: --tenant is required")
		}
		if !phonenum.Valid(*number) {
			return fmt.Errorf("phone add: --number must be E.164: + and 10 to 15 digits")
		}
		if *limit < 0 {
			return fmt.Errorf("phone add: --daily-limit must be >= 0")
		}
		kind := sb.PhoneSimulated
		if *link != "" {
			if *providers == "" {
				return fmt.Errorf("phone add: --provider needs the providers file (--providers, or SWITCHBOARD_PROVIDERS) to know the link's type")
			}
			links, err := carrier.LoadFile(*providers, nil)
			if err != nil {
				return fmt.Errorf("phone add: %w", err)
			}
			lc, ok := carrier.Find(links, *link)
			if !ok {
				names := make([]string, len(links))
				for i, l := range links {
					names[i] = l.Name
				}
				return fmt.Errorf("phone add: --provider %q is not a link of %s (links: %s)", *link, *providers, strings.Join(names, ", "))
			}
			kind = lc.Type
			if *channels == "" {
				*channels = sb.ChannelSMS
			}
		}
		if *channels == "" {
			*channels = "sms,chat"
		}
		var chans []string
		for _, c := range strings.Split(*channels, ",") {
			c = strings.TrimSpace(c)
			if c != sb.ChannelSMS && c != sb.ChannelChat {
				return fmt.Errorf("phone add: unknown channel %q (sms, chat)", c)
			}
			if c == sb.ChannelChat && *link != "" {
				return fmt.Errorf("phone add: a carrier phone sends sms only (--channels sms)")
			}
			chans = append(chans, c)
		}
		p = &sb.Phone{ID: sb.NewID(), TenantID: *tenant, Number: *number, Kind: kind, Link: *link, DailyLimit: *limit, Channels: chans,
			Status: sb.PhoneOnline, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	case "list":
		if *tenant == "" {
			return fmt.Errorf("phone list: --tenant is required")
		}
	default:
		if err := wantArgs(pos, 1, "PHONE_ID"); err != nil {
			return fmt.Errorf("phone %s: %w", args[0], err)
		}
	}
	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if tenant != nil { // add and list: the tenant must exist
		_, err := db.Tenant(ctx, *tenant)
		if sb.ErrorCode(err) == sb.CodeNotFound {
			return fmt.Errorf("phone %s: no tenant %q", args[0], *tenant)
		}
		if err != nil {
			return err
		}
	}
	routing, now := sb.Routing{OfflineAfter: *offlineAfter}, time.Now()
	switch args[0] {
	case "add":
		if err := db.AddPhone(ctx, p, nil); err != nil {
			if sb.ErrorCode(err) == sb.CodeDuplicatePhone {
				return fmt.Errorf("phone add: the number %s is already a sending phone", p.Number)
			}
			return err
		}
		return printJSON(stdout, httpapi.ToPhoneJSON(p, routing, now))
	case "list":
		phones, err := db.Phones(ctx, *tenant, sb.Live)
		if err != nil {
			return err
		}
		out := make([]httpapi.PhoneJSON, len(phones))
		for i, p := range phones {
			out[i] = httpapi.ToPhoneJSON(p, routing, now)
		}
		return printJSON(stdout, out)
	default:
		status := sb.PhoneOnline
		if args[0] == "offline" {
			status = sb.PhoneOffline
		}
		p, err := db.SetPhoneStatus(ctx, pos[0], status)
		if sb.ErrorCode(err) == sb.CodeNotFound {
			return fmt.Errorf("phone %s: no phone %q", args[0], pos[0])
		}
		if err != nil {
			return err
		}
		return printJSON(stdout, httpapi.ToPhoneJSON(p, routing, now))
	}
}
