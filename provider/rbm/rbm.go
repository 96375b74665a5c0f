// Package rbm is the RCS Business Messaging chat engine (docs/chat.md): an
// RBM agent of the operator's, reached with Google's RBM API
// (https://rcsbusinessmessaging.googleapis.com, described by rbm.proto in
// google-business-communications' clients) over net/http, authorised with
// OAuth 2 from the agent's service-account key (golang.org/x/oauth2/google,
// which takes the token endpoint from the key file's token_uri).
//
// A Link is a carrier.Link like the SMS links: the phones bound to it
// (kind rbm, channel chat) hand it their messages, it records what Google
// answered in the store as carrier events (the message id, as a UUID, is
// the carrier's id: it is also the idempotency key Google keeps), and it
// receives Google's events at /api/providers/NAME/events, checked with
// X-Goog-Signature. It also answers channel detection (Detect, DetectMany)
// for channel auto, with a cache per number.
package rbm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
)

// Scope is the OAuth 2 scope of the RBM API.
const Scope = "https://www.googleapis.com/auth/rcsbusinessmessaging"

// Store is what a link needs from storage.
type Store interface {
	RecordCarrier(ctx context.Context, link string, evs []sb.CarrierEvent) (sb.CarrierResult, error)
	// RecordRead keeps when the message the link knows as externalID was
	// read (read_at), once.
	RecordRead(ctx context.Context, link, externalID string, at time.Time) error
	// ChatFallback sends a chat message of channel auto again by SMS; it
	// reports false when the message was not auto (it then fails).
	ChatFallback(ctx context.Context, messageID, reason string, now time.Time) (bool, error)
}

// Options tune a Link; zero values take the defaults.
type Options struct {
	// Client makes the API requests (default: 30s timeout); the OAuth 2
	// token requests use it too.
	Client *http.Client
	// DetectTimeout bounds a capability check (default 1s): a slower
	// answer is DETECTION_UNAVAILABLE.
	DetectTimeout time.Duration
	// ChatFor and SMSFor are how long a capability answer is kept: a
	// positive one (default a day), a negative one (default an hour).
	ChatFor, SMSFor time.Duration
	// BackoffMin and BackoffMax bound the waits before a send is tried
	// again after a 5xx, a 429 or a failed request (default 1s to 60s).
	BackoffMin, BackoffMax time.Duration
	Metrics                *carrier.ChatMetrics
	Log                    *slog.Logger
	Now                    func() time.Time
}

// Link is one RBM agent.
type Link struct {
	cfg    carrier.Config
	opt    Options
	store  Store
	log    *slog.Logger
	client *http.Client // with the OAuth 2 token source
	token  oauth2.TokenSource

	mu       sync.Mutex
	up       bool
	failures int // requests in a row that failed (5xx, timeout)
	held     map[string]bool
	caps     map[string]capEntry
	sem      chan struct{}
	wg       sync.WaitGroup
	ctx      context.Context
}

type capEntry struct {
	channel string
	until   time.Time
}

// New returns the link of cfg (an rbm link of the providers file, with its
// key file's contents in cfg.ServiceAccount).
func New(cfg carrier.Config, store Store, opt Options) (*Link, error) {
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if opt.DetectTimeout <= 0 {
		opt.DetectTimeout = time.Second
	}
	if opt.ChatFor <= 0 {
		opt.ChatFor = 24 * time.Hour
	}
	if opt.SMSFor <= 0 {
		opt.SMSFor = time.Hour
	}
	if opt.BackoffMin <= 0 {
		opt.BackoffMin = time.Second
	}
	if opt.BackoffMax <= 0 {
		opt.BackoffMax = time.Minute
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if cfg.Window <= 0 {
		cfg.Window = carrier.DefaultWindow
	}
	// JWTConfigFromJSON takes the token endpoint from the key file's
	// token_uri (oauth2/google, credentialsFile.jwtConfig), so a test's
	// key file points it at a local fake.
	jc, err := google.JWTConfigFromJSON([]byte(cfg.ServiceAccount.Reveal()), Scope)
	if err != nil {
		return nil, fmt.Errorf("rbm link %q: the service account key: %v", cfg.Name, scrubKey(err))
	}
	base := context.WithValue(context.Background(), oauth2.HTTPClient, opt.Client)
	ts := oauth2.ReuseTokenSource(nil, jc.TokenSource(base))
	l := &Link{cfg: cfg, opt: opt, store: store, token: ts, up: true,
		log:  opt.Log.With("link", cfg.Name, "type", carrier.TypeRBM),
		held: map[string]bool{}, caps: map[string]capEntry{}, sem: make(chan struct{}, cfg.Window), ctx: context.Background()}
	l.client = &http.Client{Timeout: opt.Client.Timeout, Transport: &oauth2.Transport{Source: ts, Base: transport(opt.Client)}}
	return l, nil
}

func transport(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// scrubKey keeps a key-parsing error from quoting the key.
func scrubKey(err error) error {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120]
	}
	return errors.New(s)
}

