package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// ACME has a node obtain and renew its own certificate from an ACME CA
// (Let's Encrypt by default) for the domains it serves: the Android app
// refuses plain HTTP to anything but 127.0.0.1, and this is HTTPS without a
// proxy or certbot.
type ACME struct {
	// Domains are the names the certificate is for; the first is the one
	// --public-url defaults to. Each must resolve to this node, which must
	// be reachable on port 443 (TLS-ALPN-01) or, with HTTPAddr on port 80,
	// on port 80 (HTTP-01).
	Domains []string
	// Email is given to the CA for expiry and problem notices (optional).
	Email string
	// Directory is the CA's ACME directory URL (default Let's Encrypt's).
	Directory string
	// Cache is the directory the account key and certificates are kept
	// in (default: "acme" beside a SQLite database; required on
	// PostgreSQL). Keep it: the CA limits how often it issues.
	Cache string
	// HTTPAddr, when set (":80"), serves ACME's HTTP-01 challenges and
	// redirects every other request to HTTPS.
	HTTPAddr string
	// CARoots, when set, is a PEM file of the CA certificates the
	// directory's own HTTPS certificate is checked against, for a private
	// ACME CA (step-ca, Pebble); default: the system's roots.
	CARoots string
}

// Enabled reports whether the node obtains its certificate through ACME.
func (a *ACME) Enabled() bool { return len(a.Domains) > 0 }

// check normalizes the domains and fills the defaults, or says what is
// wrong. database is the node's --database, beside which the cache goes.
func (a *ACME) check(database string) error {
	seen := map[string]bool{}
	for i, d := range a.Domains {
		d = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
		switch {
		case d == "" || strings.ContainsAny(d, "/:@ *") || !strings.Contains(d, "."):
			return fmt.Errorf("--acme-domain %q: want a DNS name such as sms.example.com (no scheme, port, path or wildcard)", a.Domains[i])
		case net.ParseIP(d) != nil:
			return fmt.Errorf("--acme-domain %q: an ACME certificate is for a DNS name, not an IP address", a.Domains[i])
		case seen[d]:
			return fmt.Errorf("--acme-domain %q is given twice", d)
		}
		seen[d] = true
		a.Domains[i] = d
	}
	if a.Directory == "" {
		a.Directory = autocert.DefaultACMEDirectory
	}
	if a.Cache == "" {
		path, ok := strings.CutPrefix(database, "sqlite:")
		if !ok {
			return errors.New("--acme-cache is required with a PostgreSQL database: a directory this node keeps its ACME account and certificates in")
		}
		a.Cache = filepath.Join(filepath.Dir(path), "acme")
	}
	return nil
}

// acmeServer is a node's ACME state: the manager, and the HTTP-01 listener
// if any.
type acmeServer struct {
	cfg     ACME
	manager *autocert.Manager
	log     *slog.Logger
	httpLn  net.Listener
	httpSrv *http.Server
	// stop cancels the CA requests in flight at shutdown; warm waits for
	// the first certificates' requests.
	stop context.CancelFunc
	warm sync.WaitGroup
}

