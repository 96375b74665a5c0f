package sqlstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/switchboard/switchboard/bench/rounds"
)

// TestBackendKeepsHeap: the pool's PostgreSQL backends keep the memory their
// statements free (keepBackendHeap) instead of faulting it in again at each
// statement. It counts the minor page faults (/proc/PID/stat) that a
// statement growing the heap by a few MiB costs on a backend of the store's
// pool, and, as the control, on a backend of a plain connection. It needs
// PostgreSQL on this machine; where the control does not fault either (a
// C library other than glibc, or MALLOC_* settings in PostgreSQL's
// environment), there is nothing to show and it skips.
func TestBackendKeepsHeap(t *testing.T) {
	url := testPostgresURL(t)
	db := openTestDB(t, url)
	ctx := context.Background()
	const query = `SELECT count(*) FROM (SELECT g FROM generate_series(1, 20000) g ORDER BY g DESC) s`
	// faultsPerRun runs query on c once, then 20 times more, and returns
	// the minor faults of c's backend a run over the 20.
	faultsPerRun := func(c *pgx.Conn) float64 {
		pid := int(c.PgConn().PID())
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || !strings.HasPrefix(string(cmd), "postgres") {
			t.Skipf("PostgreSQL's backend %d is not a process of this machine (%v): the test needs PostgreSQL on this machine", pid, err)
		}
		minflt := func() int64 {
			n, ok := rounds.MinorFaults(pid)
			if !ok {
				t.Fatalf("the minor faults of backend %d cannot be read from /proc/%d/stat", pid, pid)
			}
			return n
		}
		if _, err := c.Exec(ctx, query); err != nil {
			t.Fatal(err)
		}
		f0 := minflt()
		for i := 0; i < 20; i++ {
			if _, err := c.Exec(ctx, query); err != nil {
				t.Fatal(err)
			}
		}
		return float64(minflt()-f0) / 20
	}

	plain, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	control := faultsPerRun(plain)
	if control < 100 {
		t.Skipf("a plain connection's backend took %.1f minor faults a run: this PostgreSQL's malloc keeps its memory without keepBackendHeap", control)
	}

	conn, err := db.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pooled float64
	if err := conn.Raw(func(dc any) error {
		pooled = faultsPerRun(dc.(*stdlib.Conn).Conn())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("minor faults a run: %.1f on the pool's backend, %.1f on a plain connection's", pooled, control)
	if pooled > control/10 {
		t.Errorf("the pool's backend took %.1f minor faults a run (a plain connection's %.1f), want at most a tenth: it gives its memory back to the kernel after each statement (is keepBackendHeap run on each new connection?)", pooled, control)
	}
}

// TestBackendKeepsHeapRefused: a connection on which PostgreSQL refuses
// keepBackendHeap's statement is kept and serves the store.
func TestBackendKeepsHeapRefused(t *testing.T) {
	url := testPostgresURL(t)
	defer func(q string) { keepHeapQuery = q }(keepHeapQuery)
	keepHeapQuery = "SELECT 1/0"
	db := openTestDB(t, url)
	var n int
	if err := db.queryRow(context.Background(), `SELECT 41 + 1`).Scan(&n); err != nil || n != 42 {
		t.Fatalf("a query on the pool: %d, %v; want 42", n, err)
	}
}

// TestBackendKeepsHeapOutlivesWait: keepBackendHeap's statement is not cut
// short by the deadline of the caller waiting for the connection. A
// connection whose statement outlasts the pool's wait (--db-wait) still
// serves that caller, where it was turned away with 503 DATABASE_UNAVAILABLE
// when opening a connection on a loaded machine took most of the wait.
func TestBackendKeepsHeapOutlivesWait(t *testing.T) {
	url := testPostgresURL(t)
	db := openTestDBOptions(t, url, Options{ConnWait: 500 * time.Millisecond}) // room to open the connection on a loaded machine
	defer func(q string) { keepHeapQuery = q }(keepHeapQuery)
	keepHeapQuery = "SELECT pg_sleep(1.5)" // three times the wait
	db.write.SetMaxIdleConns(0)            // every connection taken is a new one
	conn, err := db.acquire(context.Background())
	if err != nil {
		t.Fatalf("a connection whose keepBackendHeap outlasts the pool's wait of 500ms: %v", err)
	}
	conn.Close()
}
