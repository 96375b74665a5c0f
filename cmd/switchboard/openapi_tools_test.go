package main

// The OpenAPI document in the tools people build clients with: the document
// a running server serves is linted by Redocly CLI, turned into a Go client by
// oapi-codegen that a program uses against the same server, and into
// TypeScript types by openapi-typescript that a script is type-checked
// against. The npm tools are pinned in tools/openapi/package.json and
// package-lock.json and installed by `npm ci` (.ci/run does it); oapi-codegen
// is pinned below and comes from the Go module proxy.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// oapiCodegen is the generator the Go client is made with, pinned.
const oapiCodegen = "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2"

// toolsDir is tools/openapi, from this package's directory.
var toolsDir = filepath.Join("..", "..", "tools", "openapi")

// TestOpenAPITools runs the checks on the document the server serves. The
// Go client check needs only Go; the npm checks need Node and `npm ci` in
// tools/openapi, and are skipped, saying so, without them, except in CI (the
// CI variable set), where they must run.
func TestOpenAPITools(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(toolsDir)
	if err != nil {
		t.Fatal(err)
	}
	db := sqliteURL(t)
	s := startServer(t, db)
	tn := newTenant(t, db)

	res, err := httpClient.Get(s.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %v", res.StatusCode, err)
	}
	// Indented, so that the tools' messages point at readable lines.
	var doc bytes.Buffer
	if err := json.Indent(&doc, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	docPath := filepath.Join(dir, "build", "openapi.json")
	if err := os.WriteFile(docPath, doc.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("oapi-codegen Go client", func(t *testing.T) {
		gc := filepath.Join(dir, "goclient")
		if err := os.RemoveAll(filepath.Join(gc, "sbclient")); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(gc, "sbclient"), 0o755); err != nil {
			t.Fatal(err)
		}
		goEnv := []string{"GOWORK=off"}
		runTool(t, gc, goEnv, 5*time.Minute, "go", "run", oapiCodegen, "-config", "oapi-codegen.yaml", docPath)
		bin := filepath.Join(t.TempDir(), "goclient")
		runTool(t, gc, goEnv, 5*time.Minute, "go", "build", "-mod=readonly", "-o", bin, ".")
		out := runTool(t, gc, append(goEnv, "SWITCHBOARD_URL="+s.URL, "SWITCHBOARD_KEY="+tn.Test), 2*time.Minute, bin)
		t.Log(strings.TrimSpace(out))
	})

	t.Run("Redocly lint", func(t *testing.T) {
		needNPMTools(t, dir)
		// It exits non-zero on errors; the report says which.
		out, lintErr := tool(dir, []string{"REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true"}, 2*time.Minute,
			filepath.Join(dir, "node_modules", ".bin", "redocly"), "lint", "--config", "redocly.yaml", "--format=json", "build/openapi.json")
		var report struct {
			Totals   struct{ Errors, Warnings, Ignored int }
			Problems []struct {
				RuleID   string `json:"ruleId"`
				Severity string
				Message  string
				Location []struct{ Pointer string }
			}
		}
		if err := json.Unmarshal([]byte(jsonPart(out)), &report); err != nil {
			t.Fatalf("redocly's report: %v (redocly: %v)\n%s", err, lintErr, out)
		}
		if lintErr != nil && len(report.Problems) == 0 {
			t.Errorf("redocly lint: %v", lintErr)
		}
		for _, p := range report.Problems {
			at := ""
			if len(p.Location) > 0 {
				at = p.Location[0].Pointer
			}
			t.Errorf("redocly %s %s at %s: %s", p.Severity, p.RuleID, at, p.Message)
		}
		if report.Totals.Errors+report.Totals.Warnings != len(report.Problems) {
			t.Errorf("redocly counts %d errors and %d warnings", report.Totals.Errors, report.Totals.Warnings)
		}
		// Every accepted problem is still there: an entry of the ignore
		// file that matches nothing any more is to be removed.
		ignore, err := os.ReadFile(filepath.Join(dir, ".redocly.lint-ignore.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(regexp.MustCompile(`(?m)^\s+- '#/`).FindAll(ignore, -1)); n != report.Totals.Ignored {
			t.Errorf(".redocly.lint-ignore.yaml accepts %d problems, redocly ignored %d: remove the entries that no longer match", n, report.Totals.Ignored)
		}
	})

	t.Run("openapi-typescript and tsc", func(t *testing.T) {
		needNPMTools(t, dir)
		// Run where no redocly.yaml is, so that openapi-typescript works
		// with its defaults, as for a user.
		runTool(t, filepath.Join(dir, "build"), nil, 2*time.Minute,
			filepath.Join(dir, "node_modules", ".bin", "openapi-typescript"), "openapi.json", "-o", "schema.d.ts")
		runTool(t, dir, nil, 2*time.Minute, filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", filepath.Join("ts", "tsconfig.json"))
	})

	t.Run("Redoc bundle is the pinned package's", func(t *testing.T) {
		needNPMTools(t, dir)
		for _, name := range []string{"redoc.standalone.js", "redoc.standalone.js.LICENSE.txt"} {
			committed, err := os.ReadFile(filepath.Join("..", "..", "httpapi", "docs", name))
			if err != nil {
				t.Fatal(err)
			}
			pinned, err := os.ReadFile(filepath.Join(dir, "node_modules", "redoc", "bundles", name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(committed, pinned) {
				t.Errorf("httpapi/docs/%s differs from the redoc package of tools/openapi/package-lock.json: copy node_modules/redoc/bundles/%s", name, name)
			}
		}
	})
}

// needNPMTools skips the test when the npm tools are not installed, unless
// it runs in CI, where they must be.
func needNPMTools(t *testing.T, dir string) {
	t.Helper()
	_, errNode := exec.LookPath("node")
	_, errMods := os.Stat(filepath.Join(dir, "node_modules", ".bin", "redocly"))
	if errNode == nil && errMods == nil {
		return
	}
	why := "node is not installed"
	if errNode == nil {
		why = "tools/openapi/node_modules is missing: run `npm ci --prefix tools/openapi`"
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s, and CI must run this check (.ci/run installs the tools)", why)
	}
	t.Skipf("skipped: %s", why)
}

// runTool runs a command in dir with extra environment variables, fails the
// test with its output when it fails, and returns its standard output.
func runTool(t *testing.T, dir string, env []string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	start := time.Now()
	out, err := tool(dir, env, timeout, name, args...)
	t.Logf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s in %s: %v\nstdout:\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return out
}

// tool runs a command in dir with extra environment variables and returns
// its standard output; the error includes its standard error.
func tool(dir string, env []string, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\nstderr:\n%s", err, stderr.String())
	}
	return stdout.String(), nil
}

// jsonPart returns out from its first "{", past anything a tool printed
// before its JSON report.
func jsonPart(out string) string {
	if i := strings.Index(out, "{"); i >= 0 {
		return out[i:]
	}
	return out
}

// TestAPIReferencePage: GET /docs is the HTML page of the reference, with
// no key and no envelope, and it loads only what the binary serves: Redoc's
// script from /docs and the document from /v1/openapi.json.
func TestAPIReferencePage(t *testing.T) {
	t.Parallel()
	s := startServer(t, sqliteURL(t))
	get := func(path string, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if res.Header.Get("X-Request-Id") == "" {
			t.Errorf("GET %s: no X-Request-Id", path)
		}
		return res, b
	}

	res, page := get("/docs")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /docs: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("GET /docs: Content-Security-Policy %q", csp)
	}
	for _, want := range []string{`<redoc spec-url="/v1/openapi.json"`, `<script src="/docs/redoc.standalone.js"></script>`} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("GET /docs: the page has no %s:\n%s", want, page)
		}
	}
	// Nothing from another host: every src and href is a path of ours.
	for _, m := range regexp.MustCompile(`(?:src|href|spec-url)="([^"]*)"`).FindAllSubmatch(page, -1) {
		if !bytes.HasPrefix(m[1], []byte("/")) || bytes.HasPrefix(m[1], []byte("//")) {
			t.Errorf("GET /docs: the page loads %s from elsewhere", m[1])
		}
	}

	committed, err := os.ReadFile(filepath.Join("..", "..", "httpapi", "docs", "redoc.standalone.js"))
	if err != nil {
		t.Fatal(err)
	}
	// The client asks for gzip and unpacks it.
	res, js := get("/docs/redoc.standalone.js")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") || !bytes.Equal(js, committed) {
		t.Fatalf("GET /docs/redoc.standalone.js: %d %q, %d bytes (want the %d of httpapi/docs)", res.StatusCode, res.Header.Get("Content-Type"), len(js), len(committed))
	}
	if !res.Uncompressed {
		t.Error("GET /docs/redoc.standalone.js was not sent gzipped")
	}
	res, js = get("/docs/redoc.standalone.js", "Accept-Encoding", "identity")
	if res.Header.Get("Content-Encoding") != "" || !bytes.Equal(js, committed) {
		t.Errorf("GET /docs/redoc.standalone.js without gzip: Content-Encoding %q, %d bytes", res.Header.Get("Content-Encoding"), len(js))
	}
	if etag := res.Header.Get("ETag"); etag == "" {
		t.Error("GET /docs/redoc.standalone.js: no ETag")
	} else if res, _ := get("/docs/redoc.standalone.js", "Accept-Encoding", "identity", "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
		t.Errorf("GET /docs/redoc.standalone.js with If-None-Match: %d, want 304", res.StatusCode)
	}
	if res, _ := get("/docs/redoc.standalone.js.LICENSE.txt"); res.StatusCode != http.StatusOK {
		t.Errorf("GET /docs/redoc.standalone.js.LICENSE.txt: %d", res.StatusCode)
	}

	// The page is not the API: other methods are refused as anywhere.
	r := s.do(t, "POST", "/docs", "", nil)
	if r.Status != http.StatusMethodNotAllowed || r.Code() != "METHOD_NOT_ALLOWED" {
		t.Errorf("POST /docs: %d %s", r.Status, r.Raw)
	}
}
