package server

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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
	// requestTimeout bounds reading a request's body and writing its
	// answer. Long-lived answers (the devices' event streams) lift it for
	// themselves with http.ResponseController.
	requestTimeout = 30 * time.Second
)

// newHTTPServer returns the API's server with the limits of c.
func newHTTPServer(h http.Handler, c Config, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: c.HeaderTimeout,
		ReadTimeout:       requestTimeout,
		WriteTimeout:      requestTimeout,
		IdleTimeout:       c.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// connLimiter is a listener that keeps at most max connections open: at the
// cap, Accept waits until one closes, so that new clients wait in the
// kernel's accept queue (and get refused once it is full) while the open
// connections are served as usual.
type connLimiter struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once

	open    atomic.Int64
	waits   atomic.Int64 // times Accept found every slot taken
	waiting atomic.Bool  // Accept is waiting for a slot now
}

func limitConns(l net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: l, slots: make(chan struct{}, max), done: make(chan struct{})}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.waits.Add(1)
		l.waiting.Store(true)
		select {
		case l.slots <- struct{}{}:
			l.waiting.Store(false)
		case <-l.done:
			l.waiting.Store(false)
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	l.open.Add(1)
	return &limitedConn{Conn: c, l: l}, nil
}

func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back when it is closed.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.slots
	})
	return err
}
