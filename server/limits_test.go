package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard/switchboard/ratelimit"
	"github.com/switchboard/switchboard/sqlstore"
)

// --redis-timeout and --redis-cooldown reach the Redis fallback: against a
// Redis that accepts connections and never answers, a decision waits the
// configured timeout (not the 75 ms default) and is then made in memory;
// after three failures Redis is left alone for the cooldown, so no further
// decision connects to it.
func TestRedisFallbackOptions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dials atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			go io.Copy(io.Discard, c) // reads every command, answers none
		}
	}()
	db, err := sqlstore.Open(context.Background(), "sqlite:"+t.TempDir()+"/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const timeout = 400 * time.Millisecond
	l := newLimits(db, &redis.Options{Addr: ln.Addr().String()}, ratelimit.FallbackOptions{Timeout: timeout, Cooldown: time.Hour},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer l.close()
	ctx := context.Background()
	for i := range 3 {
		start := time.Now()
		d, err := l.Allow(ctx, "k", 10, time.Minute)
		if err != nil || !d.Allowed {
			t.Fatalf("decision %d: %+v, %v; want allowed by the fallback", i, d, err)
		}
		if waited := time.Since(start); waited < timeout {
			t.Fatalf("decision %d came after %v: the Redis timeout of %v was not applied", i, waited, timeout)
		}
	}
	if !l.fallback.Degraded() {
		t.Fatal("Redis not left alone after three failures in a row")
	}
	before := dials.Load()
	for range 20 {
		if _, err := l.Allow(ctx, "k", 10, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if got := dials.Load(); got != before {
		t.Fatalf("Redis was dialled %d more times during the cooldown", got-before)
	}
	if f := l.fallback.Fallbacks(); f != 23 {
		t.Fatalf("fallbacks = %d, want 23", f)
	}
}