// Name implements carrier.Link.
func (l *Link) Name() string { return l.cfg.Name }

// Type implements carrier.Link.
func (l *Link) Type() string { return carrier.TypeRBM }

// Up implements carrier.Link: the agent's requests are answered (three
// failures in a row take it down until a request succeeds again).
func (l *Link) Up() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// Run implements carrier.Link: it checks the credentials (a token) at
// once and then every half minute while the link is down, and waits for
// the sends in flight when ctx ends.
func (l *Link) Run(ctx context.Context) {
	l.mu.Lock()
	l.ctx = ctx
	l.mu.Unlock()
	l.opt.Metrics.Up(carrier.TypeRBM, l.cfg.Name, l.Up())
	check := func() {
		if _, err := l.token.Token(); err != nil {
			l.setUp(false, "no OAuth 2 token: "+scrubKey(err).Error())
		} else if !l.Up() {
			l.setUp(true, "")
		}
	}
	check()
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.wg.Wait()
			return
		case <-t.C:
			if !l.Up() {
				check()
			}
		}
	}
}

func (l *Link) setUp(up bool, why string) {
	l.mu.Lock()
	changed := l.up != up
	l.up = up
	if up {
		l.failures = 0
	}
	l.mu.Unlock()
	if changed {
		l.opt.Metrics.Up(carrier.TypeRBM, l.cfg.Name, up)
		if up {
			l.log.Info("RBM agent reachable", "agent_id", l.cfg.AgentID)
		} else {
			l.log.Warn("RBM agent unreachable", "agent_id", l.cfg.AgentID, "reason", why)
		}
	}
}

// requestFailed counts a failed request; three in a row take the link down.
func (l *Link) requestFailed(why string) {
	l.mu.Lock()
	l.failures++
	down := l.failures >= 3
	l.mu.Unlock()
	if down {
		l.setUp(false, "three requests in a row failed: "+why)
	}
}

func (l *Link) requestOK() {
	l.mu.Lock()
	l.failures = 0
	was := l.up
	l.mu.Unlock()
	if !was {
		l.setUp(true, "")
	}
}

// MessageUUID is the id a message has at Google: RBM wants a UUID (RFC
// 4122), and the same message always gets the same one, so a message sent
// again is ignored by Google instead of reaching the user twice. It is the
// message id's SHA-256, shaped as a version 5 style UUID.
func MessageUUID(messageID string) string {
	sum := sha256.Sum256([]byte("switchboard message:" + messageID))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// apiError is Google's error shape: {"error": {code, message, status}}.
type apiError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

func errorText(status int, body []byte) string {
	var e apiError
	if json.Unmarshal(body, &e) == nil && e.Error.Status != "" {
		msg := e.Error.Message
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return fmt.Sprintf("%d %s: %s", status, e.Error.Status, msg)
	}
	return fmt.Sprintf("%d", status)
}

func (l *Link) do(ctx context.Context, method, path string, q url.Values, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := l.cfg.BaseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := l.client.Do(req)
	if err != nil {
		return 0, nil, scrubURL(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, b, nil
}

// scrubURL drops the URL from a request's error, which names a phone
// number.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// phonePath is /v1/phones/{E.164}; the "+" stays as it is, as Google's
// examples write it.
func phonePath(number, rest string) string {
	return "/v1/phones/" + strings.ReplaceAll(url.PathEscape(number), "%2B", "+") + rest
}
