package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
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
	return f.String(name, def, help+" (env "+envName(name)+")")
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

func (f *flags) duration(name string, def time.Duration, help string) *time.Duration {
	if v := f.getenv(envName(name)); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		}
	}
	return f.Duration(name, def, help+" (env "+envName(name)+")")
}

func (f *flags) database() *string {
	return f.string("database", "sqlite:data/switchboard.db", "database: sqlite:PATH or postgres://...")
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
