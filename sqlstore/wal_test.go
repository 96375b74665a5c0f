package sqlstore

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// TestWALStartsOverUnderLoad: under a load that never lets the background
// checkpoints catch up with the writer, the WAL still starts over from its
// beginning, so it stays short instead of growing with everything written.
// Without the writer's own checkpoint (restartWAL) the WAL of this test
// grows to about 34 MB; with it, to about 2.5.
func TestWALStartsOverUnderLoad(t *testing.T) {
	ctx := context.Background()
	url := testSQLiteURL(t)
	db := openTestDB(t, url)
	const limit = 1 << 20
	db.walRestartPages.Store(64)
	for _, q := range []string{
		fmt.Sprintf(`PRAGMA journal_size_limit = %d`, limit),
		`CREATE TABLE wal_load (n INTEGER, blob BLOB)`,
	} {
		if _, err := db.exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	wal := url[len("sqlite:"):] + "-wal"

	// 64 writers keep the writer busy with 16 MB in all, while another
	// goroutine checkpoints after every 400 writes (800 kB), as the
	// background loop does every 200 ms.
	const writers, writes, size = 64, 125, 2048
	var (
		wg      sync.WaitGroup
		largest atomic.Int64
		written atomic.Int64
	)
	loaded := make(chan struct{})
	tick := make(chan struct{}, 1)
	checkpoints := make(chan struct{})
	go func() {
		defer close(checkpoints)
		for {
			select {
			case <-loaded:
				return
			case <-tick:
			}
			db.checkpoint()
			if fi, err := os.Stat(wal); err == nil && fi.Size() > largest.Load() {
				largest.Store(fi.Size())
			}
		}
	}()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			blob := make([]byte, size)
			for i := 0; i < writes; i++ {
				err := db.Write(ctx, func(tx *Tx) error {
					_, err := tx.exec(ctx, `INSERT INTO wal_load (n, blob) VALUES (?, ?)`, i, blob)
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				if written.Add(1)%400 == 0 {
					select {
					case tick <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	close(loaded)
	<-checkpoints
	if t.Failed() {
		return
	}
	fi, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	most := max(largest.Load(), fi.Size())
	total := int64(writers * writes * size)
	t.Logf("wrote %d MB; the WAL was at most %.1f MB", total>>20, float64(most)/(1<<20))
	// Started over, the WAL holds what was written since, a few MB at
	// most; growing, it holds more than everything written (16 MB, twice
	// that in pages).
	if most > total/2 {
		t.Fatalf("the WAL grew to %d bytes while %d were written: it did not start over", most, total)
	}
	var n int
	if err := db.read.QueryRow(`SELECT count(*) FROM wal_load`).Scan(&n); err != nil || n != writers*writes {
		t.Fatalf("rows: %d, %v; want %d", n, err, writers*writes)
	}
}
