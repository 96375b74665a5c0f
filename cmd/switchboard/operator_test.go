package main

// The operator's commands beyond tenant create: help, tenant list, key
// create, phone delete, version, and one serve per SQLite file.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/sqlstore"
)

// usageCommands lists every command and subcommand the usage text names,
// with the arguments its line shows ("tenant plan": "TENANT_ID PLAN").
func usageCommands(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	line := regexp.MustCompile(`^  switchboard ([a-z-]+)((?: [a-z|]+)?)(.*)$`)
	for _, l := range strings.Split(usage, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		subs := strings.Fields(m[2])
		if len(subs) == 0 {
			out[m[1]] = m[3]
			continue
		}
		for _, sub := range strings.Split(subs[0], "|") {
			out[m[1]+" "+sub] = m[3]
		}
	}
	if len(out) < 20 {
		t.Fatalf("found %d commands in the usage text: %v", len(out), out)
	}
	return out
}

// argName matches an argument's name in usage text: TENANT_ID, E164.
var argName = regexp.MustCompile(`^[A-Z][A-Z_0-9]+$`)

// TestOpsHelp: every command's --help (and -h) succeeds, prints its usage
// on stdout with the arguments it takes, and nothing on stderr; a group's
// --help lists its subcommands.
func TestOpsHelp(t *testing.T) {
	t.Parallel()
	for cmd, rest := range usageCommands(t) {
		for _, h := range []string{"--help", "-h"} {
			var stdout, stderr bytes.Buffer
			args := append(strings.Fields(cmd), h)
			if err := run(context.Background(), args, noEnv, &stdout, &stderr); err != nil {
				t.Errorf("switchboard %s %s: %v", cmd, h, err)
				continue
			}
			out := stdout.String()
			if !strings.HasPrefix(out, "Usage: switchboard "+cmd) || stderr.Len() != 0 {
				t.Errorf("switchboard %s %s printed (stderr %q):\n%s", cmd, h, stderr.String(), out)
			}
			// The positional arguments and required flags of the usage
			// line (before any "[") are in the command's own usage line.
			first, _, _ := strings.Cut(out, "\n")
			required, _, _ := strings.Cut(rest, "[")
			for _, w := range strings.Fields(required) {
				if (strings.HasPrefix(w, "--") || argName.MatchString(w)) && !strings.Contains(first, " "+w+" ") {
					t.Errorf("switchboard %s %s: usage line %q does not show %s", cmd, h, first, w)
				}
			}
		}
	}
	for _, group := range []string{"tenant", "key", "phone", "dashboard"} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{group, "--help"}, noEnv, &stdout, &stderr); err != nil {
			t.Errorf("switchboard %s --help: %v", group, err)
		}
		if !strings.Contains(stdout.String(), "switchboard "+group+" ") || stderr.Len() != 0 {
			t.Errorf("switchboard %s --help printed %q, %q", group, stdout.String(), stderr.String())
		}
	}
	// Exact usage lines of the commands that take positional arguments.
	for args, want := range map[string]string{
		"tenant plan":  "Usage: switchboard tenant plan TENANT_ID PLAN [flags]",
		"tenant trial": "Usage: switchboard tenant trial TENANT_ID --ends RFC3339 [flags]",
		"key create":   "Usage: switchboard key create --tenant TENANT_ID [flags]",
		"phone delete": "Usage: switchboard phone delete PHONE_ID [flags]",
		"backup":       "Usage: switchboard backup --to FILE [flags]",
	} {
		var stdout bytes.Buffer
		run(context.Background(), append(strings.Fields(args), "--help"), noEnv, &stdout, &bytes.Buffer{})
		if first, _, _ := strings.Cut(stdout.String(), "\n"); first != want {
			t.Errorf("switchboard %s --help: %q, want %q", args, first, want)
		}
	}
}

// TestOpsFlagErrors: a mistyped flag or a missing subcommand is one line
// that points at --help, not the whole usage.
func TestOpsFlagErrors(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"serve --port 8080":      "serve: unknown flag --port (see switchboard serve --help)",
		"serve --addr":           "serve: flag --addr needs a value (see switchboard serve --help)",
		"serve --max-conns x":    `serve: invalid value "x" for flag --max-conns: parse error (see switchboard serve --help)`,
		"tenant":                 "tenant: expected create, list, plan, trial, suspend or resume (see switchboard tenant --help)",
		"key rotate":             `key: unknown subcommand "rotate": expected create, activate or deactivate`,
		"phone":                  "phone: expected add, list, offline, online or delete (see switchboard phone --help)",
		"nosuch":                 `unknown command "nosuch" (see switchboard help)`,
		"tenant list --status x": `tenant list: --status must be active or suspended, not "x"`,
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), strings.Fields(args), noEnv, &stdout, &stderr)
		if err == nil || err.Error() != want || stdout.Len()+stderr.Len() != 0 {
			t.Errorf("switchboard %s: %v (printed %q %q), want the one line %q", args, err, stdout.String(), stderr.String(), want)
		}
	}
}

