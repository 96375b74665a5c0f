//go:build unix

package sqlstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockSQLite gives this process the SQLite database at url for as long as
// it runs, or until release: one `switchboard serve` (or restore) per file.
// Two nodes on one file would each release the other's claimed messages at
// start and send them twice. A second taker gets ErrLocked, in one line
// naming the holder's process id. For a PostgreSQL url it does nothing:
// nodes there share the database by design.
//
// The lock is an flock(2) on PATH.lock beside the database. The operating
// system releases it when the process ends, however it ends (kill -9
// included), so a crash leaves no stale lock. It is a separate file because
// SQLite's own locks on the database file are POSIX locks, which closing
// any other descriptor of that file in the process would drop.
func LockSQLite(url string) (release func(), err error) {
	path, ok := strings.CutPrefix(url, "sqlite:")
	if !ok {
		return func() {}, nil
	}
	if err := CheckURL(url); err != nil {
		return nil, err
	}
	lockPath := path + ".lock"
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: the lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		raw, _ := os.ReadFile(lockPath)
		f.Close()
		holder := "another process"
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && pid > 0 {
			holder = fmt.Sprintf("another process (pid %d)", pid)
		}
		return nil, &LockedError{Path: path, Holder: holder}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sqlite: locking %s: %w", lockPath, err)
	}
	// The holder's pid, for the error a second taker gets.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
