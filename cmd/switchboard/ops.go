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
	sub, err := subcommand("tenant", args, stdout, "create", "list", "plan", "trial", "suspend", "resume")
	if err != nil {
		return err
	}
	if sub == "list" {
		return tenantList(ctx, args[1:], getenv, stdout)
	}
	f := newFlags("tenant "+sub, getenv, stdout)
	dbURL := f.database()
	plans := f.string("plans", "", "JSON file overriding per-plan limits")
	var name, plan, ends *string
	switch sub {
	case "create":
		name = f.String("name", "", "tenant name (required)")
		plan = f.String("plan", sb.TrialPlan, "plan: trial, starter, growth or scale")
		f.synopsis = "--name NAME"
		f.about = "Creates an active tenant with a live and a test API key (printed once) and a simulated sending phone."
	case "trial":
		ends = f.String("ends", "", "new end of the trial, RFC 3339 (required)")
		f.synopsis = "TENANT_ID --ends RFC3339"
	case "plan":
		f.synopsis = "TENANT_ID PLAN"
	default:
		f.synopsis = "TENANT_ID"
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
	switch sub {
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
			return fmt.Errorf("tenant %s: %w", sub, err)
		}
	}

	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
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
		return fmt.Errorf("tenant %s: no tenant %q", sub, pos[0])
	}
	if err != nil {
		return err
	}
	t, err := db.Tenant(ctx, pos[0])
	if err != nil {
		return err
	}
	return printJSON(stdout, toTenantJSON(t))
}

// tenantJSON is a tenant as the tenant commands print it.
type tenantJSON struct {
	ID          string    `json:"tenant_id"`
	Name        string    `json:"name"`
	Plan        string    `json:"plan"`
	Status      string    `json:"status"`
	TrialEndsAt time.Time `json:"trial_ends_at"`
	CreatedAt   time.Time `json:"created_at"`
	// Access is what the tenant's requests get now: "ok", or the error
	// code they are refused with (TENANT_SUSPENDED, TRIAL_EXPIRED).
	Access string `json:"access"`
}

func toTenantJSON(t *sb.Tenant) tenantJSON {
	access := "ok"
	if err := t.Access(time.Now()); err != nil {
		access = string(sb.ErrorCode(err))
	}
	return tenantJSON{ID: t.ID, Name: t.Name, Plan: t.Plan, Status: t.Status, TrialEndsAt: t.TrialEndsAt, CreatedAt: t.CreatedAt, Access: access}
}

// tenantList is `switchboard tenant list`: every tenant, oldest first, as
// one JSON array (one object a line), with its plan and status.
func tenantList(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	f := newFlags("tenant list", getenv, stdout)
	dbURL := f.database()
	status := f.String("status", "", "only tenants with this status: active or suspended")
	f.about = "Prints every tenant, oldest first, as a JSON array: its id, name, plan, status, the end of its trial and when it was created."
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("tenant list: unexpected argument %q", pos[0])
	}
	if *status != "" && *status != sb.TenantActive && *status != sb.TenantSuspended {
		return fmt.Errorf("tenant list: --status must be active or suspended, not %q", *status)
	}
	if err := checkDatabase(*dbURL); err != nil {
		return err
	}
	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	ts, err := db.Tenants(ctx)
	if err != nil {
		return err
	}
	out := []tenantJSON{}
	for _, t := range ts {
		if *status == "" || t.Status == *status {
			out = append(out, toTenantJSON(t))
		}
	}
	return printLines(stdout, out)
}

// printLines prints list as a JSON array with one element a line, which
// reads well in a terminal and still parses as one JSON value.
func printLines[T any](w io.Writer, list []T) error {
	var b strings.Builder
	b.WriteString("[")
	for i, v := range list {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(raw)
	}
	if len(list) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, err := io.WriteString(w, b.String())
	return err
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
	sub, err := subcommand("key", args, stdout, "create", "activate", "deactivate")
	if err != nil {
		return err
	}
	if sub == "create" {
		return keyCreate(ctx, args[1:], getenv, stdout)
	}
	f := newFlags("key "+sub, getenv, stdout)
	dbURL := f.database()
	f.synopsis = "KEY_ID"
	pos, err := f.parse(args[1:])
	if err != nil {
		return err
	}
	if err := checkDatabase(*dbURL); err != nil {
		return err
	}
	if err := wantArgs(pos, 1, "KEY_ID"); err != nil {
		return fmt.Errorf("key %s: %w", sub, err)
	}
	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	status := sb.KeyActive
	if sub == "deactivate" {
		status = sb.KeyInactive
	}
	k, err := db.SetKeyStatus(ctx, pos[0], status)
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return fmt.Errorf("key %s: no unrevoked key %q", sub, pos[0])
	}
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]string{"id": k.ID, "status": k.Status})
}

