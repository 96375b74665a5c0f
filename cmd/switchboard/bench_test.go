package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard/switchboard/internal/testenv"
)

// These tests check the flags of `switchboard bench` and that they reach
// the harness (package bench, whose tests run the scenarios); they make no
// assertion about the figures, which depend on the machine.

func benchNoEnv(string) string { return "" }

func TestBenchKeysJSON(t *testing.T) {
	testenv.Timing(t)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bench", "--duration", "200ms", "--rounds", "2", "--connections", "2", "--json"},
		benchNoEnv, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var lines []map[string]any
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 {
		t.Fatalf("got %d JSON lines, want 3 targets and a summary:\n%s", len(lines), stdout.String())
	}
	for i, role := range []string{"baseline", "server", "server"} {
		l := lines[i]
		if l["role"] != role || l["scenario"] != "keys" || l["errors"] != 0.0 || l["requests"].(float64) == 0 {
			t.Errorf("target line %d: %v", i, l)
		}
		if _, ok := l["median_ratio"]; ok != (role == "server") {
			t.Errorf("target line %d: median_ratio present = %v", i, ok)
		}
	}
	sum := lines[3]
	if sum["summary"] != true || sum["errors_ok"] != true || sum["rounds"] != 2.0 || len(sum["variants"].([]any)) != 2 {
		t.Errorf("summary: %v", sum)
	}
}

func TestBenchBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "--scenario", "nope"},
		{"bench", "--rounds", "0"},
		{"bench", "--connections", "0"},
		{"bench", "--duration", "1ms"},
		{"bench", "extra"},
		{"bench", "--no-such-flag"},
		{"bench", "--nodes", "1,x"},
		{"bench", "--nodes", "0", "--database", "postgres://127.0.0.1:1/x"},
		{"bench", "--nodes", "1,2"}, // not on PostgreSQL
		{"bench", "--scenario", "keys", "--nodes", "1", "--database", "postgres://127.0.0.1:1/x"},
		{"bench", "--tenants", "1"},
		{"bench", "--loadgen", "ab"},
		{"bench", "--loadgen", "wrk"}, // keys: wrk measures send only
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, benchNoEnv, &stdout, &stderr)
		if err == nil {
			t.Errorf("%v: succeeded", args)
		}
		if err != nil && (strings.Contains(err.Error(), "\n") || stdout.Len()+stderr.Len() != 0) {
			t.Errorf("%v: want one line saying what is wrong, got %v; printed %s%s", args, err, stdout.String(), stderr.String())
		}
	}
	// --help lists the flags but not the hidden profiling one, and exits 0.
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"bench", "--help"}, benchNoEnv, &stdout, &bytes.Buffer{}); err != nil {
		t.Errorf("bench --help: %v", err)
	}
	if help := stdout.String(); !strings.Contains(help, "-connections") || !strings.Contains(help, "-nodes string") || !strings.Contains(help, "-loadgen string") || strings.Contains(help, "cpuprofile") {
		t.Errorf("help:\n%s", help)
	}
}
