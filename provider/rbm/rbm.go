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
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/chat"
)

// Scope is the OAuth 2 scope of the RBM API.
const Scope = "https://www.googleapis.com/auth/rcsbusinessmessaging"

// Store is what a link needs from storage.
type Store = chat.Store

// Options tune a Link; zero values take the defaults (chat.Options; the
// client's timeout is 30s, and the OAuth 2 token requests use it too).
type Options = chat.Options

// Link is one RBM agent.
type Link struct {
	*chat.Link
	cfg    carrier.Config
	client *http.Client // with the OAuth 2 token source
	token  oauth2.TokenSource
}

// New returns the link of cfg (an rbm link of the providers file, with its
// key file's contents in cfg.ServiceAccount).
func New(cfg carrier.Config, store Store, opt Options) (*Link, error) {
	opt = opt.WithDefaults(30 * time.Second)
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
	l := &Link{Link: chat.NewLink(cfg.Name, carrier.TypeRBM, "RBM agent", cfg.Window, store, opt, "agent_id", cfg.AgentID), cfg: cfg, token: ts}
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
func (l *Link) Up() bool { return l.Health.Up() }

// Run implements carrier.Link: it checks the credentials (a token) at
// once and then every half minute while the link is down, and waits for
// the sends in flight when ctx ends.
func (l *Link) Run(ctx context.Context) {
	l.Watch(ctx, false, func() {
		if _, err := l.token.Token(); err != nil {
			l.Health.Set(false, "no OAuth 2 token: "+scrubKey(err).Error())
		} else {
			l.Health.Set(true, "")
		}
	})
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
	ok := json.Unmarshal(body, &e) == nil && e.Error.Status != ""
	return chat.ErrorText(status, e.Error.Status, e.Error.Message, ok)
}

// do makes a request of the API with its OAuth 2 token.
func (l *Link) do(ctx context.Context, method, path string, q url.Values, body any) (int, []byte, error) {
	u := l.cfg.BaseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return chat.Do(ctx, l.client, method, u, body)
}

// phonePath is /v1/phones/{E.164}; the "+" stays as it is, as Google's
// examples write it.
func phonePath(number, rest string) string {
	return "/v1/phones/" + strings.ReplaceAll(url.PathEscape(number), "%2B", "+") + rest
}
