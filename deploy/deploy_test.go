// Package deploy holds what an operator installs: the systemd units, the
// Dockerfile and the compose file. Its tests check them: systemd-analyze
// verifies the units (where systemd-analyze exists), and the Dockerfile's
// build command, run here as the image would run it, builds the server the
// end-to-end tests test. No image is built: that needs a Docker daemon.
package deploy

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oasdiff/yaml"
)

// unit parses a systemd unit file into its sections' settings (a setting
// given twice keeps both values).
func unit(t *testing.T, name string) map[string]map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: not a setting: %q", name, line)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

// TestSystemdUnit: the service runs as its own user with its state
// directory, the hardening it promises, and the database in that
// directory; systemd-analyze finds nothing wrong with the units.
func TestSystemdUnit(t *testing.T) {
	svc := unit(t, "switchboard.service")["Service"]
	for key, want := range map[string]string{
		"User":                  "switchboard",
		"Group":                 "switchboard",
		"ExecStart":             "/usr/local/bin/switchboard serve",
		"StateDirectory":        "switchboard",
		"StateDirectoryMode":    "0700",
		"WorkingDirectory":      "/var/lib/switchboard",
		"NoNewPrivileges":       "yes",
		"ProtectSystem":         "strict",
		"ProtectHome":           "yes",
		"PrivateTmp":            "yes",
		"AmbientCapabilities":   "CAP_NET_BIND_SERVICE",
		"CapabilityBoundingSet": "CAP_NET_BIND_SERVICE",
		"EnvironmentFile":       "/etc/switchboard/switchboard.env",
		"Environment":           "SWITCHBOARD_DATABASE=sqlite:/var/lib/switchboard/switchboard.db",
		"UMask":                 "0077",
	} {
		if got := svc[key]; len(got) != 1 || got[0] != want {
			t.Errorf("switchboard.service: %s=%v, want %s", key, got, want)
		}
	}
	backup := unit(t, "switchboard-backup.service")["Service"]
	if got := strings.Join(backup["ExecStart"], " "); !strings.Contains(got, "/usr/local/bin/switchboard backup --to /var/lib/switchboard/backups/") {
		t.Errorf("switchboard-backup.service: ExecStart=%s", got)
	}
	if got := backup["Environment"]; len(got) != 1 || got[0] != svc["Environment"][0] {
		t.Errorf("switchboard-backup.service backs up %v, the service serves %v", got, svc["Environment"])
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the units are not verified")
	}
	// verify checks that each command exists: the binary is not installed
	// here, so the copies run this test's executable instead.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var files []string
	for _, name := range []string{"switchboard.service", "switchboard-backup.service", "switchboard-backup.timer"} {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(raw), "/usr/local/bin/switchboard", self)), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	// It reports most problems (an unknown setting, a bad value) on
	// stderr and still exits 0: any output fails the test.
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, files...)...).CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=true", files[0]).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for switchboard.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Logf("systemd-analyze security --offline is not available here (%v): exposure not checked", err)
		return
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2.0 {
		t.Errorf("systemd-analyze security rates switchboard.service's exposure %.1f, want at most 2.0:\n%s", level, out)
	}
}

// dockerBuild is the Dockerfile's build stage: its Go image and the
// command that builds the binary.
type dockerBuild struct {
	goImage string   // "golang:1.26-bookworm"
	env     []string // CGO_ENABLED=1
	args    []string // go build ... (shell words, quotes removed)
	out     string   // the -o file
}

// parseDockerfile reads the Dockerfile's build stage and checks the final
// stage: the binary copied from the build stage, a non-root user, the
// database in the volume.
func parseDockerfile(t *testing.T) dockerBuild {
	t.Helper()
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines.
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	var b dockerBuild
	var copied, user, volume, dbEnv string
	args := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "FROM":
			if len(f) == 4 && f[2] == "AS" && f[3] == "build" {
				b.goImage = f[1]
			}
		case "ARG":
			k, v, _ := strings.Cut(f[1], "=")
			args[k] = v
		case "RUN":
			if !strings.Contains(line, "go build") {
				continue
			}
			words := shellWords(t, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "RUN")))
			for len(words) > 0 && strings.Contains(words[0], "=") {
				b.env = append(b.env, words[0])
				words = words[1:]
			}
			b.args = words
		case "COPY":
			if f[1] == "--from=build" {
				copied = strings.Join(f[2:], " ")
			}
		case "USER":
			user = f[1]
		case "VOLUME":
			volume = strings.Trim(strings.Join(f[1:], " "), `[]"`)
		case "ENV":
			for _, w := range f[1:] {
				if v, ok := strings.CutPrefix(w, "SWITCHBOARD_DATABASE="); ok {
					dbEnv = v
				}
			}
		}
	}
	if len(b.args) < 2 || b.args[0] != "go" || b.args[1] != "build" {
		t.Fatalf("Dockerfile: no `go build` command in the build stage")
	}
	for i, a := range b.args {
		if a == "-o" && i+1 < len(b.args) {
			b.out = b.args[i+1]
		}
	}
	if copied != b.out+" /usr/local/bin/switchboard" {
		t.Errorf("Dockerfile: the final stage copies %q, want %s to /usr/local/bin/switchboard", copied, b.out)
	}
	if user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") {
		t.Errorf("Dockerfile: USER %q; the image must not run as root", user)
	}
	if volume != "/var/lib/switchboard" || !strings.HasPrefix(dbEnv, "sqlite:"+volume+"/") {
		t.Errorf("Dockerfile: volume %q, database %q: the database must be in the volume", volume, dbEnv)
	}
	// The build's ${VERSION} comes from its ARG.
	for i, a := range b.args {
		b.args[i] = os.Expand(a, func(k string) string { return args[k] })
	}
	return b
}

