package main

import (
	"errors"
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
// variables: --foo-bar reads SWITCHBOARD_FOO_BAR. --help prints the
// command's usage on stdout (and the command exits 0); any other flag error
// is one line (see parse).
type flags struct {
	*flag.FlagSet
	getenv func(string) string
	stdout io.Writer
	// synopsis is what the usage line shows after the command's name: its
	// positional arguments and required flags, e.g. "TENANT_ID PLAN".
	synopsis string
	// about, when set, is printed under the usage line.
	about string
}

func newFlags(name string, getenv func(string) string, stdout io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	f := &flags{FlagSet: fs, getenv: getenv, stdout: stdout}
	fs.Usage = f.usage
	return f
}

// usage prints "Usage: switchboard NAME SYNOPSIS [flags]", the about text
// and the flags with their defaults.
func (f *flags) usage() {
	out := f.Output()
	fmt.Fprintf(out, "Usage: switchboard %s", f.Name())
	if f.synopsis != "" {
		fmt.Fprintf(out, " %s", f.synopsis)
	}
	fmt.Fprintf(out, " [flags]\n")
	if f.about != "" {
		fmt.Fprintf(out, "\n%s\n", strings.TrimSpace(f.about))
	}
	fmt.Fprintf(out, "\nFlags:\n")
	f.PrintDefaults()
}

// errHelp means --help printed a command's usage: the command succeeded.
var errHelp = errors.New("help shown")

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

// list is a flag that may be given more than once; its environment
// variable holds the values separated by commas.
func (f *flags) list(name, help string) *[]string {
	var l listFlag
	for _, v := range strings.Split(f.getenv(envName(name)), ",") {
		if v = strings.TrimSpace(v); v != "" {
			l.values = append(l.values, v)
		}
	}
	f.Var(&l, name, help+" (env "+envName(name)+", comma-separated)")
	return &l.values
}

// listFlag collects the values of a repeatable flag: given on the command
// line, they replace the environment's.
type listFlag struct {
	values []string
	set    bool
}

func (l *listFlag) String() string { return strings.Join(l.values, ",") }

func (l *listFlag) Set(v string) error {
	if !l.set {
		l.values, l.set = nil, true
	}
	l.values = append(l.values, v)
	return nil
}

// given reports whether the flag name was set on the command line or by
// its environment variable.
func (f *flags) given(name string) bool {
	set := f.getenv(envName(name)) != ""
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
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
// the positional ones. -h or --help prints the usage on stdout and returns
// errHelp; a flag error is returned as one line that points at --help.
func (f *flags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		f.SetOutput(io.Discard) // the flag package's own error report
		err := f.Parse(args)
		f.SetOutput(f.stdout)
		if errors.Is(err, flag.ErrHelp) {
			f.Usage()
			return nil, errHelp
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s (see switchboard %s --help)", f.Name(), flagError(err), f.Name())
		}
		args = f.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// flagError says the flag package's error in the commands' words: flags
// are written --name.
func flagError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag --" + name + " needs a value"
	}
	return strings.Replace(msg, "for flag -", "for flag --", 1)
}

func wantArgs(pos []string, n int, what string) error {
	if len(pos) != n {
		return fmt.Errorf("expected %s", what)
	}
	return nil
}
