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
  switchboard tenant plan TENANT_ID PLAN
  switchboard tenant trial TENANT_ID --ends RFC3339
  switchboard tenant suspend|resume TENANT_ID
  switchboard key deactivate|activate KEY_ID
  switchboard phone add --tenant TENANT_ID --number E164 [--daily-limit N] [--channels sms,chat]
                        [--provider LINK --providers FILE]   a number at a carrier link (docs/carriers.md)
  switchboard phone offline|online PHONE_ID
  switchboard phone list --tenant TENANT_ID
  switchboard dashboard link --tenant TENANT_ID [--public-url URL]   a one-time sign-in link (15 minutes)
  switchboard phone-agent --url URL --code CODE   a reference Android device (see docs/phones.md)
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
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
	return errUsage
}
