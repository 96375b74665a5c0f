package server

import (
	"log/slog"
	"runtime"
	"testing"
)

func TestSharedProcs(t *testing.T) {
	for _, c := range []struct{ base, nodes, want int }{
		{2, 0, 2}, {2, 1, 2}, {2, 2, 1}, {2, 3, 1}, {8, 3, 2}, {8, 4, 2}, {16, 3, 5},
	} {
		if got := sharedProcs(c.base, c.nodes); got != c.want {
			t.Errorf("sharedProcs(%d, %d) = %d, want %d", c.base, c.nodes, got, c.want)
		}
	}
}

// A node sets GOMAXPROCS to its share while others run on its machine,
// goes back to Go's default when alone, and leaves a GOMAXPROCS the
// operator set alone.
func TestProcShare(t *testing.T) {
	t.Cleanup(func() { runtime.SetDefaultGOMAXPROCS() })
	base := runtime.GOMAXPROCS(0)
	log := slog.New(slog.DiscardHandler)
	p := &procShare{base: base}
	p.hostNodes(base+1, log)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d with %d nodes on %d threads, want 1", got, base+1, base)
	}
	p.hostNodes(1, log)
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Errorf("GOMAXPROCS %d alone again, want Go's %d", got, base)
	}
	fixed := &procShare{base: base, fixed: true}
	fixed.hostNodes(base+1, log)
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Errorf("GOMAXPROCS %d set by the operator became %d", base, got)
	}
}
