package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/sqlstore"
)

// flags is a FlagSet whose defaults come from SWITCHBOARD_* environment
// variables: --foo-bar reads SWITCHBOARD_FOO_BAR.
type flags struct {
	*flag.FlagSet
	getenv func(string) string
}

func newFlags(name string, getenv func(string) string, stderr io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &flags{FlagSet: fs, getenv: getenv}
}

func envName(flagName string) string {
	return "SWITCHBOARD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (f *flags) string(name, def, help string) *string {
	if v := f.getenv(envName(name)); v != "" {
		def = v
	}
	p := f.String(name, def, help+" (env "+envName(name)+")")
	// Usage text (--help, and the usage printed after any flag error) shows
	// the defaults, which may have come from the environment: never show a
	// secret there.
	f.Lookup(name).DefValue = shownDefault(name, def)
	return p
}

// secretFlag reports whether a flag holds a secret whose value is never
// shown: its name ends in -secret or mentions a password or a token.
func secretFlag(name string) bool {
	return strings.HasSuffix(name, "-secret") || strings.Contains(name, "password") || strings.Contains(name, "token")
}

// hidden is what usage text shows for a secret flag that has a value.
const hidden = "<hidden>"

// shownDefault is the default of a flag as usage text shows it: a secret
// flag's value is hidden, and a URL (a database or Redis address) shows with
// its password and any password-like query parameter replaced by "xxxxx".
func shownDefault(name, def string) string {
	if def == "" {
		return ""
	}
	if secretFlag(name) {
		return hidden
	}
	return redactURL(def)
}

// redactURL returns s with the password of a URL and the values of its
// query parameters that name a password, secret or token replaced by
// "xxxxx". Text that is not such a URL is returned unchanged; text that
// looks like a URL with credentials but does not parse is hidden whole.
func redactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return hidden
	}
	if q := u.Query(); len(q) > 0 {
		changed := false
		for k := range q {
			if l := strings.ToLower(k); strings.Contains(l, "password") || strings.Contains(l, "secret") || strings.Contains(l, "token") {
				q.Set(k, "xxxxx")
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}

func (f *flags) bool(name string, def bool, help string) *bool {
	if v := f.getenv(envName(name)); v != "" {
		def = v == "1" || v == "true"
	}
	return f.Bool(name, def, help+" (env "+envName(name)+")")
}

func (f *flags) float(name string, def float64, help string) *float64 {
	if v := f.getenv(envName(name)); v != "" {
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			def = x
		}
	}
	return f.Float64(name, def, help+" (env "+envName(name)+")")
}

func (f *flags) int(name string, def int, help string) *int {
	if v := f.getenv(envName(name)); v != "" {
		if x, err := strconv.Atoi(v); err == nil {
			def = x
		}
	}
	return f.Int(name, def, help+" (env "+envName(name)+")")
}

func (f *flags) duration(name string, def time.Duration, help string) *time.Duration {
	if v := f.getenv(envName(name)); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		}
	}
	return f.Duration(name, def, help+" (env "+envName(name)+")")
}

func (f *flags) database() *string {
	return f.string("database", "sqlite:data/switchboard.db", "database: sqlite:PATH (relative to the working directory) or postgres://...")
}

// checkDatabase refuses a --database that names no database Switchboard
// opens, before a command does anything: a mistyped address must never
// leave a node on a private SQLite file.
func checkDatabase(url string) error {
	if err := sqlstore.CheckURL(url); err != nil {
		return fmt.Errorf("--database: %w", err)
	}
	return nil
}

// parse parses args, allowing flags after positional arguments, and returns
// the positional ones.
func (f *flags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			return nil, errUsage
		}
		args = f.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func wantArgs(pos []string, n int, what string) error {
	if len(pos) != n {
		return fmt.Errorf("expected %s", what)
	}
	return nil
}
