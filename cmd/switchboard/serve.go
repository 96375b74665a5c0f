package main

import (
	"context"
	"fmt"
	"io"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/delivery"
	"github.com/switchboard/switchboard/provider/android"
	"github.com/switchboard/switchboard/ratelimit"
	switchboard "github.com/switchboard/switchboard/server"
	"github.com/switchboard/switchboard/sqlstore"
)

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("serve", getenv, stdout)
	addr := f.string("addr", "127.0.0.1:8080", "listen address")
	db := f.database()
	plans := f.string("plans", "", "JSON file overriding per-plan limits")
	logLevel := f.string("log-level", "info", "log level: debug, info, warn, error")
	redisURL := f.string("redis-url", "", "redis://host:port (or host:port): share rate limits between nodes through Redis (default: in-process)")
	allowPrivate := f.bool("allow-private-webhooks", false, "allow webhook urls on loopback and private addresses (for local development and tests)")
	lease := f.duration("delivery-lease", 30*time.Second, "how long a node reserves a claimed message, and waits for a sent message's outcome, before another node may hand it over again (PostgreSQL; SQLite restarts release leases at once)")
	heartbeat := f.duration("heartbeat-interval", delivery.DefaultHeartbeat, "PostgreSQL: how often this node beats in the nodes table")
	deadAfter := f.duration("node-dead-after", delivery.DefaultDeadAfter, "PostgreSQL: a node that has not beaten for this long is dead, and a live node makes its claimed messages and webhook deliveries due at once (at least twice --heartbeat-interval)")
	debugAddr := f.string("debug-addr", "", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); off by default")
	idpSecret := f.string("idp-hs256-secret", "", "accept identity-provider JWTs signed HS256 with this secret (prefer the environment variable)")
	idpJWKS := f.string("idp-jwks", "", "accept identity-provider JWTs signed RS256/ES256 by the keys of this JWKS file")
	idpIssuer := f.string("idp-issuer", "", "required iss claim of identity-provider tokens")
	idpAudience := f.string("idp-audience", "", "required aud claim of identity-provider tokens")
	shutdown := f.duration("shutdown-timeout", 10*time.Second, "how long to wait for in-flight requests on shutdown; connections still open after it are closed")
	tlsCert := f.string("tls-cert", "", "serve HTTPS with this certificate (PEM; with --tls-key): the Android app refuses plain HTTP except to 127.0.0.1")
	tlsKey := f.string("tls-key", "", "the private key of --tls-cert (PEM)")
	publicURL := f.string("public-url", "", "the base URL devices reach this service at, e.g. https://sms.example.com (default: the scheme and host a device used)")
	offlineAfter := f.duration("phone-offline-after", sb.DefaultPhoneOfflineAfter, "an android phone is offline once its device was not seen for this long")
	allowInsecureProviders := f.bool("allow-insecure-providers", false, "allow a twilio link's base_url over plain http to a host other than loopback (a mock; the auth token crosses the network in clear)")
	providers := f.string("providers", "", "JSON file of the carrier links (SMPP binds, Twilio accounts); their secrets come from the environment variables it names (see docs/carriers.md)")
	pingInterval := f.duration("phone-ping-interval", sb.DefaultPingInterval, "how often the app of an android phone pings with its health (battery, network); a ping older than three intervals flags the phone")
	validFor := f.duration("device-valid-for", android.DefaultValidFor, "how long a message handed to an android phone stays valid there (its validUntil: the app does not send it after)")
	outcomeAfter := f.duration("device-outcome-after", sb.DefaultOutcomeAfter, "a message an android phone took and never reported on fails (\"outcome unknown\") this long after its validUntil; it never goes to another phone, since it may have been sent")
	dbMaxConns := f.int("db-max-conns", sqlstore.DefaultMaxConns, "PostgreSQL: the most connections this node opens (plus one for LISTEN and one for the heartbeat); the default lets five nodes share PostgreSQL's default max_connections=100")
	dbWait := f.duration("db-wait", sqlstore.DefaultConnWait, "PostgreSQL: how long a request waits for a connection when all are busy before it answers 503 DATABASE_UNAVAILABLE")
	redisTimeout := f.duration("redis-timeout", ratelimit.DefaultPrimaryTimeout, "with --redis-url: how long a rate-limit decision waits for Redis before the fallback (PostgreSQL, or memory on SQLite) decides instead")
	redisCooldown := f.duration("redis-cooldown", ratelimit.DefaultCooldown, "with --redis-url: how long Redis is left alone after 3 failures in a row before it is tried again")
	dbWriters := f.int("db-writers", 0, "PostgreSQL: group-commit writers of this node, each a transaction that batches concurrent writes; 0 adapts them to the live nodes: 2 on a node alone, 1 while other nodes share the database (docs/scale-out.md)")
	maxConns := f.int("max-conns", switchboard.DefaultMaxConns, "the most HTTP connections this node keeps open at once (idle keep-alives and device event streams count); more wait to be accepted")
	maxConnsPerAddr := f.int("max-conns-per-addr", switchboard.DefaultMaxConnsPerAddr, "the most HTTP connections (and HTTP/2 requests in progress) one client address keeps open, an IPv6 client by its /64; the proxies of --trusted-proxies are not capped; 0: no cap")
	headerTimeout := f.duration("header-timeout", switchboard.DefaultHeaderTimeout, "how long a client may take to send a request's headers before the connection is closed")
	idleTimeout := f.duration("idle-timeout", switchboard.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	acmeDomains := f.list("acme-domain", "serve HTTPS for this domain with a certificate obtained and renewed through ACME (Let's Encrypt); repeatable; --addr then defaults to :443 and --public-url to https://DOMAIN (see docs/deploy.md)")
	acmeEmail := f.string("acme-email", "", "with --acme-domain: the address the CA sends expiry and problem notices to")
	acmeDir := f.string("acme-dir", "", "with --acme-domain: the CA's ACME directory URL (default Let's Encrypt's production directory)")
	acmeCache := f.string("acme-cache", "", "with --acme-domain: the directory the ACME account key and certificates are kept in (default: acme/ beside a SQLite database; required on PostgreSQL)")
	acmeHTTP := f.string("acme-http-addr", "", "with --acme-domain: also listen here (e.g. :80) for ACME's HTTP-01 challenges, and redirect every other plain-HTTP GET to HTTPS")
	acmeRoots := f.string("acme-ca-roots", "", "with --acme-domain: PEM file of the CA certificates the ACME directory's HTTPS is checked against, for a private ACME CA (default: the system's)")
	pairingSecret := f.string("pairing-secret", "", "a secret of at least 32 characters that keys the stored form of pairing codes; the same on every node (default: a key in a file beside a SQLite database, or in a PostgreSQL database's server_secrets table); prefer the environment variable")
	trustedProxies := f.string("trusted-proxies", "", "comma-separated addresses or prefixes (10.0.0.0/8, ::1) of the reverse proxies in front of this node: behind them, the client that per-address limits count is the one X-Forwarded-For names (default: none, every client is the connection's peer)")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if len(*acmeDomains) > 0 && !f.given("addr") {
		*addr = ":443"
	}
	if len(*acmeDomains) == 0 {
		for _, name := range []string{"acme-email", "acme-dir", "acme-cache", "acme-http-addr", "acme-ca-roots"} {
			if f.given(name) {
				return fmt.Errorf("--%s needs --acme-domain", name)
			}
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"db-max-conns", *dbMaxConns}, {"max-conns", *maxConns}} {
		if n.v < 1 {
			return fmt.Errorf("--%s must be at least 1, not %d", n.name, n.v)
		}
	}
	if *maxConnsPerAddr < 0 {
		return fmt.Errorf("--max-conns-per-addr must be 0 (no cap) or more, not %d", *maxConnsPerAddr)
	}
	if *maxConnsPerAddr == 0 {
		*maxConnsPerAddr = -1 // no cap
	}
	if *redisTimeout <= 0 || *redisCooldown <= 0 {
		return fmt.Errorf("--redis-timeout and --redis-cooldown must be more than 0")
	}
	if *validFor <= 0 || *outcomeAfter <= 0 {
		return fmt.Errorf("--device-valid-for and --device-outcome-after must be more than 0")
	}
	if *pingInterval < time.Second {
		return fmt.Errorf("--phone-ping-interval must be at least 1s")
	}
	if *dbWriters < 0 {
		return fmt.Errorf("--db-writers must be 0 (adapt to the live nodes) or more, not %d", *dbWriters)
	}
	if err := checkDatabase(*db); err != nil {
		return err
	}
	return switchboard.Run(ctx, switchboard.Config{Addr: *addr, Database: *db, PlansFile: *plans, LogLevel: *logLevel, Log: stderr,
		RedisURL: *redisURL, ShutdownTimeout: *shutdown, AllowPrivateWebhooks: *allowPrivate, DeliveryLease: *lease,
		HeartbeatInterval: *heartbeat, NodeDeadAfter: *deadAfter,
		DebugAddr: *debugAddr, IdPSecret: *idpSecret, IdPJWKS: *idpJWKS, IdPIssuer: *idpIssuer, IdPAudience: *idpAudience,
		TLSCert: *tlsCert, TLSKey: *tlsKey, PublicURL: *publicURL, PhoneOfflineAfter: *offlineAfter, DeviceValidFor: *validFor, PhonePingInterval: *pingInterval, DeviceOutcomeAfter: *outcomeAfter,
		ProvidersFile: *providers, AllowInsecureProviders: *allowInsecureProviders, Getenv: getenv, DBMaxConns: *dbMaxConns, DBConnWait: *dbWait, DBWriters: *dbWriters, RedisTimeout: *redisTimeout, RedisCooldown: *redisCooldown,
		MaxConns: *maxConns, MaxConnsPerAddr: *maxConnsPerAddr, HeaderTimeout: *headerTimeout, IdleTimeout: *idleTimeout, TrustedProxies: *trustedProxies, PairingSecret: *pairingSecret,
		ACME: switchboard.ACME{Domains: *acmeDomains, Email: *acmeEmail, Directory: *acmeDir, Cache: *acmeCache, HTTPAddr: *acmeHTTP, CARoots: *acmeRoots}})
}