// TestOpsTenantList: every tenant, oldest first, with its plan, status and
// what its requests get; --status filters.
func TestOpsTenantList(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		var list []map[string]any
		cliJSON(t, db, &list, "tenant", "list")
		if len(list) != 0 {
			t.Fatalf("a new database lists %v", list)
		}
		a := newTenant(t, db, "--plan", "growth")
		b := newTenant(t, db)
		c := newTenant(t, db, "--plan", "starter")
		cli(t, db, "tenant", "suspend", c.ID)
		cli(t, db, "tenant", "trial", b.ID, "--ends", "2020-01-01T00:00:00Z")
		out := cli(t, db, "tenant", "list")
		if strings.Count(out, "\n") != 5 {
			t.Errorf("tenant list is not one tenant a line:\n%s", out)
		}
		list = nil
		cliJSON(t, db, &list, "tenant", "list")
		want := []struct{ id, plan, status, access string }{
			{a.ID, "growth", "active", "ok"},
			{b.ID, "trial", "active", "TRIAL_EXPIRED"},
			{c.ID, "starter", "suspended", "TENANT_SUSPENDED"},
		}
		if len(list) != len(want) {
			t.Fatalf("tenant list: %v", list)
		}
		for i, w := range want {
			got := list[i]
			if got["tenant_id"] != w.id || got["plan"] != w.plan || got["status"] != w.status || got["access"] != w.access || got["name"] != "Test Co" {
				t.Errorf("tenant %d: %v, want %+v", i, got, w)
			}
		}
		list = nil
		cliJSON(t, db, &list, "tenant", "list", "--status", "suspended")
		if len(list) != 1 || list[0]["tenant_id"] != c.ID {
			t.Errorf("tenant list --status suspended: %v", list)
		}
	})
}

// TestOpsKeyCreate: an operator's key works on the API at once, in its
// environment, with its own rate limit; bad input is one line.
func TestOpsKeyCreate(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := newTenant(t, db, "--plan", "growth")
		var k map[string]any
		cliJSON(t, db, &k, "key", "create", "--tenant", tn.ID, "--name", "CI deploys", "--rate-limit", "30")
		key, _ := k["key"].(string)
		if !strings.HasPrefix(key, "svc_live_") || k["name"] != "CI deploys" || k["environment"] != "live" || k["status"] != "active" ||
			k["tenant_id"] != tn.ID || fmt.Sprint(k["rate_limit"]) != "30" {
			t.Fatalf("key create printed %v", k)
		}
		r := s.do(t, "GET", "/v1/api-keys", key, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("the new key: %d %s", r.Status, r.Raw)
		}
		found := false
		for _, l := range r.List() {
			if l["id"] == k["id"] {
				found = true
				if fmt.Sprint(l["rate_limit"]) != "30" || l["name"] != "CI deploys" {
					t.Errorf("the key as the API lists it: %v", l)
				}
			}
		}
		if !found {
			t.Errorf("the API does not list the operator's key: %s", r.Raw)
		}
		var tk map[string]any
		cliJSON(t, db, &tk, "key", "create", "--tenant", tn.ID, "--env", "test")
		if test, _ := tk["key"].(string); !strings.HasPrefix(test, "svc_test_") || tk["name"] != "Operator test key" {
			t.Errorf("key create --env test printed %v", tk)
		}
		// A node's list of a tenant's keys is kept for half a second.
		eventually(t, 5*time.Second, "the test key listing the two test keys", func() bool {
			r := s.do(t, "GET", "/v1/api-keys", tk["key"].(string), nil)
			return r.Status == http.StatusOK && len(r.List()) == 2
		})
		wantCLIError(t, db, "--tenant is required", "key", "create")
		wantCLIError(t, db, `no tenant "01ARZ3NDEKTSV4RRFFQ69G5FAV"`, "key", "create", "--tenant", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
		wantCLIError(t, db, `--env must be live or test, not "prod"`, "key", "create", "--tenant", tn.ID, "--env", "prod")
		wantCLIError(t, db, "ceiling", "key", "create", "--tenant", tn.ID, "--rate-limit", "100000")
		wantCLIError(t, db, "at least 1", "key", "create", "--tenant", tn.ID, "--rate-limit", "-1")
	})
}

