package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address from (127.0.0.2 is another client of the same machine).
func clientFrom(from string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestOneTokenCannotTakeTheNode replays the review's attack on a node with
// small caps: one device token opens many event streams, and one address
// opens many connections that stay busy, plus idle keep-alives from many
// addresses. The token holds one stream; the address holds its cap and no
// more; another client's request, another tenant's request and /healthz
// still answer.
func TestOneTokenCannotTakeTheNode(t *testing.T) {
	t.Parallel()
	s := startServer(t, sqliteURL(t), append(devArgs, "--max-conns", "40", "--max-conns-per-addr", "15")...)
	tn := msgTenant(t, s.DB)
	other := msgTenant(t, s.DB)
	_, _, code := devPhone(t, s, tn.Live, nil)
	var reg struct{ Token string }
	if st := devCall(t, s, "POST", "/device", "Code "+code, map[string]any{"name": "a"}, &reg); st != 201 {
		t.Fatalf("pairing: %d", st)
	}
	attacker := clientFrom("127.0.0.1")
	attacker.Timeout = 0 // its streams stay open
	observer := clientFrom("127.0.0.2")

	// 40 streams of one token, from one address, at once.
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", devURL(s)+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+reg.Token)
			res, err := attacker.Do(req)
			if err != nil {
				return // closed at once: the address is at its cap
			}
			io.Copy(io.Discard, res.Body) // until the stream ends
			res.Body.Close()
		})
	}
	eventually(t, 30*time.Second, "one stream left open", func() bool {
		m := scrapeSeriesWith(t, observer, s.URL)
		return m["switchboard_device_streams"] == 1 && m["switchboard_device_streams_replaced_total"] >= 1 &&
			m["switchboard_http_connections_open"] <= 4 // the stream, the observer's, two the attacker's client keeps idle
	})
	// The attacker's idle keep-alives go, so that the address holds the
	// stream alone when its busy connections come (an idle one still open
	// then would take a place of the cap, or be reclaimed, by timing).
	attacker.CloseIdleConnections()
	eventually(t, 30*time.Second, "the attacker's idle connections closed", func() bool {
		return scrapeSeriesWith(t, observer, s.URL)["switchboard_http_connections_open"] <= 2 // the stream, the observer's
	})

	// The address fills its cap with busy connections: requests whose
	// bodies never come.
	var busy []net.Conn
	for i := 0; i < 20; i++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
		c, err := d.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nAuthorization: Bearer %s\r\n\r\n", tn.Live)
		busy = append(busy, c)
	}
	// Past its cap of 15 (the stream is one), the address's connections are
	// closed at once.
	var closed atomic.Int64
	var reads sync.WaitGroup
	for _, c := range busy {
		reads.Go(func() {
			c.SetReadDeadline(time.Now().Add(2 * time.Second)) // one left open is read until then
			if _, err := bufio.NewReader(c).ReadByte(); err != nil && !isTimeout(err) {
				closed.Add(1)
			}
		})
	}
	reads.Wait()
	if closed := closed.Load(); closed != 6 {
		t.Errorf("%d of 20 busy connections closed at once, want 6 (a cap of 15, one taken by the stream)", closed)
	}
	// Idle keep-alives from twenty other addresses fill the node's cap.
	for i := range 20 {
		c := clientFrom(fmt.Sprintf("127.0.1.%d", i+1))
		res, err := c.Get(s.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	// Another client still gets /healthz, another tenant its messages.
	for _, c := range []struct {
		path, key string
	}{{"/healthz", ""}, {"/v1/messages", other.Live}} {
		req, _ := http.NewRequest("GET", s.URL+c.path, nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		res, err := clientFrom("127.0.0.3").Do(req)
		if err != nil {
			t.Fatalf("GET %s from another client: %v", c.path, err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s from another client: %d", c.path, res.StatusCode)
		}
	}
	m := scrapeSeriesWith(t, observer, s.URL)
	if m["switchboard_http_connections_open"] > 40 || m["switchboard_http_connections_refused_total"] < 6 || m["switchboard_http_connections_reclaimed_total"] < 1 {
		t.Errorf("metrics: open %v, refused %v, reclaimed %v", m["switchboard_http_connections_open"],
			m["switchboard_http_connections_refused_total"], m["switchboard_http_connections_reclaimed_total"])
	}
	for _, c := range busy {
		c.Close()
	}
	s.stop()
	wg.Wait()
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
