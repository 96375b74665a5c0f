package server

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/clientip"
	"github.com/switchboard/switchboard/provider/android"
)

// The limits of the HTTP server (docs/api.md, "Every limit").
const (
	// MaxHeaderBytes caps a request's line and headers: a client that
	// sends more gets 431 from net/http (plain text: Go writes that answer
	// before any handler runs) and its connection is closed.
	MaxHeaderBytes = 64 << 10
	// DefaultHeaderTimeout is how long a client may take to send its
	// request line and headers (a slow one is closed without an answer).
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may sit idle.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxConns caps the connections a node keeps open at once:
	// enough for thousands of devices' event streams besides the API's
	// clients, few enough that their buffers fit in memory.
	DefaultMaxConns = 10000
	// DefaultMaxConnsPerAddr caps the connections of one client address
	// (an IPv6 client by its /64): room for a couple of hundred phones
	// behind one NAT, each with its event stream and a request, while
	// twenty addresses cannot take a node's DefaultMaxConns.
	DefaultMaxConnsPerAddr = 512
	// requestTimeout bounds reading a request's body and writing its
	// answer. Long-lived answers (the devices' event streams) lift it for
	// themselves with http.ResponseController.
	requestTimeout = 30 * time.Second
)

// newHTTPServer returns the API's server with the limits of c; ln's
// ConnState hook tells it which connections are idle (see connLimiter).
func newHTTPServer(h http.Handler, c Config, ln *connLimiter, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           ln.countStreams(h),
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: c.HeaderTimeout,
		ReadTimeout:       requestTimeout,
		WriteTimeout:      requestTimeout,
		IdleTimeout:       c.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         ln.connState,
	}
}

// connLimiter is a listener that bounds the connections a node holds:
//
//   - at most max open at once. For a new connection at the cap, Accept
//     closes the connection that has been idle longest (a keep-alive
//     between requests: closing it is what its idle timeout would do, and
//     its client opens another), so that idle connections cannot keep new
//     clients out; with none idle, the new connection waits until one
//     closes, and those after it in the kernel's accept queue (refused
//     once it is full), while the open connections are served as usual;
//   - at most perAddr from one client address (an IPv6 client by its /64;
//     0: no such cap). A connection over it closes that address's longest
//     idle one, or, with none, is closed at once. Trusted proxies are not
//     capped: their connections carry many clients;
//   - the requests in progress on an HTTP/2 connection (its streams) count
//     against both caps as connections do (countStreams): one connection
//     could otherwise carry hundreds.
type connLimiter struct {
	net.Listener
	slots   chan struct{}
	done    chan struct{}
	once    sync.Once
	perAddr int
	proxies clientip.Proxies

	mu     sync.Mutex
	byAddr map[string]int            // open connections and HTTP/2 streams, by client key
	idle   map[*limitedConn]struct{} // connections idle between requests
	idleCh chan struct{}             // signalled when a connection becomes idle

	open           atomic.Int64
	waits          atomic.Int64 // times Accept found every slot taken
	waiting        atomic.Bool  // Accept is waiting for a slot now
	reclaimed      atomic.Int64 // idle connections closed to make room
	refused        atomic.Int64 // connections closed at once: their address was at its cap
	streamsRefused atomic.Int64 // HTTP/2 requests refused: a cap was reached
}

func limitConns(l net.Listener, max, perAddr int, proxies clientip.Proxies) *connLimiter {
	return &connLimiter{Listener: l, slots: make(chan struct{}, max), done: make(chan struct{}), perAddr: perAddr, proxies: proxies,
		byAddr: map[string]int{}, idle: map[*limitedConn]struct{}{}, idleCh: make(chan struct{}, 1)}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l}
		if !l.admit(lc) {
			l.refused.Add(1)
			c.Close()
			continue
		}
		if err := l.slot(); err != nil {
			if lc.key != "" {
				l.release(lc.key)
			}
			c.Close()
			return nil, err
		}
		l.open.Add(1)
		return lc, nil
	}
}

// slot takes a slot for a connection just accepted: at once when one is
// free, else by closing the longest idle connection, else when one closes
// (meanwhile the connection waits unserved, and those after it in the
// kernel's accept queue).
func (l *connLimiter) slot() error {
	for counted := false; ; {
		select {
		case l.slots <- struct{}{}:
			return nil
		default:
		}
		if l.reclaim("") {
			continue // its Close gave its slot back
		}
		if !counted {
			l.waits.Add(1)
			counted = true
		}
		l.waiting.Store(true)
		select {
		case l.slots <- struct{}{}:
			l.waiting.Store(false)
			return nil
		case <-l.idleCh: // a connection became idle: try again
			l.waiting.Store(false)
		case <-l.done:
			l.waiting.Store(false)
			return net.ErrClosed
		}
	}
}

