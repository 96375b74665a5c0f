package main

// The operator commands (docs/operations.md): what they print, and that bad
// input exits non-zero with a one-line reason.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/switchboard/switchboard/sqlstore"
)

// runCLI runs an operator command in-process against db, as main would.
func runCLI(db string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), append(args, "--database", db), noEnv, &out, &errOut)
	return out.String(), errOut.String(), err
}

// wantCLIError fails the test unless the command fails with a one-line
// reason containing want, and prints nothing on stdout.
func wantCLIError(t *testing.T, db, want string, args ...string) {
	t.Helper()
	stdout, stderr, err := runCLI(db, args...)
	if err == nil {
		t.Errorf("switchboard %s succeeded (%q), want an error", strings.Join(args, " "), stdout)
		return
	}
	msg := err.Error()
	if msg == "" || strings.Contains(msg, "\n") || stderr != "" {
		t.Errorf("switchboard %s: the reason is not one line: %q (stderr %q)", strings.Join(args, " "), msg, stderr)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("switchboard %s: reason %q does not mention %q", strings.Join(args, " "), msg, want)
	}
	if stdout != "" {
		t.Errorf("switchboard %s failed but printed %q", strings.Join(args, " "), stdout)
	}
}

// cliJSON runs a command that must succeed and decodes the one JSON value
// it prints.
func cliJSON(t *testing.T, db string, v any, args ...string) {
	t.Helper()
	out := cli(t, db, args...)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("switchboard %s printed %q: %v", strings.Join(args, " "), out, err)
	}
	if dec.More() {
		t.Fatalf("switchboard %s printed more than one JSON value: %q", strings.Join(args, " "), out)
	}
}

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var e164RE = regexp.MustCompile(`^\+[1-9][0-9]{9,14}$`)

func TestOpsTenantCreate(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		for _, plan := range []string{"", "trial", "starter", "growth", "scale"} {
			args := []string{"tenant", "create", "--name", "Acme " + plan}
			if plan != "" {
				args = append(args, "--plan", plan)
			}
			before := time.Now()
			var out map[string]any
			cliJSON(t, db, &out, args...)
			if got := strings.Join(keysOf(out), ","); got != "live_key,phone,tenant_id,test_key" {
				t.Errorf("tenant create printed the fields %s: %v", got, out)
			}
			id, _ := out["tenant_id"].(string)
			if len(id) != 26 {
				t.Errorf("tenant_id %q is not a ULID", id)
			}
			live, _ := out["live_key"].(string)
			test, _ := out["test_key"].(string)
			if !keyTextRE.MatchString(live) || !strings.HasPrefix(live, "svc_live_") {
				t.Errorf("live_key %q", live)
			}
			if !keyTextRE.MatchString(test) || !strings.HasPrefix(test, "svc_test_") {
				t.Errorf("test_key %q", test)
			}
			phone, _ := out["phone"].(map[string]any)
			if got := strings.Join(keysOf(phone), ","); got != "id,number" {
				t.Errorf("phone has the fields %s: %v", got, phone)
			}
			if n, _ := phone["number"].(string); !e164RE.MatchString(n) {
				t.Errorf("phone number %q is not E.164", n)
			}

			// The tenant is stored with its plan and a 14-day trial.
			var tn struct {
				ID          string    `json:"tenant_id"`
				Plan        string    `json:"plan"`
				Status      string    `json:"status"`
				TrialEndsAt time.Time `json:"trial_ends_at"`
			}
			cliJSON(t, db, &tn, "tenant", "resume", id)
			want := plan
			if want == "" {
				want = "trial"
			}
			if tn.ID != id || tn.Plan != want || tn.Status != "active" {
				t.Errorf("stored tenant %+v, want plan %s, active", tn, want)
			}
			if d := tn.TrialEndsAt.Sub(before); d < 14*24*time.Hour-time.Minute || d > 14*24*time.Hour+time.Minute {
				t.Errorf("trial ends %v after creation, want 14 days", d)
			}
			// The phone is the tenant's.
			var phones []map[string]any
			cliJSON(t, db, &phones, "phone", "list", "--tenant", id)
			if len(phones) != 1 || phones[0]["id"] != phone["id"] || phones[0]["number"] != phone["number"] || phones[0]["status"] != "online" {
				t.Errorf("phone list of a new tenant: %v, want its phone %v", phones, phone)
			}
		}

		wantCLIError(t, db, "gold", "tenant", "create", "--name", "Acme", "--plan", "gold")
		wantCLIError(t, db, "--name", "tenant", "create")
		wantCLIError(t, db, "--name", "tenant", "create", "--name", "  ")
		wantCLIError(t, db, "extra", "tenant", "create", "--name", "Acme", "extra")
		wantCLIError(t, db, "tenant", "tenant")
		wantCLIError(t, db, "bogus", "tenant", "bogus")
	})
}

