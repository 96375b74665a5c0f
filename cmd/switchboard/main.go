// Command switchboard runs the Switchboard messaging API (`serve`) and the
// operator commands that manage tenants, keys and sending phones against the
// same database. See `switchboard help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "switchboard:", err)
		}
		os.Exit(1)
	}
}

// errUsage means the usage text was already printed.
var errUsage = errors.New("usage")

const usage = `Switchboard: a multi-tenant messaging API.

Usage:
  switchboard serve [flags]                       run the API and the workers
  switchboard tenant create --name NAME [--plan trial|starter|growth|scale]
  switchboard tenant list                         every tenant with its plan and status
  switchboard tenant plan TENANT_ID PLAN
  switchboard tenant trial TENANT_ID --ends RFC3339
  switchboard tenant suspend|resume TENANT_ID
  switchboard key create --tenant TENANT_ID [--env live|test] [--name NAME] [--rate-limit N]
  switchboard key deactivate|activate KEY_ID
  switchboard phone add --tenant TENANT_ID --number E164 [--daily-limit N] [--channels sms,chat]
                        [--provider LINK --providers FILE]   a number at a carrier link or chat engine (docs/carriers.md, docs/chat.md)
  switchboard phone offline|online PHONE_ID
  switchboard phone delete PHONE_ID
  switchboard phone list --tenant TENANT_ID
  switchboard dashboard link --tenant TENANT_ID [--public-url URL]   a one-time sign-in link (15 minutes)
  switchboard backup --to FILE                    a consistent copy of a live SQLite database
  switchboard restore --from FILE [--force]       put a backup back (serve stopped)
  switchboard version                             version, commit and database schema version
  switchboard phone-agent --url URL --code CODE [--state FILE]   a reference Android device (see docs/phones.md)
  switchboard smsc --system-id ID [--addr HOST:PORT] [--password-env VAR]   a test SMSC to try an SMPP link (docs/carriers.md)
  switchboard bench [flags]                       benchmark against a bare net/http handler
                        [--scenario send --nodes 1,2,3 --database postgres://...]   on several nodes

Every command takes --database (env SWITCHBOARD_DATABASE, default sqlite:data/switchboard.db).
Run "switchboard COMMAND --help" for a command's flags.
`

// run is the whole program, testable in-process: it reads no globals.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	err := command(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

func command(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], getenv, stdout, stderr)
	case "tenant":
		return tenantCmd(ctx, args[1:], getenv, stdout, stderr)
	case "key":
		return keyCmd(ctx, args[1:], getenv, stdout, stderr)
	case "phone":
		return phoneCmd(ctx, args[1:], getenv, stdout, stderr)
	case "dashboard":
		return dashboardCmd(ctx, args[1:], getenv, stdout, stderr)
	case "phone-agent":
		return phoneAgentCmd(ctx, args[1:], getenv, os.Stdin, stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], getenv, stdout, stderr)
	case "backup":
		return backupCmd(ctx, args[1:], getenv, stdout)
	case "restore":
		return restoreCmd(ctx, args[1:], getenv, stdout)
	case "version":
		return versionCmd(ctx, args[1:], getenv, stdout)
	case "smsc":
		return smscCmd(ctx, args[1:], getenv, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q (see switchboard help)", args[0])
}

// subcommand returns the subcommand of a command group (tenant, key,
// phone, dashboard) that args start with, one of known. With no
// subcommand, or -h/--help, it prints the group's lines of the usage on
// stdout and returns errHelp for --help; an unknown one is an error naming
// the known ones.
func subcommand(group string, args []string, stdout io.Writer, known ...string) (string, error) {
	if len(args) > 0 && slices.Contains(known, args[0]) {
		return args[0], nil
	}
	want := fmt.Sprintf("expected %s", strings.Join(known, ", "))
	if i := strings.LastIndex(want, ", "); i >= 0 {
		want = want[:i] + " or " + want[i+2:]
	}
	switch {
	case len(args) == 0:
		return "", fmt.Errorf("%s: %s (see switchboard %s --help)", group, want, group)
	case args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help":
		fmt.Fprintf(stdout, "Usage:\n%s\nRun \"switchboard %s SUBCOMMAND --help\" for a subcommand's flags.\n", groupUsage(group), group)
		return "", errHelp
	}
	return "", fmt.Errorf("%s: unknown subcommand %q: %s", group, args[0], want)
}

// groupUsage returns the lines of the usage that describe group's
// subcommands, with their continuation lines.
func groupUsage(group string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  switchboard "+group+" "):
			in = true
		case !strings.HasPrefix(line, "                "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
