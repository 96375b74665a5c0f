// Package server wires Switchboard together: it opens the store, builds the
// HTTP API, starts the delivery, webhook and campaign workers, and serves
// until its context ends. cmd/switchboard, the end-to-end tests and the
// benchmarks all start the service through Run; nothing here parses flags.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/campaign"
	"github.com/switchboard/switchboard/clientip"
	"github.com/switchboard/switchboard/dashboard"
	"github.com/switchboard/switchboard/delivery"
	"github.com/switchboard/switchboard/httpapi"
	"github.com/switchboard/switchboard/internal/buildinfo"
	"github.com/switchboard/switchboard/provider"
	"github.com/switchboard/switchboard/provider/android"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/imessage"
	"github.com/switchboard/switchboard/provider/rbm"
	"github.com/switchboard/switchboard/provider/simulator"
	"github.com/switchboard/switchboard/provider/smpp"
	"github.com/switchboard/switchboard/provider/twilio"
	"github.com/switchboard/switchboard/ratelimit"
	"github.com/switchboard/switchboard/sqlstore"
	"github.com/switchboard/switchboard/webhook"
	"github.com/switchboard/switchboard/webhook/ssrf"
)

// Config is everything a node needs; `switchboard serve` fills it from its
// flags. Zero durations take the defaults of serve.
type Config struct {
	// Addr is the listen address (host:port; port 0 picks one, which the
	// "listening" log line reports).
	Addr string
	// Database is sqlite:PATH or postgres://...
	Database string
	// PlansFile, when set, is a JSON file overriding per-plan limits.
	PlansFile string
	// LogLevel is debug, info, warn or error; logs are JSON lines on Log.
	LogLevel string
	Log      io.Writer
	// RedisURL, when set, shares rate limits between nodes through Redis:
	// redis://[:PASSWORD@]HOST:PORT[/DB], rediss:// for TLS, or HOST:PORT.
	RedisURL string
	// AllowInsecureProviders allows a twilio link's base_url over plain
	// http to another host than loopback (see carrier.CheckTransport).
	AllowInsecureProviders bool
	// AllowPrivateWebhooks allows webhook urls on loopback and private
	// networks (development and tests).
	AllowPrivateWebhooks bool
	ShutdownTimeout      time.Duration
	// DeliveryLease is how long a node reserves a claimed message.
	DeliveryLease time.Duration
	// HeartbeatInterval is how often a node of a PostgreSQL cluster beats
	// in the nodes table; NodeDeadAfter how long without a beat makes it
	// dead, its claimed messages and webhook deliveries taken over by a
	// live node (defaults 1 s and 3 s; NodeDeadAfter at least twice
	// HeartbeatInterval). Unused on SQLite.
	HeartbeatInterval, NodeDeadAfter time.Duration
	// DebugAddr, when set, serves pprof there.
	DebugAddr string
	// Identity-provider tokens: an HS256 secret (at least 32 bytes) or a
	// JWKS file, with the issuer and audience, both required, that tokens
	// must name. Run refuses to start with any of them set and the
	// configuration incomplete.
	IdPSecret, IdPJWKS     string
	IdPIssuer, IdPAudience string
	// TLSCert and TLSKey, when set, make the node serve HTTPS (the app
	// refuses plain HTTP except to 127.0.0.1).
	TLSCert, TLSKey string
	// PublicURL is the base of the URLs handed to devices; empty: the
	// scheme and host a device used, or https://DOMAIN with ACME.
	PublicURL string
	// ACME, when it names domains, makes the node serve HTTPS with a
	// certificate it obtains and renews itself (instead of TLSCert).
	ACME ACME
	// PhoneOfflineAfter is how long an android phone stays online after
	// its device was last seen (default 2m).
	PhoneOfflineAfter time.Duration
	// DeviceValidFor is how long a message handed to a device stays valid
	// there (default 10m).
	DeviceValidFor time.Duration
	// PhonePingInterval is how often the app of an android phone pings
	// with its health (default 1m); a phone whose last ping is older than
	// three intervals is in trouble.
	PhonePingInterval time.Duration
	// DeviceOutcomeAfter is how long a message handed to a device, and
	// never reported on, waits past its validUntil (and a grace for the
	// phone's clock) before it fails with its outcome unknown (default
	// 1h).
	DeviceOutcomeAfter time.Duration
	// ProvidersFile, when set, is the JSON file of the carrier links
	// (docs/carriers.md); their secrets are read with Getenv (default
	// os.Getenv) from the variables it names.
	ProvidersFile string
	Getenv        func(string) string
	// SMPP tunes the SMPP links (tests and benchmarks); zero values take
	// the defaults.
	SMPP smpp.Options
	// DBMaxConns caps the PostgreSQL pool (default
	// sqlstore.DefaultMaxConns); DBConnWait bounds a request's wait for a
	// connection before it answers 503 DATABASE_UNAVAILABLE (default
	// sqlstore.DefaultConnWait).
	DBMaxConns int
	DBConnWait time.Duration
	// RedisTimeout bounds a rate-limit decision's wait for Redis before
	// the fallback decides (default ratelimit.DefaultPrimaryTimeout);
	// RedisCooldown is how long Redis is then left alone after failing
	// (default ratelimit.DefaultCooldown).
	RedisTimeout, RedisCooldown time.Duration
	// DBWriters fixes the node's group-commit writers on PostgreSQL; 0
	// adapts them to the live nodes (two alone, one with others).
	DBWriters int
	// MaxConns caps the open HTTP connections (default DefaultMaxConns);
	// HeaderTimeout bounds reading a request's headers (default
	// DefaultHeaderTimeout); IdleTimeout closes idle keep-alive
	// connections (default DefaultIdleTimeout).
	MaxConns      int
	HeaderTimeout time.Duration
	IdleTimeout   time.Duration
	// MaxConnsPerAddr caps the open HTTP connections (and HTTP/2 requests
	// in progress) of one client address, an IPv6 client by its /64;
	// trusted proxies are not capped (default DefaultMaxConnsPerAddr; a
	// negative value: no cap).
	MaxConnsPerAddr int
	// PairingSecret keys the stored form of pairing codes; every node of
	// a database needs the same (see sqlstore/pairingkey.go for where the
	// key comes from without it).
	PairingSecret string
	// TrustedProxies lists the reverse proxies (addresses and prefixes,
	// comma-separated) whose X-Forwarded-For names the client that the
	// per-client limits count; empty: every client is the connection's
	// peer.
	TrustedProxies string
}

