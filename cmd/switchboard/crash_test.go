package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard/switchboard/provider/simulator"
	"github.com/switchboard/switchboard/sqlstore"
)

// buildBinary builds the switchboard binary once per test run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "switchboard-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "switchboard")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// process is `switchboard serve` running as a child process, so that it
// can be killed with SIGKILL.
type process struct {
	cmd  *exec.Cmd
	URL  string
	logs *syncBuffer
}

func startProcess(t *testing.T, dbURL string, extra ...string) *process {
	t.Helper()
	return startProcessEnv(t, dbURL, nil, extra...)
}

// startProcessEnv is startProcess with env ("NAME=value") added to the
// process's environment.
func startProcessEnv(t *testing.T, dbURL string, env []string, extra ...string) *process {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--database", dbURL}, extra...)
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, logs: &syncBuffer{}}
	t.Cleanup(func() { p.kill() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			p.logs.Write([]byte(sc.Text() + "\n"))
			if !sent && strings.Contains(sc.Text(), `"msg":"listening"`) {
				var l struct{ Addr string }
				json.Unmarshal(sc.Bytes(), &l)
				addr <- l.Addr
				sent = true
			}
		}
	}()
	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("process did not start\n%s", p.logs.String())
	}
	return p
}

func (p *process) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// TestCrashLosesNoAcceptedMessage sends concurrently, kills the server with
// SIGKILL in the middle of the load, starts it again on the same database,
// and checks that every message that got a 202 reaches its final status:
// delivered, or failed for the failing magic number.
func TestCrashLosesNoAcceptedMessage(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		tn := newTenant(t, db, "--plan", "scale")
		// A short lease: on PostgreSQL the restarted node waits out the
		// leases of the node that died (on SQLite they are released at once).
		lease := []string{"--delivery-lease", "2s"}
		p := startProcess(t, db, lease...)

		var mu sync.Mutex
		accepted := map[string]string{} // message id -> recipient
		var sent, refused atomic.Int64
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		client := &http.Client{Timeout: 10 * time.Second}
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					// Magic numbers are never in quiet hours, so every
					// message is due at once.
					to := "+15005550000"
					switch {
					case i%10 == 3:
						to = simulator.FailNumber
					case i%2 == 0:
						to = simulator.SMSOnlyNumber
					}
					body := fmt.Sprintf(`{"to":%q,"body":"crash test %d/%d"}`, to, w, i)
					id, status, err := postSend(client, p.URL, tn.Live, body)
					sent.Add(1)
					if err != nil {
						refused.Add(1)
						if ctx.Err() == nil {
							time.Sleep(5 * time.Millisecond)
						}
						continue
					}
					if status == http.StatusAccepted {
						mu.Lock()
						accepted[id] = to
						mu.Unlock()
					}
				}
			})
		}
		// Kill once a good number of sends were accepted.
		eventually(t, 60*time.Second, "accepted sends before the kill", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(accepted) >= 1500
		})
		p.kill()
		time.Sleep(200 * time.Millisecond) // let in-flight clients see the dead server
		stop()
		wg.Wait()
		mu.Lock()
		n := len(accepted)
		mu.Unlock()
		t.Logf("%d sends attempted, %d accepted (202) before SIGKILL, %d refused", sent.Load(), n, refused.Load())

		p2 := startProcess(t, db, lease...)
		s := &server{t: t, URL: p2.URL}
		final := map[string]string{}
		eventually(t, 90*time.Second, "every accepted message final after restart", func() bool {
			for _, status := range []string{"delivered", "failed"} {
				path := "/v1/messages?limit=100&status=" + status
				for path != "" {
					r := s.do(t, "GET", path, tn.Live, nil)
					if r.Status != http.StatusOK {
						t.Fatalf("list: %d %s", r.Status, r.Raw)
					}
					for _, m := range r.List() {
						final[m["id"].(string)] = m["status"].(string)
					}
					path = nextLink(r.Header.Get("Link"))
				}
			}
			for id := range accepted {
				if _, ok := final[id]; !ok {
					return false
				}
			}
			return true
		})
		for id, to := range accepted {
			want := "delivered"
			if to == simulator.FailNumber {
				want = "failed"
			}
			if final[id] != want {
				t.Errorf("message %s to %s ended %s, want %s", id, to, final[id], want)
			}
		}
		p2.kill()

		// Report hand-offs repeated across the crash: the provider got the
		// same message id twice (it can deduplicate by it).
		store, err := sqlstore.Open(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		dups, err := store.RepeatedHandoffs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d of %d accepted messages lost: 0; handed to the provider more than once across the crash: %d", n, n, dups)
	})
}

// nextLink returns the target of a Link rel="next" header, or "".
func nextLink(h string) string {
	if h == "" {
		return ""
	}
	start, end := strings.Index(h, "<"), strings.Index(h, ">")
	if start < 0 || end < start || !bytes.Contains([]byte(h), []byte(`rel="next"`)) {
		return ""
	}
	return h[start+1 : end]
}

// postSend posts a send to a child process's API with key and returns the
// message id of its answer and the status; err is the request's failure
// (the process killed under it, for one).
func postSend(client *http.Client, url, key, body string) (id string, status int, err error) {
	req, err := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(body))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	var out struct {
		Data struct {
			MessageID string `json:"message_id"`
		} `json:"data"`
	}
	json.NewDecoder(res.Body).Decode(&out)
	return out.Data.MessageID, res.StatusCode, nil
}