// newACME prepares the manager; nothing is asked of the CA until the node
// listens (see start).
func newACME(cfg ACME, log *slog.Logger) (*acmeServer, error) {
	if err := os.MkdirAll(cfg.Cache, 0o700); err != nil {
		return nil, fmt.Errorf("--acme-cache: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.CARoots != "" {
		pem, err := os.ReadFile(cfg.CARoots)
		if err != nil {
			return nil, fmt.Errorf("--acme-ca-roots: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--acme-ca-roots %s: no PEM certificate in it", cfg.CARoots)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	ctx, stop := context.WithCancel(context.Background())
	domains := map[string]bool{}
	for _, d := range cfg.Domains {
		domains[d] = true
	}
	a := &acmeServer{cfg: cfg, log: log, stop: stop}
	a.manager = &autocert.Manager{
		Prompt: autocert.AcceptTOS,
		Cache:  autocert.DirCache(cfg.Cache),
		Email:  cfg.Email,
		// The name a client or the CA asked for, without a port (the CA
		// names one when its challenge port is not 80).
		HostPolicy: func(_ context.Context, host string) error {
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			if !domains[strings.ToLower(host)] {
				return fmt.Errorf("acme: %q is not one of the --acme-domain names", host)
			}
			return nil
		},
		Client: &acme.Client{DirectoryURL: cfg.Directory, HTTPClient: &http.Client{
			Transport: cancelTransport{ctx: ctx, rt: transport}, Timeout: time.Minute}},
	}
	return a, nil
}

// listenHTTP opens the HTTP-01 listener, if any, before the node touches
// its database (as the main listener is).
func (a *acmeServer) listenHTTP() error {
	if a.cfg.HTTPAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", a.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--acme-http-addr: %w", err)
	}
	a.httpLn = ln
	return nil
}

// tlsConfig is the HTTPS server's: certificates from the manager, and the
// acme-tls/1 protocol of TLS-ALPN-01. A client that names no server (an IP
// address in its URL) gets the first domain's certificate.
func (a *acmeServer) tlsConfig() *tls.Config {
	cfg := a.manager.TLSConfig()
	get := cfg.GetCertificate
	cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if hello.ServerName == "" {
			h := *hello
			h.ServerName = a.cfg.Domains[0]
			hello = &h
		}
		return get(hello)
	}
	cfg.MinVersion = tls.VersionTLS12
	return cfg
}

// start serves the HTTP-01 listener and asks for the certificates at once,
// so that the first device does not wait for them; httpsPort is the port
// the redirect sends plain-HTTP clients to.
func (a *acmeServer) start(httpsPort string, c Config) {
	if a.httpLn != nil {
		a.httpSrv = &http.Server{
			Handler:           a.manager.HTTPHandler(redirectHTTPS(a.cfg.Domains, httpsPort)),
			ReadHeaderTimeout: c.HeaderTimeout,
			ReadTimeout:       requestTimeout,
			WriteTimeout:      requestTimeout,
			IdleTimeout:       c.IdleTimeout,
			MaxHeaderBytes:    MaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
		}
		go a.httpSrv.Serve(a.httpLn)
		a.log.Info("acme http listening", "addr", a.httpLn.Addr().String())
	}
	for _, d := range a.cfg.Domains {
		a.warm.Go(func() {
			// A hello like a current browser's, so the certificate asked
			// for is the ECDSA one that clients will be given.
			cert, err := a.manager.GetCertificate(&tls.ClientHelloInfo{ServerName: d,
				SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256}, SupportedCurves: []tls.CurveID{tls.CurveP256},
				CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}})
			if err != nil {
				a.log.Error("acme: no certificate yet; HTTPS handshakes for this name fail until one is obtained (each retries)",
					"domain", d, "directory", a.cfg.Directory, "err", err)
				return
			}
			a.log.Info("acme certificate ready", "domain", d, "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339),
				"issuer", cert.Leaf.Issuer.CommonName)
		})
	}
}

// close stops the HTTP-01 listener and the CA requests in flight.
func (a *acmeServer) close() {
	a.stop()
	if a.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a.httpSrv.Shutdown(ctx)
		cancel()
	} else if a.httpLn != nil {
		a.httpLn.Close()
	}
	a.warm.Wait()
}

// redirectHTTPS sends a plain-HTTP GET or HEAD to the same path over
// HTTPS (308, so a client keeps the method), at the host asked for when it
// is one of domains and at the first domain otherwise (never at a host a
// request made up); any other method is refused (400): its body, an API key
// in its headers perhaps, already crossed the network in the clear, and a
// client that follows a redirect would send it again.
func redirectHTTPS(domains []string, httpsPort string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host = strings.ToLower(host); !slices.Contains(domains, host) {
			host = domains[0]
		}
		if httpsPort != "443" {
			host = net.JoinHostPort(host, httpsPort)
		}
		target := "https://" + host + r.URL.RequestURI()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "Use HTTPS: "+target, http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, target, http.StatusPermanentRedirect)
	})
}

// cancelTransport ends the requests to the CA when ctx ends (the node
// shuts down), so that no certificate request outlives the node.
type cancelTransport struct {
	ctx context.Context
	rt  http.RoundTripper
}

func (t cancelTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(t.ctx, cancel)
	context.AfterFunc(ctx, func() {
		stop()
		cancel()
	})
	return t.rt.RoundTrip(r.WithContext(ctx))
}
