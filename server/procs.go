package server

import (
	"log/slog"
	"os"
	"runtime"
	"sync"
)

// Nodes that share a machine split its cores. Go gives each process as
// many threads running Go code at once (GOMAXPROCS) as the machine, or its
// container's CPU limit, has cores; several nodes on one machine would each
// run that many, and a node with a share of the load runs out of work more
// often, so its threads sleep and are woken again far more than one busy
// node's. At
// every beat a node learns how many live nodes run on its machine
// (sqlstore.Options.HostNodes) and sets GOMAXPROCS to its share of what Go
// chose at start, at least 1; alone again, it goes back to Go's default.
// An operator who sets GOMAXPROCS in the environment keeps that value.
// GOMAXPROCS is the process's, so there is one procShare per process
// (processProcs), which a server stopping sets back to Go's default (tests
// run several servers in one process).
type procShare struct {
	base  int  // GOMAXPROCS as Go chose it at start
	fixed bool // set by the operator: left alone

	mu  sync.Mutex
	set int // the value this process set; 0 while Go's default holds
}

var processProcs = &procShare{base: runtime.GOMAXPROCS(0), fixed: os.Getenv("GOMAXPROCS") != ""}

// sharedProcs is a node's share of base threads with n nodes on its machine.
func sharedProcs(base, n int) int {
	if n <= 1 {
		return base
	}
	return max(1, base/n)
}

// hostNodes sets GOMAXPROCS for n live nodes on this machine.
func (p *procShare) hostNodes(n int, log *slog.Logger) {
	if p.fixed {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	want := sharedProcs(p.base, n)
	switch {
	case want == p.base && p.set == 0, want == p.set:
		return
	case want == p.base:
		runtime.SetDefaultGOMAXPROCS()
		p.set = 0
	default:
		runtime.GOMAXPROCS(want)
		p.set = want
	}
	log.Info("GOMAXPROCS set to this node's share of the machine", "nodes_on_machine", n, "gomaxprocs", want, "machine", p.base)
}
