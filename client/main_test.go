package client_test

// The tests run the client against the real server. TestMain builds
// cmd/switchboard from the repository this module lives in (the directory
// above), starts `switchboard serve` on a free port over a fresh SQLite
// database, and makes tenants with `switchboard tenant create`, as an
// operator would. The server is a program the tests run, not code they
// import: this module needs nothing but the standard library
// (TestStandardLibraryOnly).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/client"
)

// testServer is the server every test of the package shares; each test
// makes tenants of its own.
var testServer struct {
	URL      string
	bin      string // the switchboard binary
	database string // its --database
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "switchboard-client-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testServer.bin = filepath.Join(dir, "switchboard")
	testServer.database = "sqlite:" + filepath.Join(dir, "switchboard.db")
	if err := buildServer(testServer.bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	srv, logs, err := startServer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		srv.Process.Signal(os.Interrupt)
		if err := srv.Wait(); err != nil {
			fmt.Fprintf(os.Stderr, "server stopped with error: %v\n%s", err, logs.String())
		}
	}()

	// The examples read the server and a test key from the environment,
	// as a program of a user would.
	tn, err := createTenant(context.Background(), "Examples", "scale")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("SWITCHBOARD_URL", testServer.URL)
	os.Setenv("SWITCHBOARD_KEY", tn.Test)
	os.Setenv("SWITCHBOARD_LIVE_KEY", tn.Live)
	return m.Run()
}

// buildServer builds the repository's cmd/switchboard into bin.
func buildServer(bin string) error {
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	if mod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !bytes.HasPrefix(mod, []byte("module github.com/switchboard/switchboard\n")) {
		return fmt.Errorf("the tests run the server of the repository around this module, and %s holds none", root)
	}
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/switchboard")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the server: %v\n%s", err, out)
	}
	return nil
}

// serverEnv is this process's environment without the SWITCHBOARD_
// variables, which the server would read as flags.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHBOARD_") {
			env = append(env, kv)
		}
	}
	return env
}

// startServer starts `switchboard serve` and returns once it listens, with
// its URL in testServer.URL; logs keeps what it writes.
func startServer(dir string) (*exec.Cmd, *lockedBuffer, error) {
	cmd := exec.Command(testServer.bin, "serve", "--addr", "127.0.0.1:0", "--database", testServer.database, "--allow-private-webhooks")
	cmd.Dir = dir
	cmd.Env = serverEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	logs := &lockedBuffer{}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Bytes()
			logs.Write(append(line, '\n'))
			var l struct{ Msg, Addr string }
			if !sent && json.Unmarshal(line, &l) == nil && l.Msg == "listening" && l.Addr != "" {
				addr <- l.Addr
				sent = true
			}
		}
		io.Copy(io.Discard, stderr)
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			cmd.Wait()
			return nil, nil, fmt.Errorf("the server stopped before it listened:\n%s", logs.String())
		}
		testServer.URL = "http://" + a
		return cmd, logs, nil
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, nil, fmt.Errorf("the server did not listen within 60s:\n%s", logs.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tenant is a tenant made for a test, as `switchboard tenant create`
// makes one: a live and a test key and a simulated phone.
type tenant struct {
	ID          string
	Live, Test  string
	PhoneID     string
	PhoneNumber string
}

// createTenant runs `switchboard tenant create` against the server's
// database.
func createTenant(ctx context.Context, name, plan string) (*tenant, error) {
	cmd := exec.CommandContext(ctx, testServer.bin, "tenant", "create", "--name", name, "--plan", plan, "--database", testServer.database)
	cmd.Env = serverEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("switchboard tenant create: %v\n%s", err, stderr.String())
	}
	var nt struct {
		TenantID string `json:"tenant_id"`
		LiveKey  string `json:"live_key"`
		TestKey  string `json:"test_key"`
		Phone    struct{ ID, Number string }
	}
	if err := json.Unmarshal(out, &nt); err != nil {
		return nil, fmt.Errorf("switchboard tenant create printed %q: %v", out, err)
	}
	if nt.TenantID == "" || nt.LiveKey == "" || nt.TestKey == "" || nt.Phone.ID == "" {
		return nil, errors.New("switchboard tenant create printed " + string(out))
	}
	return &tenant{ID: nt.TenantID, Live: nt.LiveKey, Test: nt.TestKey, PhoneID: nt.Phone.ID, PhoneNumber: nt.Phone.Number}, nil
}

// newTenant makes a tenant on the Scale plan (no per-key rate limit, so
// that a test's many calls are never throttled).
func newTenant(t testing.TB) *tenant {
	t.Helper()
	tn, err := createTenant(context.Background(), "Test Co", "scale")
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// newClient returns a client of the test server with key.
func newClient(t testing.TB, key string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(testServer.URL, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds or within has passed.
func waitFor(t testing.TB, within time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// collect drains an iterator.
func collect[T any](t testing.TB, seq func(func(*T, error) bool)) []*T {
	t.Helper()
	var out []*T
	for it, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	return out
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
