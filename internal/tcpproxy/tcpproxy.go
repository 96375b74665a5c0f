// Package tcpproxy is a TCP proxy for tests that need a server (Redis, say)
// to go away and come back while the program under test keeps its address:
// it forwards connections, drops them, or accepts them and never answers.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Mode is what the proxy does with connections.
type Mode int32

const (
	// Forward relays connections to the target.
	Forward Mode = iota
	// Drop closes every connection at once, as a server that went away.
	Drop
	// Blackhole accepts connections and never answers, as a host that
	// stopped responding.
	Blackhole
)

// Proxy listens on a loopback port of its own.
type Proxy struct {
	ln       net.Listener
	target   string
	mode     atomic.Int32
	accepted atomic.Int64
	sends    atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// New starts a proxy to target in Forward mode; it stops when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted counts the connections the proxy has accepted.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Sends counts the reads from clients that returned data, over all
// connections: on loopback, a client that writes what it has to say in
// one write and then waits for the answer (a round trip) makes one.
func (p *Proxy) Sends() int64 { return p.sends.Load() }

// countingReader counts the reads of r that returned data.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		c.n.Add(1)
	}
	return n, err
}

// SetMode switches the mode; leaving Forward closes the relayed
// connections, so that clients find the new mode on their next dial.
func (p *Proxy) SetMode(m Mode) {
	if Mode(p.mode.Swap(int32(m))) == Forward && m != Forward {
		p.closeAll()
	}
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		switch Mode(p.mode.Load()) {
		case Drop:
			c.Close()
		case Blackhole:
			p.track(c) // held open, never read, closed at cleanup
		default:
			go p.relay(c)
		}
	}
}

func (p *Proxy) relay(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.track(c)
	p.track(up)
	go func() { io.Copy(up, countingReader{c, &p.sends}); up.Close() }()
	io.Copy(c, up)
	c.Close()
}