// admit counts c against its address's cap, closing the address's longest
// idle connection to make room; false when the address has no room.
func (l *connLimiter) admit(c *limitedConn) bool {
	peer := clientip.Peer(c.RemoteAddr().String())
	if l.perAddr <= 0 || !peer.IsValid() || l.proxies.Trusted(peer) {
		return true
	}
	c.key = clientip.Key(peer)
	for {
		l.mu.Lock()
		if l.byAddr[c.key] < l.perAddr {
			l.byAddr[c.key]++
			l.mu.Unlock()
			return true
		}
		l.mu.Unlock()
		if !l.reclaim(c.key) {
			c.key = ""
			return false
		}
	}
}

// reclaim closes the connection of key (any key when "") that has been idle
// longest, and reports whether there was one.
func (l *connLimiter) reclaim(key string) bool {
	l.mu.Lock()
	var oldest *limitedConn
	for c := range l.idle {
		if (key == "" || c.key == key) && (oldest == nil || c.idleSince.Before(oldest.idleSince)) {
			oldest = c
		}
	}
	if oldest != nil {
		delete(l.idle, oldest)
	}
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	l.reclaimed.Add(1)
	oldest.Close()
	return true
}

// connState is the server's ConnState hook: it keeps the set of idle
// connections.
func (l *connLimiter) connState(nc net.Conn, st http.ConnState) {
	c := unwrapConn(nc)
	if c == nil {
		return
	}
	l.mu.Lock()
	if st == http.StateIdle && !c.closed {
		c.idleSince = time.Now()
		l.idle[c] = struct{}{}
	} else {
		delete(l.idle, c)
	}
	l.mu.Unlock()
	if st == http.StateIdle {
		select {
		case l.idleCh <- struct{}{}:
		default:
		}
	}
}

// unwrapConn finds the limitedConn under a connection the server holds (a
// *tls.Conn over it when TLS is served).
func unwrapConn(nc net.Conn) *limitedConn {
	for nc != nil {
		if c, ok := nc.(*limitedConn); ok {
			return c
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		nc = u.NetConn()
	}
	return nil
}

// countStreams counts each request in progress on an HTTP/2 connection
// against the caps, as a connection: one over either answers 429 with
// Retry-After (the connection and its other streams go on).
func (l *connLimiter) countStreams(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor < 2 {
			h.ServeHTTP(w, r)
			return
		}
		select {
		case l.slots <- struct{}{}:
		default:
			l.streamsRefused.Add(1)
			refuseStream(w, r, "This server has too many requests in progress. Retry in a moment.")
			return
		}
		defer func() { <-l.slots }()
		if peer := clientip.Peer(r.RemoteAddr); l.perAddr > 0 && peer.IsValid() && !l.proxies.Trusted(peer) {
			key := clientip.Key(peer)
			l.mu.Lock()
			full := l.byAddr[key] >= l.perAddr
			if !full {
				l.byAddr[key]++
			}
			l.mu.Unlock()
			if full {
				l.streamsRefused.Add(1)
				refuseStream(w, r, "Too many connections and requests in progress from your address. Retry in a moment.")
				return
			}
			defer l.release(key)
		}
		h.ServeHTTP(w, r)
	})
}

func (l *connLimiter) release(key string) {
	l.mu.Lock()
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
	l.mu.Unlock()
}

// refuseStream answers a request over a cap: 429 with Retry-After, in the
// device protocol's error format under its prefix and in the envelope
// elsewhere.
func refuseStream(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	var body any = map[string]any{"error": msg, "code": sb.CodeRateLimitExceeded}
	if strings.HasPrefix(r.URL.Path, android.Prefix+"/") {
		body = map[string]string{"message": msg}
	}
	json.NewEncoder(w).Encode(body)
}

func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot (and its address's count) back when it is
// closed.
type limitedConn struct {
	net.Conn
	l         *connLimiter
	key       string    // its client key, when counted per address
	idleSince time.Time // guarded by l.mu
	closed    bool      // guarded by l.mu
	once      sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.closed = true
		delete(c.l.idle, c)
		c.l.mu.Unlock()
		if c.key != "" {
			c.l.release(c.key)
		}
		c.l.open.Add(-1)
		<-c.l.slots
	})
	return err
}
