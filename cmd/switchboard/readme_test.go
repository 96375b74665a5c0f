package main

// TestReadme runs the commands of the README and of the API reference
// (docs/api.md, whose examples continue the README's quickstart), so that
// documentation whose examples are executed keeps itself true.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeMarker is the line, just before a ```sh block of a tested file,
// that makes TestReadme run the block.
const readmeMarker = "<!-- readme-test -->"

// readmeFiles are the files TestReadme runs the tested blocks of, in
// order, in one shell, relative to the repository's root.
var readmeFiles = []string{"README.md", "docs/api.md"}

// readmeStep is a run of a tested block's lines: commands, then the shape
// of what they print (the "# ..." lines right under the last command), if
// the file shows one.
type readmeStep struct {
	file    string // the file the step is in
	block   int    // which tested block of the file, from 1
	line    int    // the line of the file the step starts at
	script  string // the commands (and the comments before them)
	shape   string // the documented output, "" when none is shown
	jsonish bool   // the shape is JSON written over several lines
}

// readmeSteps returns the steps of the tested blocks of file, whose text
// is readme, in order.
func readmeSteps(t *testing.T, file, readme string) []readmeStep {
	t.Helper()
	lines := strings.Split(readme, "\n")
	var steps []readmeStep
	blocks := 0
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != readmeMarker {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "```sh" {
			t.Fatalf("%s line %d: %s is not followed by a ```sh block", file, i+1, readmeMarker)
		}
		blocks++
		var cur readmeStep
		var script, shape []string
		prevCommand := false // the previous line is a command (no blank line since)
		flush := func() {
			if len(script) == 0 && len(shape) == 0 {
				return
			}
			cur.script = strings.Join(script, "\n")
			if len(shape) > 0 {
				first := shape[0]
				cur.jsonish = strings.HasPrefix(first, "{") || strings.HasPrefix(first, "[") || regexp.MustCompile(`^[1-5][0-9]{2} [\[{]`).MatchString(first)
				if cur.jsonish {
					for k := range shape {
						shape[k] = strings.TrimSpace(shape[k])
					}
					cur.shape = strings.Join(shape, "")
				} else {
					cur.shape = strings.Join(shape, "\n")
				}
			}
			steps = append(steps, cur)
			script, shape, cur = nil, nil, readmeStep{}
		}
		j := i + 2
		for ; j < len(lines) && lines[j] != "```"; j++ {
			l := lines[j]
			isComment := strings.HasPrefix(strings.TrimSpace(l), "#")
			switch {
			case isComment && (prevCommand || len(shape) > 0):
				// Output: the "# " lines right under a command.
				shape = append(shape, strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(l), "#"), " "))
				prevCommand = false
				continue
			case len(shape) > 0:
				flush()
			}
			if len(script) == 0 {
				cur = readmeStep{file: file, block: blocks, line: j + 1}
			}
			script = append(script, l)
			prevCommand = strings.TrimSpace(l) != "" && !isComment
		}
		flush()
		i = j
	}
	return steps
}

// shapeRE turns a documented output into a regular expression: the text as
// written, "..." standing for anything; a JSON shape may start with the
// HTTP status, which curl -s does not print.
func shapeRE(st readmeStep) *regexp.Regexp {
	shape := st.shape
	if st.jsonish {
		shape = regexp.MustCompile(`^[1-5][0-9]{2} `).ReplaceAllString(shape, "")
	}
	re := strings.ReplaceAll(regexp.QuoteMeta(shape), `\.\.\.`, `.*`)
	return regexp.MustCompile(`(?s)^` + re + `$`)
}

// TestReadme runs the tested blocks (those marked readmeMarker) of the
// README and then of docs/api.md, in order, in one bash shell, as a
// newcomer pasting them would: against the real binary and a real server
// that the commands themselves start, in a directory of their own (with the
// repository's docs). Every step must succeed (the shell runs with set -e)
// and print what the file shows under it. The one liberty taken: the server
// listens on a free port instead of 8080, which other programs may hold.
func TestReadme(t *testing.T) {
	t.Parallel()
	// What the README asks of the reader's machine. Without them the test
	// is skipped, saying so, except in CI (CI set), where it fails.
	for _, tool := range []string{"bash", "curl", "openssl", "grep", "cut", "head", "tr", "cat"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the README's commands need %s, which is not installed", tool)
			}
			t.Skipf("the README's commands need %s, which is not installed", tool)
		}
	}
	var steps []readmeStep
	for _, file := range readmeFiles {
		raw, err := os.ReadFile(filepath.Join("../..", file))
		if err != nil {
			t.Fatal(err)
		}
		fileSteps := readmeSteps(t, file, string(raw))
		if len(fileSteps) < 5 {
			t.Fatalf("only %d steps in the tested blocks of %s", len(fileSteps), file)
		}
		steps = append(steps, fileSteps...)
	}
	shapes := 0
	for _, st := range steps {
		if st.shape != "" {
			shapes++
			shapeRE(st) // compiles
		}
	}
	runDocSteps(t, steps, map[string]string{"127.0.0.1:8080": freeAddr(t)})
	t.Logf("ran %d steps of %s, %d of them checked against the output shown", len(steps), strings.Join(readmeFiles, " and "), shapes)
}

