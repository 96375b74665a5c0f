package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCarriersWalkthrough runs the walkthrough of docs/carriers.md (a link
// to the test SMSC, `switchboard smsc`, and a text over it) as a reader
// pasting it would, and checks what it prints, so that it stays true. The
// one liberty taken: the server and the SMSC listen on free ports.
func TestCarriersWalkthrough(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "grep", "cut", "head"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the walkthrough needs %s, which is not installed", tool)
			}
			t.Skipf("the walkthrough needs %s, which is not installed", tool)
		}
	}
	raw, err := os.ReadFile(filepath.Join("../..", "docs/carriers.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := readmeSteps(t, "docs/carriers.md", string(raw))
	if len(steps) < 3 {
		t.Fatalf("only %d steps in the tested blocks of docs/carriers.md", len(steps))
	}
	runDocSteps(t, steps, map[string]string{"127.0.0.1:8080": freeAddr(t), "127.0.0.1:2775": freeAddr(t)})
}