func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.DeliveryLease == 0 {
		c.DeliveryLease = 30 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = delivery.DefaultHeartbeat
	}
	if c.NodeDeadAfter == 0 {
		c.NodeDeadAfter = delivery.DefaultDeadAfter
	}
	if c.PhoneOfflineAfter == 0 {
		c.PhoneOfflineAfter = sb.DefaultPhoneOfflineAfter
	}
	if c.DeviceValidFor == 0 {
		c.DeviceValidFor = android.DefaultValidFor
	}
	if c.DeviceOutcomeAfter == 0 {
		c.DeviceOutcomeAfter = sb.DefaultOutcomeAfter
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerAddr == 0 {
		c.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
}

// carrierLinks reads the providers file, if any.
func (c *Config) carrierLinks() ([]carrier.Config, error) {
	if c.ProvidersFile == "" {
		return nil, nil
	}
	links, err := carrier.LoadFile(c.ProvidersFile, c.Getenv)
	if err != nil {
		return nil, err
	}
	if _, err := carrier.CheckTransport(links, c.AllowInsecureProviders); err != nil {
		return nil, err
	}
	for _, l := range links {
		if l.Type == carrier.TypeTwilio && c.PublicURL == "" {
			return nil, fmt.Errorf("providers file: the twilio link %q needs --public-url: Twilio posts its status callbacks and inbound texts to %s%s/...", l.Name, carrier.Prefix, l.Name)
		}
	}
	return links, nil
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})), nil
}

// identityProvider returns the identity provider the configuration sets up,
// nil for none, or why it refuses to start: one with no required issuer or
// audience, or with a short HS256 secret, would accept tokens it should not.
func (c *Config) identityProvider() (*auth.IdentityProvider, error) {
	if c.IdPSecret == "" && c.IdPJWKS == "" && c.IdPIssuer == "" && c.IdPAudience == "" {
		return nil, nil
	}
	idp := &auth.IdentityProvider{Secret: []byte(c.IdPSecret), Issuer: c.IdPIssuer, Audience: c.IdPAudience, Leeway: 30 * time.Second}
	if c.IdPJWKS != "" {
		keys, err := auth.LoadJWKS(c.IdPJWKS)
		if err != nil {
			return nil, err
		}
		idp.Keys = keys
	}
	if err := idp.Check(); err != nil {
		return nil, err
	}
	return idp, nil
}