// runDocSteps runs the steps of tested blocks in one bash shell, in a
// directory of their own with the repository's docs, as a reader pasting
// them would, and checks each step's output against the shape shown under
// it. replace maps addresses in the commands to free ones the test chose
// (127.0.0.1:8080, the server's, is also given as SWITCHBOARD_ADDR).
func runDocSteps(t *testing.T, steps []readmeStep, replace map[string]string) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Abs("../../docs")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(docs, filepath.Join(dir, "docs")); err != nil {
		t.Fatal(err)
	}
	addr := replace["127.0.0.1:8080"]

	var script strings.Builder
	// "go build -o switchboard ./cmd/switchboard" is the binary this test
	// run has already built; the shell has no other use for go.
	script.WriteString(`set -e
go() {
  if [ "$*" = "build -o switchboard ./cmd/switchboard" ]; then cp "$README_TEST_BIN" switchboard; return; fi
  echo "TestReadme: the README runs go $*, which the test does not provide" >&2
  return 1
}
`)
	for i, st := range steps {
		text := st.script
		for from, to := range replace {
			text = strings.ReplaceAll(text, from, to)
		}
		script.WriteString(text)
		fmt.Fprintf(&script, "\nprintf '\\n@@readme-step %d@@\\n'\n", i)
	}
	scriptFile := filepath.Join(dir, "readme.sh")
	if err := os.WriteFile(scriptFile, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptFile)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir, "LC_ALL=C",
		"README_TEST_BIN=" + bin, "SWITCHBOARD_ADDR=" + addr}
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	// Its own process group: the server the README starts in the
	// background is ended with it, whatever happens.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the shell left running
	}
	out, _ := os.ReadFile(stdout.Name())

	// Each step's output is what came before its marker.
	outputs := map[int]string{}
	last := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var buf strings.Builder
	marker := regexp.MustCompile(`^@@readme-step ([0-9]+)@@$`)
	for sc.Scan() {
		if m := marker.FindStringSubmatch(sc.Text()); m != nil {
			var n int
			fmt.Sscan(m[1], &n)
			outputs[n] = buf.String()
			buf.Reset()
			last = n + 1
			continue
		}
		buf.WriteString(sc.Text() + "\n")
	}
	serverLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "switchboard.log"))
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		return string(b)
	}
	if runErr != nil || last < len(steps) {
		st := steps[min(last, len(steps)-1)]
		t.Fatalf("the commands stopped at the step of %s line %d (%v):\n%s\n--- it printed:\n%s\n--- stderr:\n%s\n--- server log:\n%s",
			st.file, st.line, runErr, st.script, buf.String(), stderr.String(), serverLog())
	}
	for i, st := range steps {
		if st.shape == "" {
			continue
		}
		got := strings.TrimSpace(outputs[i])
		if !shapeRE(st).MatchString(got) {
			t.Errorf("%s line %d: the commands\n%s\nprinted\n%s\nwhich is not what the file shows:\n%s", st.file, st.line, st.script, got, st.shape)
		}
	}
}

// testCommand matches a line that runs a module's tests.
var testCommand = regexp.MustCompile(`^\(?(cd [a-z/]+ && )?go test -race .*$`)

// TestReadmeTestCommands: the commands the README gives to run the tests
// are the ones CI runs (.ci/run), the server module's and the Go client's.
func TestReadmeTestCommands(t *testing.T) {
	t.Parallel()
	commands := func(path string) []string {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for line := range strings.SplitSeq(string(raw), "\n") {
			if testCommand.MatchString(line) {
				out = append(out, line)
			}
		}
		return out
	}
	readme, ci := commands("../../README.md"), commands("../../.ci/run")
	if len(ci) != 2 || !strings.Contains(ci[1], "cd client && ") {
		t.Fatalf(".ci/run runs %q; want the server module's tests and the client module's", ci)
	}
	if !slices.Equal(readme, ci) {
		t.Errorf("the README's test commands are\n%s\nand .ci/run's\n%s", strings.Join(readme, "\n"), strings.Join(ci, "\n"))
	}
}
