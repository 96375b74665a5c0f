package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/httpapi"
	"github.com/switchboard/switchboard/ops"
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
	t, err := ops.CreateTenant(ctx, db, name, plan)
	if err != nil {
		return err
	}
	// A map prints its keys in sorted order, as the README shows them.
	out := map[string]any{"tenant_id": t.TenantID, "live_key": t.LiveKey, "test_key": t.TestKey}
	if t.Phone != nil {
		out["phone"] = map[string]string{"id": t.Phone.ID, "number": t.Phone.Number}
	}
	return printJSON(stdout, out)
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
		var chans []string
		if *channels != "" {
			for _, c := range strings.Split(*channels, ",") {
				chans = append(chans, strings.TrimSpace(c))
			}
		}
		p, err = ops.NewPhoneFromSpec(ops.PhoneSpec{Tenant: *tenant, Number: *number, DailyLimit: *limit, Channels: chans,
			Link: *link, ProvidersFile: *providers})
		if err != nil {
			return fmt.Errorf("phone add: %w", err)
		}
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
		if err := ops.AddPhone(ctx, db, p); err != nil {
			if errors.Is(err, ops.ErrDuplicateNumber) {
				return fmt.Errorf("phone add: %w", err)
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
