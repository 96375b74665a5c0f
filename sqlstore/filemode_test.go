package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSQLiteFilesPrivate: the database holds webhook secrets and key hashes,
// so its file, WAL and shared-memory file are readable by their owner only,
// whether the store creates them or finds them more open.
func TestSQLiteFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	// What the process's umask lets a new file have: the test means
	// something only if it does not already strip group and other.
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(probe); fi.Mode().Perm()&0o077 == 0 {
		t.Logf("the umask already makes new files private (%v): this test cannot tell a fix from none", fi.Mode().Perm())
	}

	check := func(what, path string) {
		t.Helper()
		db, err := Open(context.Background(), "sqlite:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// A write makes sure the WAL and the shared-memory file exist.
		if _, err := db.exec(context.Background(), `CREATE TABLE IF NOT EXISTS mode_probe (n INTEGER)`); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if m := fi.Mode().Perm(); m != 0o600 {
				t.Errorf("%s: %s has mode %v, want -rw-------", what, filepath.Base(f), m)
			}
		}
	}
	check("a new database", filepath.Join(dir, "new", "switchboard.db"))

	// A database an older version left readable by everyone is closed
	// down when opened.
	old := filepath.Join(dir, "old.db")
	check("the old database, first opened", old)
	for _, f := range []string{old, old + "-wal", old + "-shm"} {
		if err := os.Chmod(f, 0o644); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	check("a database found readable by everyone", old)
}