// Run serves until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, c Config) error {
	c.defaults()
	if err := sqlstore.CheckURL(c.Database); err != nil {
		return fmt.Errorf("--database: %w", err)
	}
	log, err := newLogger(c.Log, c.LogLevel)
	if err != nil {
		return err
	}
	if c.TLSCert != "" || c.TLSKey != "" {
		if c.TLSCert == "" || c.TLSKey == "" {
			return errors.New("--tls-cert and --tls-key go together")
		}
		if _, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey); err != nil {
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	}
	if c.ACME.Enabled() {
		if c.TLSCert != "" {
			return errors.New("--acme-domain and --tls-cert: choose one (ACME obtains the certificate itself)")
		}
		if err := c.ACME.check(c.Database); err != nil {
			return err
		}
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("--public-url %q: want an absolute http(s) URL such as https://sms.example.com", c.PublicURL)
		}
	}
	if c.HeartbeatInterval < 0 || c.NodeDeadAfter < 2*c.HeartbeatInterval {
		return fmt.Errorf("--node-dead-after (%v) must be at least twice --heartbeat-interval (%v): one late beat must not make a node dead", c.NodeDeadAfter, c.HeartbeatInterval)
	}
	proxies, err := clientip.ParseProxies(c.TrustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	slog.SetDefault(log)
	plans, err := sb.LoadPlans(c.PlansFile)
	if err != nil {
		return err
	}
	var redisOpt *redis.Options
	if c.RedisURL != "" {
		if !strings.Contains(c.RedisURL, "://") {
			c.RedisURL = "redis://" + c.RedisURL // host:port
		}
		if redisOpt, err = redis.ParseURL(c.RedisURL); err != nil {
			// A *url.Error quotes the whole URL, password included.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return fmt.Errorf("--redis-url: %w", err)
		}
	}
	idp, err := c.identityProvider()
	if err != nil {
		return err
	}
	// One process serves a SQLite file (see LockSQLite), and the listener
	// is up before anything is written: a start that fails here changes
	// nothing a running node relies on.
	release, err := sqlstore.LockSQLite(c.Database)
	if err != nil {
		return err
	}
	defer release()
	tcp, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	defer tcp.Close()
	var certs *acmeServer
	if c.ACME.Enabled() {
		if certs, err = newACME(c.ACME, log); err != nil {
			return err
		}
		defer certs.close()
		if err := certs.listenHTTP(); err != nil {
			return err
		}
		if c.PublicURL == "" {
			c.PublicURL = "https://" + c.ACME.Domains[0]
			if _, port, _ := net.SplitHostPort(tcp.Addr().String()); port != "443" {
				c.PublicURL += ":" + port
			}
		}
	}
	linkConfigs, err := c.carrierLinks()
	if err != nil {
		return err
	}
	bi := buildinfo.Read()
	log.Info("starting", "version", bi.Version, "commit", bi.Commit, "schema", sqlstore.SchemaVersion())
	db, err := sqlstore.OpenOptions(ctx, c.Database, sqlstore.Options{MaxConns: c.DBMaxConns, ConnWait: c.DBConnWait, Writers: c.DBWriters, Log: log,
		HostNodes: func(n int) { processProcs.hostNodes(n, log) }, PairingSecret: c.PairingSecret})
	if err != nil {
		return err
	}
	defer db.Close()
	defer processProcs.hostNodes(1, log)
	// Carrier links: their state decides whether their phones are online.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := httpapi.NewMetrics(reg)
	carrierMetrics := carrier.NewMetrics(reg)
	var links []carrier.Link
	chatEngines := map[string]provider.ChatEngine{}
	var chatMetrics *carrier.ChatMetrics
	for _, lc := range linkConfigs {
		switch lc.Type {
		case carrier.TypeRBM:
			if chatMetrics == nil {
				chatMetrics = carrier.NewChatMetrics(reg)
			}
			l, err := rbm.New(lc, db, rbm.Options{Metrics: chatMetrics, Log: log})
			if err != nil {
				return err
			}
			links = append(links, l)
			chatEngines[lc.Name] = l
			log.Info("chat engine configured", "link", lc.Name, "type", lc.Type, "base_url", lc.BaseURL, "agent_id", lc.AgentID,
				"events_url", rbm.EventsURL(c.PublicURL, lc.Name))
		case carrier.TypeIMessage:
			if chatMetrics == nil {
				chatMetrics = carrier.NewChatMetrics(reg)
			}
			l := imessage.New(lc, db, imessage.Options{Metrics: chatMetrics, Log: log})
			links = append(links, l)
			chatEngines[lc.Name] = l
			log.Info("chat engine configured", "link", lc.Name, "type", lc.Type, "base_url", lc.BaseURL,
				"webhook", "POST "+carrier.Prefix+lc.Name+"/events/<the secret of webhook_key_env>")
		case carrier.TypeSMPP:
			opt := c.SMPP
			opt.Metrics, opt.Log = carrierMetrics, log
			links = append(links, smpp.New(lc, db, opt))
			log.Info("carrier link configured", "link", lc.Name, "type", lc.Type, "addr", lc.Addr, "system_id", lc.SystemID,
				"tps", lc.TPS, "window", lc.Window)
		case carrier.TypeTwilio:
			links = append(links, twilio.New(lc, db, twilio.Options{PublicURL: c.PublicURL, Metrics: carrierMetrics, Log: log}))
			log.Info("carrier link configured", "link", lc.Name, "type", lc.Type, "base_url", lc.BaseURL, "account_sid", lc.AccountSID,
				"tps", lc.TPS, "window", lc.Window)
		}
	}
	// Links to one SMSC account receive each other's receipts.
	for _, l := range links {
		if sl, ok := l.(*smpp.Link); ok {
			var sib []string
			for _, o := range links {
				if so, ok := o.(*smpp.Link); ok && so != sl && so.Account() == sl.Account() {
					sib = append(sib, so.Name())
				}
			}
			sl.SetSiblings(sib)
		}
	}
	carriers := carrier.NewSet(db, links...)
	// The grace for a phone's clock: a minute, or half the validity when
	// that is shorter (a test's).
	routing := sb.Routing{OfflineAfter: c.PhoneOfflineAfter, PingInterval: c.PhonePingInterval, ClockGrace: min(sb.DefaultClockGrace, c.DeviceValidFor/2),
		OutcomeAfter: c.DeviceOutcomeAfter, Links: carriers}
	db.SetRouting(routing)

	limiter := newLimits(db, redisOpt, ratelimit.FallbackOptions{Timeout: c.RedisTimeout, Cooldown: c.RedisCooldown}, log)
	defer limiter.close()

	if db.Dialect() == sqlstore.SQLite {
		// One process owns a SQLite file: leases held by a process that
		// died are void, so its claimed messages are due again now.
		if err := db.ReleaseLeases(ctx, time.Now()); err != nil {
			return err
		}
		if err := db.ReleaseDeliveryLeases(ctx, time.Now()); err != nil {
			return err
		}
	}
	sim := simulator.New(0)
	defer sim.Close()
	router := provider.NewRouter(sim, db)
	defer router.Close()
	router.Handle(sb.PhoneSMPP, carriers)
	router.Handle(sb.PhoneTwilio, carriers)
	router.Handle(sb.PhoneRBM, carriers)
	router.Handle(sb.PhoneIMessage, carriers)
	// Always, even with no engine: live detection must know which tenants
	// have real phones (auto is then sms for them), not only which have
	// a chat engine.
	router.UseChatEngines(db, chatEngines)
	reg.MustRegister(newStoreCollector(db, routing, log), newRedeliveryCollector(db, sim, log), newLimitsCollector(db))
	observer := delivery.NewObserver(reg, log)
	db.SetObserver(observer.Observe)
	authn := auth.New(db, plans, nil)
	if idp != nil {
		authn.UseIdentityProvider(idp)
	}
	devCfg := android.Config{Store: db, Routing: routing, ValidFor: c.DeviceValidFor, PublicURL: c.PublicURL, Limiter: limiter, Access: authn, Registry: reg, Log: log}
	if limiter.pg != nil {
		devCfg.Shared = limiter.pg // pairing attempts are counted across nodes
	}
	devices := android.New(devCfg)
	if err := startupWarnings(ctx, log, db, c); err != nil {
		return err
	}

	urlChecker := &ssrf.Guard{AllowPrivate: c.AllowPrivateWebhooks}
	// The dashboard's send form sends through the API's own rules; the API
	// serves the dashboard, so it is made after it.
	var api *httpapi.Server
	send := func(ctx context.Context, p *auth.Principal, in dashboard.SendInput) (*sb.Message, error) {
		return api.Send(ctx, p, httpapi.SendInput(in))
	}
	dash, err := dashboard.New(dashboard.Config{Store: db, Auth: authn, Plans: plans, Routing: routing, URLChecker: urlChecker,
		PublicURL: c.PublicURL, Sender: send, Engines: carrier.TenantBindable(linkConfigs)})
	if err != nil {
		return err
	}
	api, err = httpapi.New(httpapi.Config{
		Store:      db,
		Auth:       authn,
		Meter:      auth.NewMeter(db),
		Limiter:    limiter,
		Plans:      plans,
		Channels:   router,
		Metrics:    metrics,
		Routing:    routing,
		Devices:    devices,
		Dashboard:  dash,
		Providers:  carriers,
		Engines:    carrier.TenantBindable(linkConfigs),
		URLChecker: urlChecker,
		Log:        log,
		Ready: func(ctx context.Context) map[string]httpapi.Check {
			return map[string]httpapi.Check{"database": databaseCheck(ctx, db), "rate_limits": limiter.check()}
		},
	})
	if err != nil {
		return err
	}

	ln := limitConns(tcp, c.MaxConns, c.MaxConnsPerAddr, proxies)
	reg.MustRegister(newNodeCollector(db, limiter, ln, c.MaxConns))
	srv := newHTTPServer(proxies.Middleware(api, func(peer netip.Addr) {
		log.Warn("requests carry X-Forwarded-For from a peer that --trusted-proxies does not name: "+
			"every client behind it shares its address's limits (failed authentication, pairing, connections)", "peer", peer.String())
	}), c, ln, log)
	srv.RegisterOnShutdown(devices.Shutdown) // the devices' event streams never end on their own

	// On PostgreSQL the node beats in the nodes table from before its
	// workers claim anything until after they stopped (see Liveness).
	var live *delivery.Liveness
	liveCtx, stopLive := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLive()
	var liveDone sync.WaitGroup
	if db.Dialect() == sqlstore.Postgres {
		live = &delivery.Liveness{Store: db, Addr: ln.Addr().String(), Interval: c.HeartbeatInterval, DeadAfter: c.NodeDeadAfter, Log: log}
		if err := live.Register(ctx); err != nil {
			ln.Close()
			return fmt.Errorf("registering the node: %w", err)
		}
		liveDone.Go(func() { live.Run(liveCtx) })
	}

	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { api.Background(bgCtx) })
	dispatcher := webhook.New(db, webhook.Options{AllowPrivate: c.AllowPrivateWebhooks, Registry: reg, Log: log, Poll: webhookPoll(db.Dialect())})
	runner := campaign.New(db, router, plans, campaign.Options{Registry: reg, Log: log})
	wg.Go(func() {
		delivery.New(db, router, delivery.Options{Lease: c.DeliveryLease, OutcomeTimeout: c.DeliveryLease, Observer: observer, Log: log}).Run(bgCtx)
	})
	wg.Go(func() { devices.Run(bgCtx) })
	wg.Go(func() { carriers.Run(bgCtx) })
	if len(chatEngines) > 0 {
		fallbacks := prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_chat_fallbacks_total",
			Help: "Chat messages of channel auto sent again by SMS because their chat engine did not deliver them within their ttl."})
		reg.MustRegister(fallbacks)
		revokers := map[string]provider.Revoker{}
		for name, e := range chatEngines {
			if rv, ok := e.(provider.Revoker); ok {
				revokers[name] = rv
			}
		}
		fb := &provider.Fallbacks{Store: db, Revokers: revokers, Log: log, Fell: fallbacks.Inc}
		wg.Go(func() { fb.Run(bgCtx, 30*time.Second) })
	}
	wg.Go(func() { dispatcher.Run(bgCtx) })
	wg.Go(func() { runner.Run(bgCtx) })
	wg.Go(func() { limiter.sweep(bgCtx, log) })
	wg.Go(func() {
		db.Listen(bgCtx, func(inv sqlstore.Invalidation) {
			switch {
			case inv.Reset:
				authn.Reset()
			case inv.KeyHash != "":
				authn.ForgetKey(inv.KeyHash)
			case inv.TenantID != "":
				authn.ForgetTenant(inv.TenantID)
				devices.TenantChanged(inv.TenantID)
			}
		})
	})

	if c.DebugAddr != "" {
		dbg := &http.Server{Addr: c.DebugAddr, Handler: pprofMux(), ReadHeaderTimeout: 10 * time.Second}
		go dbg.ListenAndServe()
		defer dbg.Close()
	}

	errc := make(chan error, 1)
	scheme := "http"
	switch {
	case certs != nil:
		scheme = "https"
		srv.TLSConfig = certs.tlsConfig()
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	case c.TLSCert != "":
		scheme = "https"
		go func() { errc <- srv.ServeTLS(ln, c.TLSCert, c.TLSKey) }()
	default:
		go func() { errc <- srv.Serve(ln) }()
	}
	log.Info("listening", "addr", ln.Addr().String(), "scheme", scheme, "database", db.Dialect().String(), "public_url", c.PublicURL)
	if certs != nil {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		certs.start(port, c)
	}

	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			// The grace period is over: what is still open is closed, and
			// the node stops as usual (its workers drain, its claims go
			// back). A request cut off here gets no answer; its client
			// retries, and an accepted send was committed before its 202.
			log.Warn("shutdown grace period ran out; closing the connections still open",
				"grace", c.ShutdownTimeout.String(), "open_connections", ln.open.Load())
			srv.Close() // its error is the listener's, closed already by Shutdown
			err = nil
		}
	}
	// The event streams served outside the server's handlers (which its
	// Shutdown does not wait for) end before the workers and the database.
	devices.Shutdown()
	stopBg()
	wg.Wait()
	if live != nil {
		// The workers have stopped: what this node still claims (sent
		// messages waiting for outcomes the simulator will not report now,
		// deliveries not attempted) goes to the other nodes at once.
		stopLive()
		liveDone.Wait()
		lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		live.Leave(lctx)
		cancel()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// startupWarnings logs, at warn level, what an operator should know about
// how this node will behave: settings meant for development, and live
// traffic that will not reach real phones.
func startupWarnings(ctx context.Context, log *slog.Logger, db *sqlstore.DB, c Config) error {
	if c.AllowPrivateWebhooks {
		log.Warn("webhooks may reach loopback and private addresses (--allow-private-webhooks): " +
			"a development setting; never use it on a server that takes webhook urls from people you do not trust")
	}
	if db.PairingKeySource() == sqlstore.PairingKeyDatabase {
		log.Warn("pairing codes are keyed with a secret kept in the database, so a copy of the database could tell the codes live at that moment: " +
			"set --pairing-secret (the same on every node) to keep it out")
	}
	phones, tenants, err := db.SimulatedPhones(ctx)
	if err != nil {
		return err
	}
	if phones > 0 {
		log.Warn("live messages sent from simulated phones are delivered by the built-in simulator and reach no real phone: "+
			"give those tenants android phones (POST /v1/phones) and delete the simulated ones to send for real",
			"simulated_phones", phones, "tenants", tenants)
	}
	return nil
}

// pprofMux serves the runtime profiles, for --debug-addr only.
func pprofMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// webhookPoll is how often the webhook dispatcher looks for deliveries
// without a wake-up (0: the dispatcher's default). Its poll finds those
// other nodes queued; a SQLite database has no other node, and this
// process wakes its dispatcher for every delivery it queues or makes due,
// and after recording attempts (a retry), so there it is only a safety
// net.
func webhookPoll(d sqlstore.Dialect) time.Duration {
	if d == sqlstore.SQLite {
		return 5 * time.Second
	}
	return 0
}
