package sqlstore

// LockedError is LockSQLite's answer when another process holds the
// database.
type LockedError struct {
	Path   string // the database file
	Holder string // "another process (pid N)"
}

func (e *LockedError) Error() string {
	return "sqlite " + e.Path + ": " + e.Holder + " is serving this database (one switchboard serve per SQLite file): " +
		"stop it first, or give this one another --database"
}
