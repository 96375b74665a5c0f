package main

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestUsageHidesSecrets: flag defaults come from SWITCHBOARD_* variables, and
// usage text (--help) shows defaults; a flag error is one line. A secret's
// value must never appear there, nor in the one-line reason of a command
// that fails on one.
func TestUsageHidesSecrets(t *testing.T) {
	t.Parallel()
	const (
		hsSecret   = "hs256-secret-value-0123456789abcdefgh"
		pgPassword = "pg-password-4711"
		pgQueryPW  = "pg-query-password-0815"
		redisPW    = "redis-password-1234"
	)
	secrets := []string{hsSecret, pgPassword, pgQueryPW, redisPW}
	envs := map[string]map[string]string{
		"password in the user info": {
			"SWITCHBOARD_IDP_HS256_SECRET": hsSecret,
			"SWITCHBOARD_DATABASE":         "postgres://switchboard:" + pgPassword + "@127.0.0.1:1/sb?sslmode=disable",
			"SWITCHBOARD_REDIS_URL":        "redis://:" + redisPW + "@127.0.0.1:1/0",
		},
		"password in the query": {
			"SWITCHBOARD_DATABASE":  "postgres://switchboard@127.0.0.1:1/sb?sslmode=disable&password=" + pgQueryPW,
			"SWITCHBOARD_REDIS_URL": "redis://default:" + redisPW + "@127.0.0.1:1/0",
		},
	}
	commands := [][]string{
		{"serve", "--help"},
		{"serve", "-h"},
		{"serve", "--nosuch-flag"},
		{"serve", "--addr"}, // a flag without its value
		{"tenant", "create", "--help"},
		{"tenant", "create", "--nosuch-flag"},
		{"tenant", "plan", "--help"},
		{"key", "deactivate", "--nosuch-flag"},
		{"phone", "add", "--help"},
		{"phone", "list", "--nosuch-flag"},
	}
	for name, env := range envs {
		getenv := func(k string) string { return env[k] }
		for _, args := range commands {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), args, getenv, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if err != nil {
				out += err.Error()
			}
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("%s: switchboard %s prints a secret:\n%s", name, strings.Join(args, " "), out)
				}
			}
			help := slices.Contains(args, "--help") || slices.Contains(args, "-h")
			switch {
			case help && (err != nil || !strings.Contains(stdout.String(), "SWITCHBOARD_DATABASE") || stderr.Len() != 0):
				t.Errorf("%s: switchboard %s: %v; want exit 0 and the usage on stdout:\n%s", name, strings.Join(args, " "), err, out)
			case !help && (err == nil || strings.Contains(err.Error(), "\n") || stdout.Len()+stderr.Len() != 0):
				t.Errorf("%s: switchboard %s: want one line saying what is wrong, got %v:\n%s", name, strings.Join(args, " "), err, out)
			}
		}
	}

	// The usage still tells which database and that a secret is set.
	var stderr bytes.Buffer
	env := envs["password in the user info"]
	run(context.Background(), []string{"serve", "--help"}, func(k string) string { return env[k] }, &stderr, &stderr)
	for _, want := range []string{"postgres://switchboard:xxxxx@127.0.0.1:1/sb", "redis://:xxxxx@127.0.0.1:1/0", `(default "<hidden>")`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("serve --help does not show %s:\n%s", want, stderr.String())
		}
	}

	// A URL that does not parse is not echoed in the reason serve gives.
	bad := map[string]string{"SWITCHBOARD_REDIS_URL": "redis://:" + redisPW + " x@127.0.0.1:1/0", "SWITCHBOARD_DATABASE": sqliteURL(t)}
	var out syncBuffer // the process default logger: see idp_test.go
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, func(k string) string { return bad[k] }, &out, &out)
	if err == nil {
		t.Fatal("serve with a malformed --redis-url started")
	}
	if strings.Contains(err.Error()+out.String(), redisPW) || !strings.Contains(err.Error(), "--redis-url") {
		t.Errorf("serve with a malformed --redis-url: %v\n%s", err, out.String())
	}
}

// TestServeScaleOutFlags: the pool, wait and HTTP limits are flags and
// environment variables that serve --help lists with their defaults, and a
// cap below 1 is refused.
func TestServeScaleOutFlags(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	run(context.Background(), []string{"serve", "--help"}, noEnv, &stderr, &stderr)
	for _, want := range []string{
		"-db-max-conns", "SWITCHBOARD_DB_MAX_CONNS", "(default 16)",
		"-db-wait", "SWITCHBOARD_DB_WAIT", "(default 2s)",
		"-max-conns", "SWITCHBOARD_MAX_CONNS", "(default 10000)",
		"-header-timeout", "SWITCHBOARD_HEADER_TIMEOUT", "(default 10s)",
		"-idle-timeout", "SWITCHBOARD_IDLE_TIMEOUT", "(default 2m0s)",
		"-db-writers", "SWITCHBOARD_DB_WRITERS",
		"-redis-timeout", "SWITCHBOARD_REDIS_TIMEOUT", "(default 75ms)",
		"-redis-cooldown", "SWITCHBOARD_REDIS_COOLDOWN", "(default 1s)",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("serve --help does not show %s", want)
		}
	}
	for _, args := range [][]string{{"--db-max-conns", "0"}, {"--max-conns", "-1"}, {"--db-writers", "-1"}, {"--redis-timeout", "0s"}, {"--redis-cooldown", "-1s"}} {
		err := run(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0", "--database", sqliteURL(t)}, args...), noEnv, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("serve %s: %v, want a refusal naming the flag", strings.Join(args, " "), err)
		}
	}
	env := map[string]string{"SWITCHBOARD_DB_MAX_CONNS": "0"}
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--database", sqliteURL(t)}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--db-max-conns") {
		t.Errorf("SWITCHBOARD_DB_MAX_CONNS=0: %v, want a refusal", err)
	}
}
