package rounds

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// ProcessesCPU returns the CPU time (user and system) that the processes pids
// have used so far, from Linux's /proc/PID/stat; ok is false where that
// cannot be read. A process that has ended is left out.
func ProcessesCPU(pids []int) (cpu time.Duration, ok bool) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return 0, false
	}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // ended
		}
		if t, ok := statCPU(b); ok {
			cpu += t
		}
	}
	return cpu, true
}

// CommandCPU returns the CPU time that every process whose command name
// (/proc/PID/comm) is comm has used so far, such as PostgreSQL's server
// processes ("postgres"): those of this machine only; ok is false when
// there is none.
func CommandCPU(comm string) (time.Duration, bool) {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var pids []int
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || string(bytes.TrimSpace(b)) != comm {
			continue
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		return 0, false
	}
	return ProcessesCPU(pids)
}

// MinorFaults returns the minor page faults (field 10 of /proc/PID/stat)
// that process pid has taken so far; ok is false where that cannot be read.
func MinorFaults(pid int) (n int64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	f := statFields(b)
	if len(f) < 8 {
		return 0, false
	}
	n, err = strconv.ParseInt(string(f[7]), 10, 64)
	return n, err == nil
}

// statFields returns the fields of a /proc/PID/stat line from field 3, the
// state, on (nil when there is none). The command name, field 2, is in
// parentheses and may hold spaces and parentheses itself: the fields are
// counted after its last ')'.
func statFields(b []byte) [][]byte {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return bytes.Fields(b[i+1:])
}

// statCPU reads utime and stime (fields 14 and 15) of a /proc/PID/stat line.
func statCPU(b []byte) (time.Duration, bool) {
	f := statFields(b) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const tick = 10 * time.Millisecond // USER_HZ, as in machineCPU
	return time.Duration(utime+stime) * tick, true
}
