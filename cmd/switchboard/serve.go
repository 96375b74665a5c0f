package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/campaign"
	"github.com/switchboard/switchboard/delivery"
	"github.com/switchboard/switchboard/httpapi"
	"github.com/switchboard/switchboard/ratelimit"
	"github.com/switchboard/switchboard/simulator"
	"github.com/switchboard/switchboard/sqlstore"
	"github.com/switchboard/switchboard/webhook"
	"github.com/switchboard/switchboard/webhook/ssrf"
)

type serveConfig struct {
	addr, database, plans, logLevel string
	redisURL                        string
	allowPrivateWebhooks            bool
	shutdownTimeout                 time.Duration
	deliveryLease                   time.Duration
	debugAddr                       string
	idpSecret, idpJWKS              string
	idpIssuer, idpAudience          string
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newFlags("serve", getenv, stderr)
	addr := f.string("addr", "127.0.0.1:8080", "listen address")
	db := f.database()
	plans := f.string("plans", "", "JSON file overriding per-plan limits")
	logLevel := f.string("log-level", "info", "log level: debug, info, warn, error")
	redisURL := f.string("redis-url", "", "redis://host:port: share rate limits between nodes through Redis (default: in-process)")
	allowPrivate := f.bool("allow-private-webhooks", false, "allow webhook urls on loopback and private addresses (for local development and tests)")
	lease := f.duration("delivery-lease", 30*time.Second, "how long a node reserves a claimed message, and waits for a sent message's outcome, before another node may hand it over again (PostgreSQL; SQLite restarts release leases at once)")
	debugAddr := f.string("debug-addr", "", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); off by default")
	idpSecret := f.string("idp-hs256-secret", "", "accept identity-provider JWTs signed HS256 with this secret (prefer the environment variable)")
	idpJWKS := f.string("idp-jwks", "", "accept identity-provider JWTs signed RS256/ES256 by the keys of this JWKS file")
	idpIssuer := f.string("idp-issuer", "", "required iss claim of identity-provider tokens")
	idpAudience := f.string("idp-audience", "", "required aud claim of identity-provider tokens")
	shutdown := f.duration("shutdown-timeout", 10*time.Second, "how long to wait for in-flight requests on shutdown")
	if _, err := f.parse(args); err != nil {
		return err
	}
	c := serveConfig{addr: *addr, database: *db, plans: *plans, logLevel: *logLevel, redisURL: *redisURL, shutdownTimeout: *shutdown, allowPrivateWebhooks: *allowPrivate, deliveryLease: *lease, debugAddr: *debugAddr,
		idpSecret: *idpSecret, idpJWKS: *idpJWKS, idpIssuer: *idpIssuer, idpAudience: *idpAudience}
	return runServer(ctx, c, stderr)
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})), nil
}

func runServer(ctx context.Context, c serveConfig, stderr io.Writer) error {
	log, err := newLogger(stderr, c.logLevel)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	plans, err := sb.LoadPlans(c.plans)
	if err != nil {
		return err
	}
	db, err := sqlstore.Open(ctx, c.database)
	if err != nil {
		return err
	}
	defer db.Close()

	var limiter ratelimit.Limiter = ratelimit.NewMemory(nil)
	if c.redisURL != "" {
		opt, err := redis.ParseURL(c.redisURL)
		if err != nil {
			return fmt.Errorf("--redis-url: %w", err)
		}
		rc := redis.NewClient(opt)
		defer rc.Close()
		limiter = ratelimit.NewRedis(rc)
	}

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

	authn := auth.New(db, plans, nil)
	if c.idpSecret != "" || c.idpJWKS != "" {
		idp := &auth.IdentityProvider{Secret: []byte(c.idpSecret), Issuer: c.idpIssuer, Audience: c.idpAudience, Leeway: 30 * time.Second}
		if c.idpJWKS != "" {
			if idp.Keys, err = auth.LoadJWKS(c.idpJWKS); err != nil {
				return err
			}
		}
		authn.UseIdentityProvider(idp)
	}
	api, err := httpapi.New(httpapi.Config{
		Store:      db,
		Auth:       authn,
		Meter:      auth.NewMeter(db),
		Limiter:    limiter,
		Plans:      plans,
		Provider:   sim,
		URLChecker: &ssrf.Guard{AllowPrivate: c.allowPrivateWebhooks},
	})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { api.Background(bgCtx) })
	wg.Go(func() {
		delivery.New(db, sim, delivery.Options{Lease: c.deliveryLease, OutcomeTimeout: c.deliveryLease}).Run(bgCtx)
	})
	wg.Go(func() { webhook.New(db, webhook.Options{AllowPrivate: c.allowPrivateWebhooks}).Run(bgCtx) })
	wg.Go(func() { campaign.New(db, sim, plans, campaign.Options{}).Run(bgCtx) })
	wg.Go(func() {
		db.ListenAuth(bgCtx, func(inv sqlstore.Invalidation) {
			switch {
			case inv.Reset:
				authn.Reset()
			case inv.KeyHash != "":
				authn.ForgetKey(inv.KeyHash)
			case inv.TenantID != "":
				authn.ForgetTenant(inv.TenantID)
			}
		})
	})

	if c.debugAddr != "" {
		dbg := &http.Server{Addr: c.debugAddr, Handler: pprofMux(), ReadHeaderTimeout: 10 * time.Second}
		go dbg.ListenAndServe()
		defer dbg.Close()
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "database", db.Dialect().String())

	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
	}
	stopBg()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// pprofMux serves the runtime profiles, for --debug-addr only.
func pprofMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