func TestOpsTenantCommands(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		tn := newTenant(t, db)
		const unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
		var out struct {
			ID          string `json:"tenant_id"`
			Plan        string `json:"plan"`
			Status      string `json:"status"`
			TrialEndsAt string `json:"trial_ends_at"`
		}
		cliJSON(t, db, &out, "tenant", "plan", tn.ID, "growth")
		if out.ID != tn.ID || out.Plan != "growth" {
			t.Errorf("tenant plan printed %+v", out)
		}
		cliJSON(t, db, &out, "tenant", "trial", tn.ID, "--ends", "2020-01-02T03:04:05Z")
		if out.TrialEndsAt != "2020-01-02T03:04:05Z" {
			t.Errorf("tenant trial printed %+v", out)
		}
		cliJSON(t, db, &out, "tenant", "suspend", tn.ID)
		if out.Status != "suspended" {
			t.Errorf("tenant suspend printed %+v", out)
		}
		cliJSON(t, db, &out, "tenant", "resume", tn.ID)
		if out.Status != "active" || out.Plan != "growth" {
			t.Errorf("tenant resume printed %+v", out)
		}

		wantCLIError(t, db, "gold", "tenant", "plan", tn.ID, "gold")
		wantCLIError(t, db, unknown, "tenant", "plan", unknown, "starter")
		wantCLIError(t, db, "TENANT_ID PLAN", "tenant", "plan", tn.ID)
		wantCLIError(t, db, "RFC 3339", "tenant", "trial", tn.ID, "--ends", "tomorrow")
		wantCLIError(t, db, "RFC 3339", "tenant", "trial", tn.ID)
		wantCLIError(t, db, unknown, "tenant", "trial", unknown, "--ends", "2030-01-01T00:00:00Z")
		for _, cmd := range []string{"suspend", "resume"} {
			wantCLIError(t, db, unknown, "tenant", cmd, unknown)
			wantCLIError(t, db, "TENANT_ID", "tenant", cmd)
		}
		// Failed commands changed nothing.
		cliJSON(t, db, &out, "tenant", "resume", tn.ID)
		if out.Plan != "growth" || out.TrialEndsAt != "2020-01-02T03:04:05Z" {
			t.Errorf("after failed commands: %+v", out)
		}
	})
}

func TestOpsKeyCommands(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		tn := newTenant(t, db)
		store, err := sqlstore.Open(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := store.Keys(context.Background(), tn.ID)
		store.Close()
		if err != nil || len(keys) != 2 {
			t.Fatalf("keys of a new tenant: %v %v", keys, err)
		}
		id := keys[0].ID
		var out map[string]any
		cliJSON(t, db, &out, "key", "deactivate", id)
		if !reflect.DeepEqual(out, map[string]any{"id": id, "status": "inactive"}) {
			t.Errorf("key deactivate printed %v", out)
		}
		cliJSON(t, db, &out, "key", "activate", id)
		if !reflect.DeepEqual(out, map[string]any{"id": id, "status": "active"}) {
			t.Errorf("key activate printed %v", out)
		}

		const unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
		wantCLIError(t, db, unknown, "key", "activate", unknown)
		wantCLIError(t, db, unknown, "key", "deactivate", unknown)
		wantCLIError(t, db, "KEY_ID", "key", "activate")
		wantCLIError(t, db, "activate or deactivate", "key", "revoke", id)
		wantCLIError(t, db, "activate or deactivate", "key")
	})
}

