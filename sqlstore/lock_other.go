//go:build !unix

package sqlstore

// LockSQLite does nothing where flock(2) is not available: there, nothing
// stops two processes from serving one SQLite file.
func LockSQLite(url string) (release func(), err error) { return func() {}, nil }
