package main

// serve --acme-domain against Pebble, Let's Encrypt's ACME test server, run
// in-process on loopback: its validation authority resolves the domain
// (through a DNS server of the test) to 127.0.0.1 and connects to the
// challenge ports of the server under test, as Let's Encrypt would connect
// to ports 443 and 80.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	pebbledb "github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"

	"github.com/switchboard/switchboard/provider/android/agent"
)

// acmeDomain is the name the tests obtain certificates for.
const acmeDomain = "sms.switchboard.test"

// pebble is an in-process Pebble: its ACME directory (over HTTPS with a
// certificate of its own, trusted through RootsFile), and the CA whose root
// the certificates it issues chain to.
type pebble struct {
	DirURL    string
	RootsFile string // PEM: the directory's HTTPS certificate
	ca        *ca.CAImpl
	db        *pebbledb.MemoryStore
	logger    *log.Logger
	dnsAddr   string
	wfe       atomic.Pointer[http.Handler]
	ready     chan struct{}
	logs      *syncBuffer
	requests  atomic.Int64
}

// startPebble starts Pebble's directory and a DNS server that resolves
// every name to 127.0.0.1. The directory answers once validate has told
// Pebble which ports to validate on.
func startPebble(t *testing.T) *pebble {
	t.Helper()
	// No random sleeps before validating, no nonces refused at random, no
	// authorization reused from another test's order.
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	t.Setenv("PEBBLE_AUTHZREUSE", "0")
	t.Setenv("PEBBLE_VA_ALWAYS_VALID", "") // really validate
	p := &pebble{ready: make(chan struct{}), logs: &syncBuffer{}}
	p.logger = log.New(p.logs, "pebble ", log.Lmicroseconds)
	p.db = pebbledb.NewMemoryStore()
	p.ca = ca.New(p.logger, p.db, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "default"}})

	// Pebble asks its resolver over TCP.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dnsSrv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(127, 0, 0, 1)})
			}
		}
		w.WriteMsg(m)
	})}
	go dnsSrv.ActivateAndServe()
	t.Cleanup(func() { dnsSrv.Shutdown() })
	p.dnsAddr = ln.Addr().String()

	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-p.ready:
		case <-time.After(30 * time.Second):
			http.Error(w, "pebble not configured", http.StatusServiceUnavailable)
			return
		}
		p.requests.Add(1)
		(*p.wfe.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	p.DirURL = ts.URL + wfe.DirectoryPath
	p.RootsFile = filepath.Join(t.TempDir(), "pebble-web.pem")
	if err := os.WriteFile(p.RootsFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pebble's log:\n%s", p.logs.String())
		}
	})
	return p
}

// validate makes Pebble's validation authority connect to httpPort for
// HTTP-01 and tlsPort for TLS-ALPN-01 challenges, and opens the directory.
func (p *pebble) validate(httpPort, tlsPort int) {
	v := va.New(p.logger, httpPort, tlsPort, false, p.dnsAddr, p.db)
	front := wfe.New(p.logger, p.db, v, p.ca, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	h := http.Handler(front.Handler())
	p.wfe.Store(&h)
	close(p.ready)
}

// roots is a pool holding the root of the certificates Pebble issues.
func (p *pebble) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.GetRootCert(0).Cert)
	return pool
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	_, port, _ := net.SplitHostPort(freeAddr(t))
	n, _ := strconv.Atoi(port)
	return n
}

// acmeClient is an HTTPS client that reaches acmeDomain at addr (as DNS
// would) and trusts only Pebble's root.
func acmeClient(addr string, roots *x509.CertPool) *http.Client {
	return &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: acmeDomain},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

// logLine waits for the server's log line with msg and returns it.
func logLine(t *testing.T, s *server, msg string) map[string]any {
	t.Helper()
	var line map[string]any
	eventually(t, 60*time.Second, "the log line "+msg, func() bool {
		for _, l := range strings.Split(s.logs.String(), "\n") {
			if strings.Contains(l, `"msg":"`+msg+`"`) {
				json.Unmarshal([]byte(l), &line)
				return true
			}
		}
		return false
	})
	return line
}