func TestOpsPhones(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		tn := newTenant(t, db)
		other := newTenant(t, db)
		// Outside the +1555 range that tenant create draws from.
		num := func(i int) string { return "+4930555000" + string(rune('0'+i)) }

		phone := func(args ...string) map[string]any {
			t.Helper()
			var out map[string]any
			cliJSON(t, db, &out, append([]string{"phone"}, args...)...)
			if got := strings.Join(keysOf(out), ","); got != "channels,created_at,daily_limit,device,device_phone_id,effective_daily_limit,health,id,kind,last_seen_at,number,provider,"+
				"quarantine,quarantine_policy,rate_limit,sent_today,status,trouble,warmup" {
				t.Errorf("phone %s printed the fields %s: %v", args[0], got, out)
			}
			return out
		}
		a := phone("add", "--tenant", tn.ID, "--number", num(1))
		if a["number"] != num(1) || a["daily_limit"] != json.Number("1000") || a["status"] != "online" ||
			!reflect.DeepEqual(a["channels"], []any{"sms", "chat"}) {
			t.Errorf("phone add with defaults printed %v", a)
		}
		b := phone("add", "--tenant", tn.ID, "--number", num(2), "--daily-limit", "5", "--channels", "sms")
		if b["daily_limit"] != json.Number("5") || !reflect.DeepEqual(b["channels"], []any{"sms"}) {
			t.Errorf("phone add --daily-limit 5 --channels sms printed %v", b)
		}
		c := phone("add", "--tenant", tn.ID, "--number", num(3), "--daily-limit", "0", "--channels", "chat")
		if v, ok := c["daily_limit"]; !ok || v != nil || !reflect.DeepEqual(c["channels"], []any{"chat"}) {
			t.Errorf("phone add --daily-limit 0 printed %v, want daily_limit null", c)
		}

		off := phone("offline", b["id"].(string))
		if off["status"] != "offline" || off["id"] != b["id"] || off["number"] != b["number"] {
			t.Errorf("phone offline printed %v", off)
		}
		var list []map[string]any
		cliJSON(t, db, &list, "phone", "list", "--tenant", tn.ID)
		if len(list) != 4 || list[0]["id"] != tn.Phone.ID {
			t.Fatalf("phone list: %v, want the tenant's 4 phones, oldest first", list)
		}
		b["status"] = "offline"
		for i, want := range []map[string]any{a, b, c} {
			if !reflect.DeepEqual(list[i+1], want) {
				t.Errorf("phone list item %d: %v, want %v", i+1, list[i+1], want)
			}
		}
		if on := phone("online", b["id"].(string)); on["status"] != "online" {
			t.Errorf("phone online printed %v", on)
		}
		cliJSON(t, db, &list, "phone", "list", "--tenant", other.ID)
		if len(list) != 1 || list[0]["id"] != other.Phone.ID {
			t.Errorf("the other tenant's phone list: %v", list)
		}

		const unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
		for _, bad := range []string{"12345", "4930123456789", "+49301234", "+4930 1234 5678", "+49-30-12345678", "+4930123456789012", "+49301234567a", ""} {
			wantCLIError(t, db, "E.164", "phone", "add", "--tenant", tn.ID, "--number", bad)
		}
		wantCLIError(t, db, unknown, "phone", "add", "--tenant", unknown, "--number", num(4))
		wantCLIError(t, db, "--tenant", "phone", "add", "--number", num(4))
		wantCLIError(t, db, num(1), "phone", "add", "--tenant", tn.ID, "--number", num(1))
		wantCLIError(t, db, num(1), "phone", "add", "--tenant", other.ID, "--number", num(1))
		wantCLIError(t, db, "fax", "phone", "add", "--tenant", tn.ID, "--number", num(4), "--channels", "sms,fax")
		wantCLIError(t, db, "daily-limit", "phone", "add", "--tenant", tn.ID, "--number", num(4), "--daily-limit", "-1")
		wantCLIError(t, db, unknown, "phone", "offline", unknown)
		wantCLIError(t, db, unknown, "phone", "online", unknown)
		wantCLIError(t, db, "PHONE_ID", "phone", "offline")
		wantCLIError(t, db, unknown, "phone", "list", "--tenant", unknown)
		wantCLIError(t, db, "--tenant", "phone", "list")
		wantCLIError(t, db, "bogus", "phone", "bogus")

		// Nothing was added by the failures.
		cliJSON(t, db, &list, "phone", "list", "--tenant", tn.ID)
		if len(list) != 4 {
			t.Errorf("%d phones after failed adds, want 4", len(list))
		}
	})
}

// opsMainEnv makes TestOpsMainHelper run main with the JSON array of
// arguments it holds.
const opsMainEnv = "SWITCHBOARD_TEST_OPS_MAIN"

// TestOpsMainHelper is not a test: it is the child process of
// TestOpsExitStatus, which runs the test binary as the switchboard command.
func TestOpsMainHelper(t *testing.T) {
	raw := os.Getenv(opsMainEnv)
	if raw == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		os.Exit(99)
	}
	os.Args = append([]string{"switchboard"}, args...)
	main()
	os.Exit(0)
}

