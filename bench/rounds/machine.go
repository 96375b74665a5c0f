package rounds

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// machineCPU returns the CPU time the whole machine has spent busy (user,
// nice, system, irq, softirq) and idle (idle, iowait), summed over its
// processors, from Linux's /proc/stat; ok is false elsewhere. Time stolen
// by a hypervisor is neither. With the servers under test in other
// processes (the nodes of `switchboard bench --nodes`, PostgreSQL), it is
// what a request cost all of them together, and the idle share says
// whether a target left processors unused.
func machineCPU() (busy, idle time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 8 || string(f[0]) != "cpu" {
		return 0, 0, false
	}
	var t [7]int64 // user nice system idle iowait irq softirq
	for i := range t {
		if t[i], err = strconv.ParseInt(string(f[i+1]), 10, 64); err != nil {
			return 0, 0, false
		}
	}
	// USER_HZ: 100 on every Linux architecture Go supports.
	const tick = 10 * time.Millisecond
	busy = time.Duration(t[0]+t[1]+t[2]+t[5]+t[6]) * tick
	idle = time.Duration(t[3]+t[4]) * tick
	return busy, idle, true
}
