package main

// switchboard backup and restore: a consistent copy of a live SQLite
// database, taken while serve accepts and sends, put back into a fresh
// server.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/sqlstore"
)

// TestBackupUnderLoad: a backup taken while sends pour in holds every
// message accepted (202) before the backup began; restored into a fresh
// database, a new server lists them all, and delivers what was queued.
func TestBackupUnderLoad(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	s := startServer(t, db)
	tn := newTenant(t, db, "--plan", "scale")

	var mu sync.Mutex
	var accepted []string
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				id, status, err := postSend(client, s.URL, tn.Live, fmt.Sprintf(`{"to":"+15005550000","body":"backup %d/%d"}`, w, i))
				if err != nil || status != http.StatusAccepted {
					if ctx.Err() == nil {
						t.Errorf("send: %d %v", status, err)
					}
					return
				}
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
			}
		})
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted)
	}
	eventually(t, 60*time.Second, "300 accepted sends", func() bool { return count() >= 300 })

	mu.Lock()
	before := append([]string(nil), accepted...)
	mu.Unlock()
	file := filepath.Join(t.TempDir(), "backup.db")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"backup", "--to", file, "--database", db}, noEnv, &out, &out); err != nil {
		t.Fatalf("backup: %v\n%s", err, out.String())
	}
	during := count() - len(before)
	// The load goes on after the backup: it did not stop the server.
	eventually(t, 30*time.Second, "sends accepted after the backup", func() bool { return count() >= len(before)+during+20 })
	stop()
	wg.Wait()

	var info sqlstore.BackupInfo
	if err := json.Unmarshal(out.Bytes(), &info); err != nil || info.File != file || info.Bytes == 0 || info.SchemaVersion != sqlstore.SchemaVersion() ||
		info.Messages < int64(len(before)) {
		t.Fatalf("backup printed %q (%v); want the file, its size, schema %d and at least %d messages", out.String(), err, sqlstore.SchemaVersion(), len(before))
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 || st.Size() != info.Bytes {
		t.Errorf("the backup file: %v, %v", st, err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(file + suffix); err == nil {
			t.Errorf("the backup left %s beside it: it is not one file", filepath.Base(file+suffix))
		}
	}
	t.Logf("backup of %d bytes in %d ms holding %d messages; %d sends accepted before it began, %d while it ran, %d in all",
		info.Bytes, info.TookMS, info.Messages, len(before), during, count())

	// Restore into a fresh database and serve it.
	fresh := sqliteURL(t)
	cli(t, fresh, "restore", "--from", file)
	s2 := startServer(t, fresh)
	listed := map[string]string{}
	eventually(t, 60*time.Second, "every restored message delivered", func() bool {
		clear(listed)
		for path := "/v1/messages?limit=100"; path != ""; {
			r := s2.do(t, "GET", path, tn.Live, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("list: %d %s", r.Status, r.Raw)
			}
			for _, m := range r.List() {
				listed[m["id"].(string)] = m["status"].(string)
			}
			path = nextLink(r.Header.Get("Link"))
		}
		for _, id := range before {
			if listed[id] != "delivered" {
				return false
			}
		}
		return true
	})
	if int64(len(listed)) != info.Messages {
		t.Errorf("the restored server lists %d messages, the backup said it held %d", len(listed), info.Messages)
	}
}

// TestRestoreRefuses: restore checks the backup before it replaces
// anything, refuses while serve runs on the database, and replaces an
// existing database only when told; backup refuses PostgreSQL, pointing at
// pg_dump.
func TestRestoreRefuses(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	tn := newTenant(t, db)
	file := filepath.Join(t.TempDir(), "backup.db")
	cli(t, db, "backup", "--to", file)

	junk := filepath.Join(t.TempDir(), "junk.db")
	os.WriteFile(junk, []byte("not a database"), 0o600)
	wantCLIError(t, sqliteURL(t), "not a SQLite database", "restore", "--from", junk)
	wantCLIError(t, sqliteURL(t), "no such file", "restore", "--from", filepath.Join(t.TempDir(), "missing.db"))
	wantCLIError(t, db, "already holds a Switchboard database", "restore", "--from", file)
	wantCLIError(t, db, "--from is required", "restore")
	wantCLIError(t, db, "--to is required", "backup")
	wantCLIError(t, "postgres://127.0.0.1:1/x", "for PostgreSQL use pg_dump", "backup", "--to", file)

	// Serve running on the database: restore stops before changing it.
	s := startServer(t, db)
	_, _, err := runCLI(db, "restore", "--from", file, "--force")
	var locked *sqlstore.LockedError
	if !errors.As(err, &locked) {
		t.Errorf("restore while serve runs: %v", err)
	}
	if r := s.do(t, "GET", "/v1/api-keys", tn.Live, nil); r.Status != http.StatusOK {
		t.Errorf("serve after the refused restore: %d %s", r.Status, r.Raw)
	}
	s.stop()

	// Stopped: --force replaces the database with the backup, which has
	// no tenant made after it.
	later := newTenant(t, db)
	cli(t, db, "restore", "--from", file, "--force")
	out := cli(t, db, "tenant", "list")
	if !strings.Contains(out, tn.ID) || strings.Contains(out, later.ID) {
		t.Errorf("after restoring a backup taken before the second tenant: %s", out)
	}
}
