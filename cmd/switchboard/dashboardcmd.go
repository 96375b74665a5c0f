package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// dashboardCmd is `switchboard dashboard link --tenant ID`: it prints, as
// its only line on stdout, a one-time sign-in link to the tenant's
// dashboard, valid for sb.DashboardLinkTTL. Only the hash of its token is
// stored.
func dashboardCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if _, err := subcommand("dashboard", args, stdout, "link"); err != nil {
		return err
	}
	f := newFlags("dashboard link", getenv, stdout)
	f.synopsis = "--tenant TENANT_ID"
	dbURL := f.database()
	tenant := f.String("tenant", "", "tenant id (required)")
	public := f.string("public-url", "http://127.0.0.1:8080", "the base URL the service is reached at, as serve's --public-url")
	pos, err := f.parse(args[1:])
	if err != nil {
		return err
	}
	if *tenant == "" {
		return fmt.Errorf("dashboard link: --tenant is required")
	}
	if len(pos) != 0 {
		return fmt.Errorf("dashboard link: unexpected argument %q", pos[0])
	}
	base, err := url.Parse(*public)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("dashboard link: --public-url %q: want an absolute http(s) URL such as https://sms.example.com", *public)
	}
	db, err := openDB(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	t, err := db.Tenant(ctx, *tenant)
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return fmt.Errorf("dashboard link: no tenant %q", *tenant)
	}
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	if err := t.Access(now); err != nil {
		return fmt.Errorf("dashboard link: tenant %s cannot sign in: %s", t.ID, err.(*sb.Error).Message)
	}
	token, err := sb.NewDashboardSecret()
	if err != nil {
		return err
	}
	link := &sb.DashboardLink{TokenHash: sb.HashSecret(token), TenantID: t.ID, CreatedAt: now, ExpiresAt: now.Add(sb.DashboardLinkTTL)}
	if err := db.CreateDashboardLink(ctx, link); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s/dashboard/login/link?%s\n", strings.TrimSuffix(base.String(), "/"), url.Values{"token": {token}}.Encode())
	return err
}