// shellWords splits a command line as sh would for the quoting the
// Dockerfile uses (plain words and "double-quoted" ones).
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case r == '\'' || r == '&' || r == ';' || r == '|':
			if !quoted {
				t.Fatalf("Dockerfile: the go build line %q uses shell syntax this test does not follow", s)
			}
			w.WriteRune(r)
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// TestDockerfileBuildsTheTestedBinary runs the Dockerfile's build command
// here, as its build stage would (Go of the same minor version, the same
// flags, the same package: the one the end-to-end tests run in-process),
// and starts the binary it makes: its version is the build argument's,
// and it serves.
func TestDockerfileBuildsTheTestedBinary(t *testing.T) {
	b := parseDockerfile(t)
	goMod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	if goVersion == nil || !strings.HasPrefix(b.goImage, "golang:"+string(goVersion[1])+"-") {
		t.Errorf("Dockerfile builds with %s; go.mod asks for Go %s", b.goImage, goVersion[1])
	}
	if !strings.Contains(strings.Join(b.env, " "), "CGO_ENABLED=1") {
		t.Errorf("Dockerfile builds with %v: SQLite's driver needs CGO_ENABLED=1", b.env)
	}
	if pkg := b.args[len(b.args)-1]; pkg != "./cmd/switchboard" {
		t.Errorf("Dockerfile builds %s, want ./cmd/switchboard (the command the tests run)", pkg)
	}
	const version = "v9.8.7-dockerfile-test"
	bin := filepath.Join(t.TempDir(), "switchboard")
	args := append([]string(nil), b.args[1:]...)
	for i, a := range args {
		switch {
		case a == b.out:
			args[i] = bin
		case strings.Contains(a, "buildinfo.version=(devel)"):
			args[i] = strings.Replace(a, "buildinfo.version=(devel)", "buildinfo.version="+version, 1)
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), b.env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("the Dockerfile's go build took %v here", time.Since(start).Round(time.Second))

	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "switchboard "+version+"\n") {
		t.Errorf("the built binary's version: %v\n%s", err, out)
	}

	// It serves (cgo SQLite included) and stops cleanly on SIGTERM.
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "switchboard.db")
	if out, err := exec.Command(bin, "tenant", "create", "--name", "Docker", "--database", db).CombinedOutput(); err != nil {
		t.Fatalf("tenant create: %v\n%s", err, out)
	}
	srv := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--database", db)
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "listening" {
				addr <- l.Addr
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		res, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + a + "/healthz")
		if err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("GET /healthz: %v %v", res, err)
		}
		if res != nil {
			res.Body.Close()
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the built binary did not listen within 60 s")
	}
	srv.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("serve did not stop within 30 s of SIGTERM")
	}

	// The settings the deploy files give are flags serve knows.
	help, err := exec.Command(bin, "serve", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"switchboard.env", "compose.yaml", "Dockerfile", "switchboard.service"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range regexp.MustCompile(`SWITCHBOARD_[A-Z0-9_]+`).FindAllString(string(raw), -1) {
			if name == "SWITCHBOARD_VERSION" || name == "SWITCHBOARD_DOMAIN" { // compose's own variables
				continue
			}
			if !strings.Contains(string(help), "(env "+name+")") && !strings.Contains(string(help), "(env "+name+",") {
				t.Errorf("%s sets %s, which is no flag of serve", file, name)
			}
		}
	}
}

// TestCompose: two nodes of the Dockerfile's image on the compose file's
// PostgreSQL, behind a proxy that reaches both on the port they listen on.
func TestCompose(t *testing.T) {
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	var c struct {
		Services map[string]struct {
			Build *struct {
				Context, Dockerfile string
			}
			Image       string
			Command     []string
			Environment map[string]string
			DependsOn   json.RawMessage `json:"depends_on"`
			Ports       []string
		}
		Volumes map[string]any
	}
	if err := json.Unmarshal(js, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	pg, ok := c.Services["postgres"]
	if !ok || !strings.HasPrefix(pg.Image, "postgres:") {
		t.Fatalf("compose.yaml: no postgres service")
	}
	var nodes []string
	for name, s := range c.Services {
		if s.Build == nil {
			continue
		}
		nodes = append(nodes, name)
		if s.Build.Context != ".." || s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("%s builds %+v, want the Dockerfile from the repository's root", name, *s.Build)
		}
		db := s.Environment["SWITCHBOARD_DATABASE"]
		if !strings.HasPrefix(db, "postgres://") || !strings.Contains(db, "@postgres:5432/"+pg.Environment["POSTGRES_DB"]+"?") {
			t.Errorf("%s: SWITCHBOARD_DATABASE=%s, not the postgres service's database", name, db)
		}
		var deps map[string]struct{ Condition string }
		if json.Unmarshal(s.DependsOn, &deps); deps["postgres"].Condition != "service_healthy" {
			t.Errorf("%s starts before PostgreSQL is ready", name)
		}
		if s.Environment["SWITCHBOARD_ADDR"] != ":8080" {
			t.Errorf("%s listens on %q", name, s.Environment["SWITCHBOARD_ADDR"])
		}
	}
	if len(nodes) != 2 {
		t.Errorf("compose.yaml runs %d nodes (%v), want 2", len(nodes), nodes)
	}
	proxy := strings.Join(c.Services["caddy"].Command, " ")
	for _, n := range nodes {
		if !strings.Contains(proxy, "--to "+n+":8080") {
			t.Errorf("the proxy (%s) does not reach %s", proxy, n)
		}
	}
	if _, err := os.Stat("compose.env.example"); err != nil {
		t.Error(err)
	}
}
