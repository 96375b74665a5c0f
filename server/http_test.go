package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard/switchboard/clientip"
)

// startHTTP serves a handler that answers 200 "ok" with the HTTP limits of
// c, as Run does, and returns the address and the connection limiter.
func startHTTP(t *testing.T, c Config) (string, *connLimiter) {
	t.Helper()
	addr, ln, _ := startHTTPHold(t, c)
	return addr, ln
}

// startHTTPHold is startHTTP whose handler, for GET /hold, answers only
// once release is closed (or its client goes away): the connection stays
// active until then.
func startHTTPHold(t *testing.T, c Config) (string, *connLimiter, chan struct{}) {
	t.Helper()
	c.defaults()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxies, err := clientip.ParseProxies(c.TrustedProxies)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	ln := limitConns(tcp, c.MaxConns, c.MaxConnsPerAddr, proxies)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			select {
			case <-release:
			case <-r.Context().Done(): // the client went away
			}
		}
		io.WriteString(w, "ok")
	}), c, ln, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return tcp.Addr().String(), ln, release
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	return dialFrom(t, "127.0.0.1", addr)
}

// dialFrom connects to addr from the loopback address from (127.0.0.2 is
// another client of the same machine).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
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

// TestConnectionCap: at the cap, with every connection busy, a new one
// waits to be accepted while the open ones are served; it is served once
// one closes.
func TestConnectionCap(t *testing.T) {
	addr, ln, release := startHTTPHold(t, Config{MaxConns: 2})
	c1, c2 := dial(t, addr), dial(t, addr)
	br1 := bufio.NewReader(c1)
	roundTrip(t, c1, br1, "")
	holdOn(t, c2) // busy until release
	waitUntil(t, "c1 idle", func() bool { return ln.idleCount() == 1 })
	holdOn(t, c1) // both busy now
	waitUntil(t, "c1 busy", func() bool { return ln.idleCount() == 0 })

	c3 := dial(t, addr) // the kernel completes the handshake; the server does not accept it
	if _, err := io.WriteString(c3, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "Accept to wait for a slot", ln.waiting.Load)
	if n := ln.open.Load(); n != 2 {
		t.Fatalf("%d connections open at a cap of 2", n)
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
	close(release)
}

// TestIdleConnectionsReclaimed: idle keep-alive connections cannot keep a
// new client out: at the cap, the longest idle one is closed and the new
// one served at once (the attack: --max-conns idle connections without a
// key held a node for --idle-timeout).
func TestIdleConnectionsReclaimed(t *testing.T) {
	addr, ln := startHTTP(t, Config{MaxConns: 5, MaxConnsPerAddr: -1})
	for i := range 5 {
		c := dialFrom(t, fmt.Sprintf("127.0.0.%d", 10+i), addr)
		roundTrip(t, c, bufio.NewReader(c), "")
	}
	waitUntil(t, "five idle connections", func() bool { return ln.idleCount() == 5 })
	c := dialFrom(t, "127.0.0.20", addr)
	if got := roundTrip(t, c, bufio.NewReader(c), ""); got != http.StatusOK {
		t.Errorf("a new client at the cap: %d", got)
	}
	if n := ln.reclaimed.Load(); n != 1 {
		t.Errorf("%d idle connections closed, want 1", n)
	}
	if n := ln.open.Load(); n != 5 {
		t.Errorf("%d open at a cap of 5", n)
	}
}

// TestConnectionsPerAddress: one address (an IPv4 one here) holds at most
// --max-conns-per-addr connections: past it, a new one closes its longest
// idle connection, or with none idle is closed at once, while another
// address is served; a trusted proxy is not capped.
func TestConnectionsPerAddress(t *testing.T) {
	addr, ln, release := startHTTPHold(t, Config{MaxConns: 100, MaxConnsPerAddr: 3, TrustedProxies: "127.0.0.3"})
	busy := make([]net.Conn, 3)
	for i := range busy {
		busy[i] = dialFrom(t, "127.0.0.1", addr)
		holdOn(t, busy[i])
	}
	waitUntil(t, "three connections open", func() bool { return ln.open.Load() == 3 })
	over := dialFrom(t, "127.0.0.1", addr)
	over.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := over.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Fatalf("a fourth connection of one address: read %d bytes, %v; want it closed", n, err)
	}
	if n := ln.refused.Load(); n != 1 {
		t.Errorf("refused %d, want 1", n)
	}
	other := dialFrom(t, "127.0.0.2", addr)
	if got := roundTrip(t, other, bufio.NewReader(other), ""); got != http.StatusOK {
		t.Errorf("another address while the first is at its cap: %d", got)
	}
	for range 5 { // a trusted proxy's connections, all busy
		c := dialFrom(t, "127.0.0.3", addr)
		holdOn(t, c)
		busy = append(busy, c)
	}
	waitUntil(t, "the proxy's five connections open beside the others", func() bool { return ln.open.Load() == 3+1+5 })
	if n := ln.refused.Load(); n != 1 {
		t.Errorf("refused %d, want 1: a trusted proxy is not capped", n)
	}
	close(release)
	for _, c := range busy {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	waitUntil(t, "the address's connections idle", func() bool { return ln.idleCount() >= 3 })
	c := dialFrom(t, "127.0.0.1", addr) // closes one of its idle ones
	if got := roundTrip(t, c, bufio.NewReader(c), ""); got != http.StatusOK {
		t.Errorf("a connection of the address with idle ones: %d", got)
	}
	if n := ln.reclaimed.Load(); n != 1 {
		t.Errorf("reclaimed %d, want 1", n)
	}
}

// holdOn sends GET /hold on c: the connection stays busy until the test's
// release.
func holdOn(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
}

func (l *connLimiter) idleCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.idle)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHTTP2StreamsCounted: with TLS served directly, each HTTP/2 request in
// progress counts against the caps as a connection does: one connection
// cannot carry more requests than its address may hold connections (the
// connection itself is one of them); the request over the cap answers 429
// with Retry-After while the others go on.
func TestHTTP2StreamsCounted(t *testing.T) {
	c := Config{MaxConns: 100, MaxConnsPerAddr: 3}
	c.defaults()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitConns(tcp, c.MaxConns, c.MaxConnsPerAddr, clientip.Proxies{})
	release := make(chan struct{})
	ts := httptest.NewUnstartedServer(nil)
	ts.Listener.Close()
	ts.Listener = ln
	ts.Config = newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		io.WriteString(w, r.Proto)
	}), c, ln, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	client := ts.Client()

	get := func(path string) (int, string) {
		res, err := client.Get(ts.URL + path)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		return res.StatusCode, string(b)
	}
	if st, proto := get("/"); st != 200 || proto != "HTTP/2.0" {
		t.Fatalf("a request: %d over %s, want 200 over HTTP/2.0", st, proto)
	}
	done := make(chan int, 2)
	for range 2 {
		go func() { st, _ := get("/hold"); done <- st }()
	}
	waitUntil(t, "two requests in progress", func() bool {
		ln.mu.Lock()
		defer ln.mu.Unlock()
		return ln.byAddr["127.0.0.1"] == 3
	})
	if st, _ := get("/"); st != http.StatusTooManyRequests {
		t.Errorf("a third request on the connection while two are in progress at a cap of 3: %d, want 429", st)
	}
	if n := ln.streamsRefused.Load(); n != 1 {
		t.Errorf("streams refused: %d", n)
	}
	close(release)
	for range 2 {
		if st := <-done; st != 200 {
			t.Errorf("a request held: %d", st)
		}
	}
	if st, _ := get("/"); st != 200 {
		t.Errorf("after the requests ended: %d", st)
	}
}
