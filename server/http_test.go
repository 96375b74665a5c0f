package server

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// startHTTP serves a handler that answers 200 "ok" with the HTTP limits of
// c, as Run does, and returns the address and the connection limiter.
func startHTTP(t *testing.T, c Config) (string, *connLimiter) {
	t.Helper()
	c.defaults()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitConns(tcp, c.MaxConns)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}), c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return tcp.Addr().String(), ln
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends a GET on c and returns the answer's status.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, extra string) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"+extra+"\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// TestHeaderLimit: headers up to 64 KiB are served; more answer 431 (which
// net/http writes itself).
func TestHeaderLimit(t *testing.T) {
	addr, _ := startHTTP(t, Config{})
	c := dial(t, addr)
	if got := roundTrip(t, c, bufio.NewReader(c), "X-Big: "+strings.Repeat("a", 60<<10)+"\r\n"); got != http.StatusOK {
		t.Errorf("60 KiB of headers: %d, want 200", got)
	}
	c = dial(t, addr)
	if got := roundTrip(t, c, bufio.NewReader(c), "X-Big: "+strings.Repeat("a", 72<<10)+"\r\n"); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("72 KiB of headers: %d, want 431", got)
	}
}

// TestSlowHeadersClosed: a client that does not finish its headers within
// the header timeout is disconnected (slowloris).
func TestSlowHeadersClosed(t *testing.T) {
	addr, _ := startHTTP(t, Config{HeaderTimeout: 200 * time.Millisecond})
	c := dial(t, addr)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	// The deadline is only a bound for a broken server: the read must end
	// with the server closing the connection, long before it.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept a connection with unfinished headers open")
	}
}

// TestUnfinishedHeadersMemory: connections that each send a megabyte of
// headers that never end (the attack that took a node from 76 MB to 560 MB)
// cost the server at most about 64 KiB each: it answers 431 and closes
// them, rather than buffering the whole megabyte of each.
func TestUnfinishedHeadersMemory(t *testing.T) {
	addr, _ := startHTTP(t, Config{HeaderTimeout: time.Minute})
	const conns = 64
	junk := []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Junk: " + strings.Repeat("a", 1<<20))
	before := heapInUse()

	var wg sync.WaitGroup
	open := make([]net.Conn, conns)
	for i := range conns {
		open[i] = dial(t, addr)
		wg.Go(func() { open[i].Write(junk) }) // fails once the server gives up on it
	}
	wg.Wait()
	grew := heapInUse() - before
	t.Logf("heap grew by %d KiB for %d connections with 1 MiB of unfinished headers each", grew>>10, conns)
	if grew > 16<<20 {
		t.Errorf("heap grew by %d MiB for %d connections: more than 256 KiB each", grew>>20, conns)
	}
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestConnectionCap: at the cap, a new connection waits to be accepted
// while the open ones are served; it is served once one closes.
func TestConnectionCap(t *testing.T) {
	addr, ln := startHTTP(t, Config{MaxConns: 2})
	c1, c2 := dial(t, addr), dial(t, addr)
	br1, br2 := bufio.NewReader(c1), bufio.NewReader(c2)
	roundTrip(t, c1, br1, "")
	roundTrip(t, c2, br2, "")

	c3 := dial(t, addr) // the kernel completes the handshake; the server does not accept it
	if _, err := io.WriteString(c3, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !ln.waiting.Load() {
		if time.Now().After(deadline) {
			t.Fatal("Accept never waited for a slot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := ln.open.Load(); n != 2 {
		t.Fatalf("%d connections open at a cap of 2", n)
	}
	if got := roundTrip(t, c1, br1, ""); got != http.StatusOK {
		t.Errorf("an open connection at the cap: %d", got)
	}
	c3.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c3.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection over the cap was answered")
	}

	c2.Close()
	br3 := bufio.NewReader(c3)
	c3.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(br3, nil)
	if err != nil {
		t.Fatalf("the waiting connection after one closed: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("the waiting connection: %d", res.StatusCode)
	}
	if w := ln.waits.Load(); w < 1 {
		t.Errorf("waits = %d", w)
	}
}
