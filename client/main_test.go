package client_test

// The tests run the client against the real server, started in-process
// with server.Run on a random port over a fresh SQLite database, as the
// end-to-end tests of cmd/switchboard do. The server and its database are
// test-only imports: the client package itself imports neither
// (TestStandardLibraryOnly).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/client"
	"github.com/switchboard/switchboard/ops"
	"github.com/switchboard/switchboard/server"
	"github.com/switchboard/switchboard/sqlstore"
)

// testServer is the server every test of the package shares; each test
// makes tenants of its own.
var testServer struct {
	URL string
	db  *sqlstore.DB
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
	dbURL := "sqlite:" + filepath.Join(dir, "switchboard.db")

	ctx, cancel := context.WithCancel(context.Background())
	logs := &listenWatcher{addr: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{Addr: "127.0.0.1:0", Database: dbURL, Log: logs, AllowPrivateWebhooks: true})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "server stopped with error:", err)
		}
	}()
	select {
	case addr := <-logs.addr:
		testServer.URL = "http://" + addr
	case err := <-done:
		done <- err
		fmt.Fprintf(os.Stderr, "server did not start: %v\n%s", err, logs.String())
		return 1
	case <-time.After(60 * time.Second):
		fmt.Fprintf(os.Stderr, "server did not start within 60s\n%s", logs.String())
		return 1
	}
	testServer.db, err = sqlstore.Open(ctx, dbURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testServer.db.Close()

	// The examples read the server and a test key from the environment,
	// as a program of a user would.
	tn, err := createTenant(ctx, "Examples", "scale")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("SWITCHBOARD_URL", testServer.URL)
	os.Setenv("SWITCHBOARD_KEY", tn.Test)
	os.Setenv("SWITCHBOARD_LIVE_KEY", tn.Live)
	return m.Run()
}

// listenWatcher keeps the server's log lines and reports the address of
// its "listening" line.
type listenWatcher struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	addr chan string
	sent bool
}

func (w *listenWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent && bytes.Contains(p, []byte(`"msg":"listening"`)) {
		var l struct{ Addr string }
		if json.Unmarshal(p, &l) == nil && l.Addr != "" {
			w.addr <- l.Addr
			w.sent = true
		}
	}
	return len(p), nil
}

func (w *listenWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// tenant is a tenant made for a test, as `switchboard tenant create`
// makes one: a live and a test key and a simulated phone.
type tenant struct {
	ID          string
	Live, Test  string
	PhoneID     string
	PhoneNumber string
}

// createTenant does what `switchboard tenant create` does, against the
// server's database.
func createTenant(ctx context.Context, name, plan string) (*tenant, error) {
	nt, err := ops.CreateTenant(ctx, testServer.db, name, plan)
	if err != nil {
		return nil, err
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
