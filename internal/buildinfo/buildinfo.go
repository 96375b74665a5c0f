// Package buildinfo tells which build of Switchboard is running: its
// version and the commit it was built from, for `switchboard version`, the
// startup log line and the error that refuses a database a newer version
// migrated.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// version is set by a release build:
//
//	go build -ldflags "-X github.com/switchboard/switchboard/internal/buildinfo.version=v1.2.0" ./cmd/switchboard
//
// Without it, the module version the go command recorded is used: the tag
// for `go install ...@v1.2.0`, "(devel)" for a build from a checkout.
var version string

// Info is what is known of the running build.
type Info struct {
	// Version is the release version, or "(devel)".
	Version string
	// Commit is the VCS revision the binary was built from, "" when the
	// build recorded none (go build -buildvcs=false, or no .git).
	Commit string
	// CommitTime is the revision's time (RFC 3339), "" when unknown.
	CommitTime string
	// Modified reports a build from a work tree with uncommitted changes.
	Modified bool
	// Go is the Go version the binary was built with.
	Go string
}

// Read returns the running build's Info.
func Read() Info {
	info := Info{Version: version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if info.Version == "" {
			info.Version = "(devel)"
		}
		return info
	}
	info.Go = bi.GoVersion
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// Short is the version and the commit's first 12 characters in one word
// pair, e.g. "v1.2.0 (commit 0123456789ab)" or "(devel)".
func (i Info) Short() string {
	if i.Commit == "" {
		return i.Version
	}
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	var b strings.Builder
	b.WriteString(i.Version + " (commit " + c)
	if i.Modified {
		b.WriteString(", modified")
	}
	b.WriteString(")")
	return b.String()
}
