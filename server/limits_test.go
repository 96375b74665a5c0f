package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
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

// The Redis client's own log lines go to the node's JSON log, not to
// stderr in the client's format.
func TestRedisClientLogsToTheNodeLog(t *testing.T) {
	db, err := sqlstore.Open(context.Background(), "sqlite:"+t.TempDir()+"/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var buf lockedBuffer
	l := newLimits(db, &redis.Options{Addr: "127.0.0.1:1"}, ratelimit.FallbackOptions{}, slog.New(slog.NewJSONHandler(&buf, nil)))
	defer l.close()
	// The client logs that it rounds an expiry under a millisecond up to
	// one, as it builds the command (before it connects).
	l.redis.Set(context.Background(), "k", "v", 500*time.Microsecond)
	var found bool
	for _, line := range strings.Split(buf.String(), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if m["msg"] != "redis client" {
			continue
		}
		if m["level"] != "WARN" {
			t.Errorf("the client's line at %v: %v", m["level"], m)
		}
		if d, _ := m["detail"].(string); strings.Contains(d, "truncating to 1ms") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no line of the Redis client in the node's log:\n%s", buf.String())
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
