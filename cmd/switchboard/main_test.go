package main

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain runs the package's parallel tests four at a time (or one a
// core, where there are more cores) unless -test.parallel says otherwise:
// most of their time is waiting, not computing (the contract's 10 s webhook
// timeout, retry back-offs, child processes starting and dying, browser
// pages loading), and the default of one test a core (two on CI's machine)
// left the cores idle while they waited.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0))))
	}
	os.Exit(m.Run())
}