// TestACME: serve --acme-domain obtains a certificate from Pebble through
// TLS-ALPN-01 on its HTTPS port, or through HTTP-01 on --acme-http-addr
// (the other challenge's port closed, so that only one can succeed); a
// client that trusts only Pebble's root completes a verified handshake,
// and a device pairs and delivers over it. The certificate is kept in the
// cache beside the database: a restart serves it without asking the CA.
func TestACME(t *testing.T) {
	for _, challenge := range []string{"tls-alpn-01", "http-01"} {
		t.Run(challenge, func(t *testing.T) {
			p := startPebble(t)
			db := sqliteURL(t)
			args := append([]string{"--acme-domain", acmeDomain, "--acme-dir", p.DirURL, "--acme-ca-roots", p.RootsFile,
				"--acme-email", "ops@example.com"}, devArgs...)
			if challenge == "http-01" {
				args = append(args, "--acme-http-addr", "127.0.0.1:0")
			}
			s := startServer(t, db, args...)
			addr := strings.TrimPrefix(s.URL, "https://")
			_, port, _ := net.SplitHostPort(addr)
			tlsPort, _ := strconv.Atoi(port)
			var httpAddr string
			if challenge == "http-01" {
				httpAddr = logLine(t, s, "acme http listening")["addr"].(string)
				_, hp, _ := net.SplitHostPort(httpAddr)
				httpPort, _ := strconv.Atoi(hp)
				p.validate(httpPort, closedPort(t))
			} else {
				p.validate(closedPort(t), tlsPort)
			}
			if pub := logLine(t, s, "listening")["public_url"]; pub != "https://"+acmeDomain+":"+port {
				t.Errorf("public URL %v, want https://%s:%s", pub, acmeDomain, port)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("server log:\n%s", s.logs.String())
				}
			})
			ready := logLine(t, s, "acme certificate ready")
			if ready["domain"] != acmeDomain || !strings.HasPrefix(fmt.Sprint(ready["issuer"]), "Pebble Intermediate CA") {
				t.Errorf("acme certificate ready: %v", ready)
			}

			// A verified handshake: the chain leads to Pebble's root and
			// names the domain.
			roots := p.roots()
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: acmeDomain})
			if err != nil {
				t.Fatalf("TLS handshake verified against Pebble's root: %v", err)
			}
			leaf := conn.ConnectionState().PeerCertificates[0]
			conn.Close()
			if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != acmeDomain {
				t.Errorf("certificate for %v, want [%s]", leaf.DNSNames, acmeDomain)
			}
			// A client that trusts the system's roots only refuses it.
			if c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: acmeDomain}); err == nil {
				c.Close()
				t.Errorf("a client without Pebble's root accepted the certificate")
			}

			// The device protocol over it, at the public URL.
			s.URL = "https://" + acmeDomain + ":" + port
			s.client = acmeClient(addr, roots)
			tn := msgTenant(t, s.DB)
			devOnlyAndroid(t, s, tn)
			_, _, code := devPhone(t, s, tn.Live, nil)
			a, _ := devAgent(t, s, code, agent.Options{HTTP: acmeClient(addr, roots)}, true)
			hooks, err := a.Webhooks(context.Background())
			if err != nil || len(hooks) != 3 || !strings.HasPrefix(hooks[0].URL, s.URL+"/api/mobile/v1/inbound/") {
				t.Fatalf("webhooks: %+v %v", hooks, err)
			}
			id := msgSend(t, s, tn.Live, map[string]any{"to": msgAwake(t), "body": "over ACME's certificate"})["message_id"].(string)
			msgWait(t, s, tn.Live, id, "delivered")

			if challenge == "http-01" {
				checkRedirect(t, httpAddr, port)
			}

			// The account key and the certificate are in the cache beside
			// the database, readable by their owner only.
			cache := filepath.Join(filepath.Dir(strings.TrimPrefix(db, "sqlite:")), "acme")
			for _, name := range []string{"acme_account+key", acmeDomain} {
				fi, err := os.Stat(filepath.Join(cache, name))
				if err != nil || fi.Mode().Perm()&0o077 != 0 {
					t.Errorf("cache %s: %v %v", name, fi, err)
				}
			}

			// A restart serves the cached certificate without asking the CA.
			s.stop()
			asked := p.requests.Load()
			s2 := startServer(t, db, args...)
			addr2 := strings.TrimPrefix(s2.URL, "https://")
			logLine(t, s2, "acme certificate ready")
			conn, err = tls.Dial("tcp", addr2, &tls.Config{RootCAs: roots, ServerName: acmeDomain})
			if err != nil {
				t.Fatalf("after a restart: %v", err)
			}
			if again := conn.ConnectionState().PeerCertificates[0]; again.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
				t.Errorf("after a restart the node serves another certificate (serial %v, was %v)", again.SerialNumber, leaf.SerialNumber)
			}
			conn.Close()
			if n := p.requests.Load() - asked; n != 0 {
				t.Errorf("the restarted node made %d requests to the CA, want none", n)
			}
		})
	}
}