// TestOpsExitStatus runs the real main in a child process: bad input exits
// with status 1 and one line on stderr; success exits 0 with JSON on stdout,
// and --help exits 0 with the usage on stdout.
func TestOpsExitStatus(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	runMain := func(args ...string) (code int, stdout, stderr string) {
		t.Helper()
		raw, _ := json.Marshal(append(args, "--database", db))
		cmd := exec.Command(os.Args[0], "-test.run=^TestOpsMainHelper$")
		cmd.Env = append(os.Environ(), opsMainEnv+"="+string(raw))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String(), errOut.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errOut.String()
	}

	for _, args := range [][]string{{"serve", "--help"}, {"tenant", "plan", "-h"}} {
		code, stdout, stderr := runMain(args...)
		if code != 0 || !strings.HasPrefix(stdout, "Usage: switchboard "+args[0]) || stderr != "" {
			t.Errorf("switchboard %s: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	code, stdout, stderr := runMain("tenant", "create", "--name", "Acme")
	var tn tenant
	if code != 0 || json.Unmarshal([]byte(stdout), &tn) != nil || tn.ID == "" || stderr != "" {
		t.Fatalf("tenant create: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"tenant", "create", "--name", "Acme", "--plan", "gold"},
		{"tenant", "plan", tn.ID, "gold"},
		{"key", "activate", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"phone", "add", "--tenant", tn.ID, "--number", "12345"},
		{"phone", "add", "--tenant", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--number", "+493012345678"},
		{"serve", "--port", "8080"},
		{"tenant"},
	} {
		code, stdout, stderr := runMain(args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != 1 || stdout != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], "switchboard: ") || !strings.HasSuffix(stderr, "\n") {
			t.Errorf("switchboard %s: exit %d, stdout %q, stderr %q; want exit 1 and one line on stderr",
				strings.Join(args, " "), code, stdout, stderr)
		}
	}
}

// TestOpsDatabaseAddress: every command that takes --database accepts only
// sqlite:PATH and postgres:// (or postgresql://) addresses; anything else
// exits non-zero with a one-line reason, before it creates anything: a
// mistyped address once became a SQLite file named after it.
func TestOpsDatabaseAddress(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	commands := [][]string{
		{"serve", "--addr", "127.0.0.1:0"},
		{"tenant", "create", "--name", "Acme"},
		{"tenant", "plan", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "starter"},
		{"tenant", "trial", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--ends", "2030-01-01T00:00:00Z"},
		{"tenant", "suspend", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"tenant", "resume", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"key", "deactivate", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"key", "activate", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"phone", "add", "--tenant", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--number", "+15550100000"},
		{"phone", "list", "--tenant", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"phone", "offline", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"phone", "online", "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"bench", "--duration", "200ms", "--rounds", "1"},
	}
	bad := map[string]string{
		"mysql://x":               `scheme "mysql" is not supported`,
		"mysql://root:hunter2@db": `scheme "mysql" is not supported`,
		"sqlite3:data.db":         `scheme "sqlite3" is not supported`,
		"data/switchboard.db":     "has no scheme",
		"sqlite:":                 "names no file",
	}
	for _, args := range commands {
		for addr, want := range bad {
			// As a flag, and as the environment variable every command but
			// bench reads (bench makes a database of its own unless told).
			for _, viaEnv := range []bool{false, true} {
				if viaEnv && args[0] == "bench" {
					continue
				}
				var stdout, stderr bytes.Buffer
				full, getenv := append(slices.Clone(args), "--database", addr), noEnv
				if viaEnv {
					full, getenv = args, func(k string) string {
						if k == "SWITCHBOARD_DATABASE" {
							return addr
						}
						return ""
					}
				}
				// A serve that accepted the address would serve until its
				// context ends: then it "succeeded".
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := run(ctx, full, getenv, &stdout, &stderr)
				cancel()
				what := fmt.Sprintf("switchboard %s (database %q, env %v)", strings.Join(args, " "), addr, viaEnv)
				if err == nil {
					t.Errorf("%s succeeded", what)
					continue
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") || !strings.Contains(msg, want) || !strings.Contains(msg, "sqlite:PATH") || stdout.Len() != 0 {
					t.Errorf("%s: %q (stdout %q); want one line saying %q and naming sqlite:PATH", what, msg, stdout.String(), want)
				}
				if strings.Contains(msg, "hunter2") {
					t.Errorf("%s: the reason shows the password: %q", what, msg)
				}
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a refused address left %q in the working directory", e.Name())
	}
	// The accepted forms still open.
	for _, addr := range []string{"sqlite:" + filepath.Join(dir, "ok.db"), "sqlite:relative.db"} {
		if _, _, err := runCLI(addr, "tenant", "create", "--name", "Acme"); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "relative.db")); err != nil {
		t.Errorf("sqlite:relative.db is not relative to the working directory: %v", err)
	}
}
