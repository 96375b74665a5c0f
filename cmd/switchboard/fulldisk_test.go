package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard/switchboard/provider/simulator"
)

// TestFullDiskLosesNothing runs the server on a small tmpfs, fills the
// disk under it, and checks that sends are refused (never answered 202
// without being stored) while it is full, that the server recovers when
// space comes back, and that every message that got a 202 is delivered.
// It needs to mount a tmpfs (root); elsewhere it skips, saying why.
func TestFullDiskLosesNothing(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })

	db := "sqlite:" + filepath.Join(dir, "switchboard.db")
	tn := newTenant(t, db, "--plan", "scale")
	s := startServer(t, db)

	accepted := map[string]bool{}
	send := func(i int) int {
		r := s.do(t, "POST", "/v1/messages", tn.Live, map[string]any{"to": simulator.SMSOnlyNumber, "body": fmt.Sprintf("full disk %d %0200d", i, i)})
		if r.Status == http.StatusAccepted {
			accepted[r.Data()["message_id"].(string)] = true
		} else if r.Status != http.StatusInternalServerError {
			t.Fatalf("send while filling the disk: %d %s", r.Status, r.Raw)
		}
		return r.Status
	}
	for i := 0; i < 20; i++ {
		if st := send(i); st != http.StatusAccepted {
			t.Fatalf("send before the disk is full: %d", st)
		}
	}

	// Fill the disk, leaving a little room, then send until sends fail.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	refused := 0
	for i := 0; i < 2000 && refused < 5; i++ {
		if send(1000+i) != http.StatusAccepted {
			refused++
		}
	}
	if refused == 0 {
		t.Fatalf("the disk never filled up")
	}
	t.Logf("disk full: %d sends accepted in all, %d refused with 500", len(accepted), refused)

	// Free the space: the server recovers without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "sends accepted again after space is freed", func() bool {
		return send(5000) == http.StatusAccepted
	})
	eventually(t, 60*time.Second, "every accepted message delivered", func() bool {
		for id := range accepted {
			r := s.do(t, "GET", "/v1/messages/"+id, tn.Live, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("accepted message %s: %d %s", id, r.Status, r.Raw)
			}
			if r.Data()["status"] != "delivered" {
				return false
			}
		}
		return true
	})
}
