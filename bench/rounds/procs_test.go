package rounds

import (
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func TestStatCPU(t *testing.T) {
	// A command name with spaces and parentheses: fields are counted after
	// the last ')'. utime 250 and stime 50 ticks of 10 ms.
	line := []byte("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 123 456 789\n")
	got, ok := statCPU(line)
	if !ok || got != 3*time.Second {
		t.Fatalf("statCPU = %v, %v; want 3s, true", got, ok)
	}
	if _, ok := statCPU([]byte("4242 (x) S 1 2")); ok {
		t.Fatal("statCPU of a short line reports ok")
	}
}

func TestProcessesCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before, ok := ProcessesCPU([]int{os.Getpid()})
	if !ok {
		t.Fatal("ProcessesCPU of this process: not ok")
	}
	// Burn CPU until the kernel's clock ticks (10 ms) have counted some.
	deadline := time.Now().Add(10 * time.Second)
	after := before
	for after < before+50*time.Millisecond && time.Now().Before(deadline) {
		x := 0
		for i := range 10_000_000 {
			x += i
		}
		_ = x
		after, _ = ProcessesCPU([]int{os.Getpid()})
	}
	if after < before+50*time.Millisecond {
		t.Fatalf("this process's CPU went from %v to %v while it computed", before, after)
	}
	t.Logf("CPU %v -> %v", before, after)
	self, _ := ProcessCPU() // getrusage: the same process, counted finer
	if self < after-50*time.Millisecond {
		t.Errorf("ProcessesCPU(self) = %v, getrusage %v", after, self)
	}
	// An ended process (no such pid) counts nothing.
	if c, ok := ProcessesCPU([]int{1 << 30}); !ok || c != 0 {
		t.Errorf("ProcessesCPU(no such pid) = %v, %v", c, ok)
	}
	if _, ok := CommandCPU("no-such-command-here"); ok {
		t.Error("CommandCPU of a command that does not run reports ok")
	}
}

func TestMinorFaults(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before, ok := MinorFaults(os.Getpid())
	if !ok {
		t.Fatal("MinorFaults of this process: not ok")
	}
	// Touch every page of a fresh anonymous mapping: one minor fault each.
	const pages = 1024
	mem, err := syscall.Mmap(-1, 0, pages*os.Getpagesize(), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	for i := 0; i < len(mem); i += os.Getpagesize() {
		mem[i] = 1
	}
	after, ok := MinorFaults(os.Getpid())
	if !ok || after-before < pages {
		t.Fatalf("minor faults went from %d to %d (ok %v) over %d pages touched, want at least %d more", before, after, ok, pages, pages)
	}
	if _, ok := MinorFaults(1 << 30); ok {
		t.Error("MinorFaults of no such pid reports ok")
	}
}
