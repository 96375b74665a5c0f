package sqlstore

import (
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
)

// TestTouchKeysTwoNodes: two nodes flushing the last use of the same keys
// at once never deadlock (each updates the rows in id order; in map order,
// PostgreSQL detected a deadlock in most rounds).
func TestTouchKeysTwoNodes(t *testing.T) {
	url := testPostgresURL(t)
	a, b, _ := twoNodes(t, url)
	tn := newTestTenant(t, a, "scale")
	used := map[string]time.Time{}
	for range 60 {
		k := mustCreateKey(t, a, tn.ID, sb.Live, 0)
		used[k.ID] = time.Time{}
	}
	for round := range 8 {
		at := time.Now().UTC().Add(time.Duration(round) * time.Second)
		for id := range used {
			used[id] = at
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, db := range []*DB{a, b} {
			wg.Go(func() { errs[i] = db.TouchKeys(bg, used) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, node %d: %v", round, i, err)
			}
		}
	}
	var n int
	if err := a.queryRow(bg, `SELECT COUNT(*) FROM api_keys WHERE tenant_id = ? AND last_used_at IS NOT NULL`, tn.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(used) {
		t.Fatalf("%d keys have a last use, want %d", n, len(used))
	}
}