// checkRedirect: plain HTTP on the HTTP-01 port sends GET and HEAD to the
// same path over HTTPS at the configured domain, and refuses the rest.
func checkRedirect(t *testing.T, httpAddr, httpsPort string) {
	t.Helper()
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct{ method, host, want string }{
		{"GET", acmeDomain, "https://" + acmeDomain + ":" + httpsPort + "/v1/messages?limit=5"},
		{"HEAD", acmeDomain + ":80", "https://" + acmeDomain + ":" + httpsPort + "/v1/messages?limit=5"},
		{"GET", "evil.example", "https://" + acmeDomain + ":" + httpsPort + "/v1/messages?limit=5"},
		{"POST", acmeDomain, ""},
	} {
		req, _ := http.NewRequest(c.method, "http://"+httpAddr+"/v1/messages?limit=5", nil)
		req.Host = c.host
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if c.want == "" {
			if res.StatusCode != http.StatusBadRequest {
				t.Errorf("plain-HTTP %s: %d, want 400", c.method, res.StatusCode)
			}
			continue
		}
		if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != c.want {
			t.Errorf("plain-HTTP %s (Host %s): %d to %q, want 308 to %q", c.method, c.host, res.StatusCode, res.Header.Get("Location"), c.want)
		}
	}
}

// TestACMEFlags: what serve refuses before it asks a CA for anything.
func TestACMEFlags(t *testing.T) {
	t.Parallel()
	certFile, keyFile, _ := selfSignedCert(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--acme-domain", "https://sms.example.com"}, `--acme-domain "https://sms.example.com": want a DNS name`},
		{[]string{"--acme-domain", "sms.example.com:443"}, "want a DNS name"},
		{[]string{"--acme-domain", "localhost"}, "want a DNS name"},
		{[]string{"--acme-domain", "192.0.2.1"}, "not an IP address"},
		{[]string{"--acme-domain", "a.example.com", "--acme-domain", "A.example.com"}, "given twice"},
		{[]string{"--acme-domain", "sms.example.com", "--tls-cert", certFile, "--tls-key", keyFile}, "choose one"},
		{[]string{"--acme-email", "ops@example.com"}, "--acme-email needs --acme-domain"},
		{[]string{"--acme-http-addr", ":80"}, "--acme-http-addr needs --acme-domain"},
	} {
		err := run(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0", "--database", sqliteURL(t)}, c.args...), noEnv, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("serve %v: %v, want one line saying %q", c.args, err, c.want)
		}
	}
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--database", postgresURL(t), "--acme-domain", "sms.example.com"}, noEnv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--acme-cache is required with a PostgreSQL database") {
		t.Errorf("serve --acme-domain on PostgreSQL without --acme-cache: %v", err)
	}
}
