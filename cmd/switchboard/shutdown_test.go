package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestShutdownGraceRunsOut: a request still open when --shutdown-timeout
// runs out (here a send whose body never finishes) is cut off, the node
// says so and stops cleanly rather than failing.
func TestShutdownGraceRunsOut(t *testing.T) {
	t.Parallel()
	s := startServer(t, sqliteURL(t), "--shutdown-timeout", "1s")
	tn := newTenant(t, s.DB)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"to\":", tn.Test)
	// The node has accepted it: it and the scrape's own are open.
	eventually(t, 30*time.Second, "the node to accept the connection", func() bool {
		return metric(scrape(t, s), "switchboard_http_connections_open") >= 2
	})
	s.stop() // fails the test if the node stops with an error
	if !strings.Contains(s.logs.String(), "shutdown grace period ran out; closing the connections still open") {
		t.Fatalf("no line about the grace period running out:\n%s", s.logs.String())
	}
}