// keyCreate is `switchboard key create`: a new API key for a tenant, its
// text printed once (only its hash is stored), as POST /v1/keys makes one.
func keyCreate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	f := newFlags("key create", getenv, stdout)
	dbURL := f.database()
	plans := f.string("plans", "", "JSON file overriding per-plan limits (for the ceiling of --rate-limit)")
	tenant := f.String("tenant", "", "tenant id (required)")
	env := f.String("env", string(sb.Live), "environment of the key: live or test")
	name := f.String("name", "", "name of the key (default: \"Operator ENV key\")")
	rateLimit := f.Int("rate-limit", 0, "the key's own requests per minute, at most the plan's ceiling (default: the plan's)")
	f.synopsis = "--tenant TENANT_ID"
	f.about = "Creates an active API key and prints it as JSON; the key's text (\"key\") is shown this once."
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if *tenant == "" {
		return fmt.Errorf("key create: --tenant is required")
	}
	if len(pos) != 0 {
		return fmt.Errorf("key create: unexpected argument %q", pos[0])
	}
	e := sb.Environment(*env)
	if !e.Valid() {
		return fmt.Errorf("key create: --env must be live or test, not %q", *env)
	}
	if *name == "" {
		*name = "Operator " + string(e) + " key"
	}
	if err := sb.CheckKeyName(*name); err != nil {
		return fmt.Errorf("key create: --name: %s", err.(*sb.Error).Message)
	}
	if err := checkDatabase(*dbURL); err != nil {
		return err
	}
	table, err := sb.LoadPlans(*plans)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	t, err := db.Tenant(ctx, *tenant)
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return fmt.Errorf("key create: no tenant %q", *tenant)
	}
	if err != nil {
		return err
	}
	if *rateLimit != 0 {
		if err := sb.CheckKeyRateLimit(*rateLimit, table[t.Plan]); err != nil {
			return fmt.Errorf("key create: --rate-limit: %s", err.(*sb.Error).Message)
		}
	}
	text, err := sb.NewKeyText(e)
	if err != nil {
		return err
	}
	k := &sb.APIKey{ID: sb.NewID(), TenantID: t.ID, Name: *name, Hash: sb.HashKey(text), Hint: sb.KeyHint(text),
		Environment: e, Status: sb.KeyActive, RateLimit: *rateLimit, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := db.CreateKey(ctx, k); err != nil {
		if e, ok := err.(*sb.Error); ok {
			return fmt.Errorf("key create: %s", e.Message)
		}
		return err
	}
	out := map[string]any{"id": k.ID, "tenant_id": k.TenantID, "name": k.Name, "environment": k.Environment, "status": k.Status, "key": text}
	if k.RateLimit != 0 {
		out["rate_limit"] = k.RateLimit
	}
	return printJSON(stdout, out)
}

// noLinks is the carrier links' state as the operator commands know it:
// they hold no link, so none is up here and they print a carrier phone
// offline, whatever serve's link does (GET /v1/phones shows that).
type noLinks struct{}

func (noLinks) LinkUp(string) bool { return false }

func phoneCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, err := subcommand("phone", args, stdout, "add", "list", "offline", "online", "delete")
	if err != nil {
		return err
	}
	f := newFlags("phone "+sub, getenv, stdout)
	dbURL := f.database()
	offlineAfter := f.duration("phone-offline-after", sb.DefaultPhoneOfflineAfter, "how long an android phone stays online after its device was last seen, as serve has it (for the status shown)")
	var tenant, number, channels, link, providers *string
	var limit *int
	switch sub {
	case "add":
		f.synopsis = "--tenant TENANT_ID --number E164"
		tenant = f.String("tenant", "", "tenant id (required)")
		number = f.String("number", "", "E.164 number (required)")
		limit = f.Int("daily-limit", sb.DefaultPhoneDailyLimit, "messages per UTC day; 0 for no limit")
		channels = f.String("channels", "", "channels the phone sends on (default sms,chat; a carrier phone sends sms only)")
		link = f.String("provider", "", "the carrier link or chat engine (a name of the providers file) the number is bound to: the phone's kind is the link's type")
		providers = f.string("providers", "", "the providers file serve runs with, to find the link's type (only names and types are read)")
	case "list":
		f.synopsis = "--tenant TENANT_ID"
		tenant = f.String("tenant", "", "tenant id (required)")
	case "delete":
		f.synopsis = "PHONE_ID"
		f.about = "Deletes a phone of any tenant: its device's token and inbound secret stop working, and its queued messages go to the tenant's other phones (a carrier phone's fail)."
	default:
		f.synopsis = "PHONE_ID"
	}
	pos, err := f.parse(args[1:])
	if err != nil {
		return err
	}
	if err := checkDatabase(*dbURL); err != nil {
		return err
	}
	var p *sb.Phone
	switch sub {
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
			return fmt.Errorf("phone %s: %w", sub, err)
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
			return fmt.Errorf("phone %s: no tenant %q", sub, *tenant)
		}
		if err != nil {
			return err
		}
	}
	routing, now := sb.Routing{OfflineAfter: *offlineAfter, Links: noLinks{}}, time.Now()
	switch sub {
	case "add":
		if err := ops.AddPhone(ctx, db, p); err != nil {
			if errors.Is(err, ops.ErrDuplicateNumber) {
				return fmt.Errorf("phone add: %w", err)
			}
			return err
		}
		if p.Link != "" {
			fmt.Fprintf(stderr, "phone add: the phone takes messages while serve's link %q is up: GET /v1/phones shows its status\n", p.Link)
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
	case "delete":
		tenantID, err := db.PhoneTenant(ctx, pos[0])
		if err == nil {
			err = db.DeletePhone(ctx, tenantID, pos[0], now.UTC())
		}
		if sb.ErrorCode(err) == sb.CodeNotFound {
			return fmt.Errorf("phone delete: no phone %q", pos[0])
		}
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"id": pos[0], "tenant_id": tenantID, "deleted": true})
	default:
		status := sb.PhoneOnline
		if sub == "offline" {
			status = sb.PhoneOffline
		}
		p, err := db.SetPhoneStatus(ctx, pos[0], status)
		if sb.ErrorCode(err) == sb.CodeNotFound {
			return fmt.Errorf("phone %s: no phone %q", sub, pos[0])
		}
		if err != nil {
			return err
		}
		return printJSON(stdout, httpapi.ToPhoneJSON(p, routing, now))
	}
}