// TestOpsPhoneDelete: an operator deletes any tenant's phone by its id; it
// is gone from the tenant's list and the API.
func TestOpsPhoneDelete(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		s := startServer(t, db)
		tn := newTenant(t, db)
		var p map[string]any
		cliJSON(t, db, &p, "phone", "add", "--tenant", tn.ID, "--number", "+15550104444")
		id := p["id"].(string)
		var out map[string]any
		cliJSON(t, db, &out, "phone", "delete", id)
		if out["id"] != id || out["tenant_id"] != tn.ID || out["deleted"] != true {
			t.Errorf("phone delete printed %v", out)
		}
		var list []map[string]any
		cliJSON(t, db, &list, "phone", "list", "--tenant", tn.ID)
		for _, l := range list {
			if l["id"] == id {
				t.Errorf("the deleted phone is still listed: %v", l)
			}
		}
		if r := s.do(t, "GET", "/v1/phones/"+id, tn.Live, nil); r.Status != http.StatusNotFound {
			t.Errorf("GET the deleted phone: %d %s", r.Status, r.Raw)
		}
		wantCLIError(t, db, fmt.Sprintf("phone delete: no phone %q", id), "phone", "delete", id)
		wantCLIError(t, db, "expected PHONE_ID", "phone", "delete")
	})
}

// TestOpsVersion: version prints the version, the commit and the schema
// version this build knows; with --database, that database's.
func TestOpsVersion(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	newTenant(t, db)
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"version", "--database", db}, noEnv, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(fmt.Sprintf(`^switchboard \S+.*\ncommit: \S+.*\nschema: %d\ngo: go1\.\S+ \S+/\S+\ndatabase schema: %d\n$`,
		sqlstore.SchemaVersion(), sqlstore.SchemaVersion()))
	if !want.MatchString(stdout.String()) {
		t.Errorf("version printed:\n%s", stdout.String())
	}
	if sqlstore.SchemaVersion() < 24 {
		t.Errorf("schema version %d", sqlstore.SchemaVersion())
	}
}

// TestOpsRedisHostPort: --redis-url takes host:port without a scheme.
func TestOpsRedisHostPort(t *testing.T) {
	t.Parallel()
	s := startServer(t, sqliteURL(t), "--redis-url", redisAddr(t))
	if m := metric(scrape(t, s), `switchboard_ratelimit_backend{backend="redis"}`); m != 1 {
		t.Errorf(`switchboard_ratelimit_backend{backend="redis"} = %v, want 1`, m)
	}
}

// TestOneServePerSQLiteFile: a second serve on a SQLite file that a serve
// already runs on stops at once with one line saying so, and the first
// keeps serving; once the first stops, a serve starts on the file again.
func TestOneServePerSQLiteFile(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	first := startServer(t, db)
	tn := newTenant(t, db)
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--database", db}, noEnv, &stdout, &stderr)
	var locked *sqlstore.LockedError
	if !errors.As(err, &locked) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "is serving this database") ||
		!strings.Contains(err.Error(), "pid") {
		t.Fatalf("a second serve on the file: %v", err)
	}
	if strings.Contains(stderr.String(), `"msg":"listening"`) {
		t.Errorf("the second serve listened:\n%s", stderr.String())
	}
	if r := first.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": "+15005550000", "body": "still here"}); r.Status != http.StatusAccepted {
		t.Errorf("the first serve after the second's attempt: %d %s", r.Status, r.Raw)
	}
	// Operator commands still work beside serve.
	cli(t, db, "tenant", "list")
	first.stop()
	startServer(t, db)
}

// TestFailedStartReleasesNothing: a serve that cannot listen (its address
// is taken) stops before it changes anything in the database: claimed
// messages stay claimed. Releasing them first let a failed start make
// another node's messages due again, to be sent twice.
func TestFailedStartReleasesNothing(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	newTenant(t, db) // migrates the database
	dbtest.Exec(t, db, `INSERT INTO message_claims (message_id, node, until) VALUES ('m1', 'n1', ?)`, time.Now().Add(time.Hour).UnixMicro())
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	err = run(context.Background(), []string{"serve", "--addr", taken.Addr().String(), "--database", db}, noEnv, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("serve on a taken address: %v", err)
	}
	if n := dbtest.Count(t, db, `SELECT COUNT(*) FROM message_claims`); n != 1 {
		t.Errorf("%d claims after a start that failed to listen, want the 1 there was", n)
	}
}

// TestServeRefusesNewerSchema: serve (and every operator command) refuses
// a database a newer version migrated, in one line naming both schema
// versions and this build's version.
func TestServeRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		newTenant(t, db)
		future := sqlstore.SchemaVersion() + 1
		dbtest.Exec(t, db, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from_the_future.sql', 0)`, future)
		want := fmt.Sprintf("the database's schema is version %d, newer than the %d of this build (switchboard ", future, sqlstore.SchemaVersion())
		var stderr syncBuffer
		err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--database", db}, noEnv, &bytes.Buffer{}, &stderr)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), want) {
			t.Errorf("serve on a newer database: %v", err)
		}
		if strings.Contains(stderr.String(), `"msg":"listening"`) {
			t.Errorf("serve on a newer database listened")
		}
		wantCLIError(t, db, want, "tenant", "list")
	})
}
