// Package twilio is the Twilio-compatible carrier link (docs/carriers.md):
// it sends with Twilio's Messages API (POST
// {base}/2010-04-01/Accounts/{sid}/Messages.json, which SignalWire's
// compatibility API also speaks), asks for status callbacks to
// {public-url}/api/providers/NAME/status/{message id}, and receives status
// callbacks and inbound texts there, each checked with X-Twilio-Signature.
//
// A 2xx answer makes the message sent (Twilio's SID is kept with it); a
// 429 pauses the link (Retry-After, or a back-off) and a 5xx or a failed
// connection retries the message with a back-off, while it stays queued;
// any other 4xx fails it with Twilio's error code and message. Three
// failures in a row take the link down (its phones offline) until the
// account answers again.
package twilio

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
)

// Store is what a link needs from storage.
type Store interface {
	RecordCarrier(ctx context.Context, link string, evs []sb.CarrierEvent) (sb.CarrierResult, error)
	// Message reads a message, to check before a retry that it is not
	// final (a status callback may have settled it meanwhile).
	Message(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Message, error)
}

// Options tune a Link; zero values take the defaults.
type Options struct {
	// PublicURL is the base of the callback URLs (serve --public-url).
	PublicURL string
	// Client makes the API requests (default: a client with a 30s
	// timeout).
	Client *http.Client
	// BackoffMin and BackoffMax bound the waits between retries (default
	// 1s doubling to 60s, with jitter).
	BackoffMin, BackoffMax time.Duration
	// MaxHeld is the most messages the link holds in memory (default
	// 10,000); more are put off and stay queued in the store.
	MaxHeld int
	Metrics *carrier.Metrics
	Log     *slog.Logger
}

// Link is one Twilio account.
type Link struct {
	cfg   carrier.Config
	opt   Options
	store Store
	log   *slog.Logger

	mu        sync.Mutex
	up        bool
	downSince time.Time
	failures  int // in a row
	pause     time.Time
	nextSlot  time.Time
	msgs      map[string]*job
	queue     []*job
	wake      chan struct{}
}

type job struct {
	m         *sb.Message
	tries     int
	notBefore time.Time
}

// New returns a link for cfg (a twilio link of the providers file).
func New(cfg carrier.Config, store Store, opt Options) *Link {
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if opt.BackoffMin <= 0 {
		opt.BackoffMin = time.Second
	}
	if opt.BackoffMax <= 0 {
		opt.BackoffMax = 60 * time.Second
	}
	if opt.MaxHeld <= 0 {
		opt.MaxHeld = 10000
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if cfg.Window <= 0 {
		cfg.Window = carrier.DefaultWindow
	}
	opt.PublicURL = strings.TrimSuffix(opt.PublicURL, "/")
	return &Link{cfg: cfg, opt: opt, store: store, log: opt.Log.With("link", cfg.Name, "type", carrier.TypeTwilio),
		msgs: map[string]*job{}, wake: make(chan struct{}, 1), downSince: time.Now()}
}

// Name implements carrier.Link.
func (l *Link) Name() string { return l.cfg.Name }

// Type implements carrier.Link.
func (l *Link) Type() string { return carrier.TypeTwilio }

// Up implements carrier.Link: the account answered, and its last requests
// did not all fail.
func (l *Link) Up() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

func (l *Link) setUp(up bool, why string) {
	l.mu.Lock()
	changed := l.up != up
	l.up = up
	if up {
		l.failures = 0
	} else if changed {
		l.downSince = time.Now()
	}
	l.mu.Unlock()
	if changed {
		l.opt.Metrics.LinkUp(l.cfg.Name, carrier.TypeTwilio, up)
		if up {
			l.log.Info("Twilio link up", "base_url", l.cfg.BaseURL)
		} else {
			l.log.Warn("Twilio link down", "base_url", l.cfg.BaseURL, "reason", why)
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Send implements carrier.Link.
func (l *Link) Send(ctx context.Context, m *sb.Message) error {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.msgs[m.ID]; ok {
		return nil
	}
	if !l.up {
		wait := min(max(now.Sub(l.downSince)/2, time.Second), 30*time.Second)
		return &sb.Deferred{Until: now.Add(wait), Reason: "the Twilio link " + l.cfg.Name + " is down"}
	}
	if len(l.msgs) >= l.opt.MaxHeld {
		return &sb.Deferred{Until: now.Add(time.Second), Reason: "the Twilio link " + l.cfg.Name + " holds as many messages as it may"}
	}
	j := &job{m: m}
	l.msgs[m.ID] = j
	l.queue = append(l.queue, j)
	signal(l.wake)
	return nil
}

// Run serves until ctx ends: it checks the account, then sends with up to
// Window requests at once.
func (l *Link) Run(ctx context.Context) {
	l.opt.Metrics.LinkUp(l.cfg.Name, carrier.TypeTwilio, false)
	var wg sync.WaitGroup
	wg.Go(func() { l.probeLoop(ctx) })
	sem := make(chan struct{}, l.cfg.Window)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		j, wait := l.take(time.Now())
		if j != nil {
			select {
			case sem <- struct{}{}:
				wg.Go(func() {
					defer func() { <-sem }()
					l.send(ctx, j)
				})
			case <-ctx.Done():
				l.requeue(j, 0, true)
			}
			continue
		}
		if wait <= 0 {
			wait = time.Second
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-l.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
	wg.Wait()
}

// probeLoop checks the account (GET .../Accounts/{sid}.json) while the link
// is down, with a back-off.
func (l *Link) probeLoop(ctx context.Context) {
	backoff := l.opt.BackoffMin
	for ctx.Err() == nil {
		if l.Up() {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		err := l.probe(ctx)
		if err == nil {
			l.setUp(true, "")
			backoff = l.opt.BackoffMin
			signal(l.wake)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		l.log.Warn("Twilio account check failed", "err", err.Error(), "retry_in", wait.String())
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		backoff = min(backoff*2, l.opt.BackoffMax)
	}
}

func (l *Link) probe(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.cfg.BaseURL+"/2010-04-01/Accounts/"+url.PathEscape(l.cfg.AccountSID)+".json", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(l.cfg.AccountSID, l.cfg.AuthToken.Reveal())
	res, err := l.opt.Client.Do(req)
	if err != nil {
		return fmt.Errorf("request failed: %w", scrub(err))
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("the account check answered %d", res.StatusCode)
	}
	return nil
}

// scrub drops the URL from a transport error (it names no secret, but the
// message is shorter without it).
func scrub(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// take returns the next job that may go now, or how long until one may.
func (l *Link) take(now time.Time) (*job, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.up || len(l.queue) == 0 {
		return nil, 0
	}
	if now.Before(l.pause) {
		return nil, l.pause.Sub(now)
	}
	soonest := time.Duration(0)
	for i, j := range l.queue {
		if now.Before(j.notBefore) {
			if d := j.notBefore.Sub(now); soonest == 0 || d < soonest {
				soonest = d
			}
			continue
		}
		if l.cfg.TPS > 0 {
			if now.Before(l.nextSlot) {
				return nil, l.nextSlot.Sub(now)
			}
			l.nextSlot = now.Add(time.Second / time.Duration(l.cfg.TPS))
		}
		l.queue = append(l.queue[:i:i], l.queue[i+1:]...)
		return j, 0
	}
	return nil, soonest
}

// apiError is Twilio's error body.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// settled reports whether j's message must not be sent again: a status
// callback made it final, or showed that Twilio has it (sent), while it
// waited for a retry. A second request is a second text and a second
// charge.
func (l *Link) settled(ctx context.Context, j *job) bool {
	if j.tries == 0 {
		return false
	}
	m, err := l.store.Message(ctx, j.m.TenantID, j.m.Env, j.m.ID)
	if err != nil {
		return sb.ErrorCode(err) == sb.CodeNotFound
	}
	switch m.Status {
	case sb.StatusSent, sb.StatusDelivered, sb.StatusFailed:
		l.log.Info("Twilio message settled while it waited for a retry: not sent again", "message_id", j.m.ID, "status", m.Status)
		return true
	}
	return false
}

// send makes one API request for j and acts on its answer.
func (l *Link) send(ctx context.Context, j *job) {
	m := j.m
	if l.settled(ctx, j) {
		l.forget(j)
		return
	}
	form := url.Values{"To": {m.To}, "From": {m.From}, "Body": {m.Body}}
	if l.opt.PublicURL != "" {
		form.Set("StatusCallback", l.StatusURL(m.ID))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.cfg.BaseURL+"/2010-04-01/Accounts/"+url.PathEscape(l.cfg.AccountSID)+"/Messages.json",
		strings.NewReader(form.Encode()))
	if err != nil {
		l.refuse(j, "the Twilio request cannot be made: "+err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(l.cfg.AccountSID, l.cfg.AuthToken.Reveal())
	res, err := l.opt.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			l.requeue(j, 0, false)
			return
		}
		// The request may or may not have reached Twilio: it is sent again
		// (at least once; see docs/carriers.md).
		l.failed(j, "the request failed: "+scrub(err).Error())
		return
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	switch {
	case res.StatusCode/100 == 2:
		var out struct {
			SID          string `json:"sid"`
			Status       string `json:"status"`
			ErrorCode    *int   `json:"error_code"`
			ErrorMessage string `json:"error_message"`
		}
		if err := json.Unmarshal(body, &out); err != nil || out.SID == "" {
			// Twilio took the request: sending it again would be a second
			// text. The message is sent; its status callbacks, which name
			// it by their URL, settle it.
			l.log.Warn("Twilio accepted a message without giving its sid: not sent again, its status callbacks settle it", "message_id", m.ID, "status", res.StatusCode)
			out.SID, out.Status, out.ErrorCode = "", "", nil
		}
		l.mu.Lock()
		l.failures = 0
		l.mu.Unlock()
		evs := []sb.CarrierEvent{{Kind: sb.CarrierAccepted, MessageID: m.ID, Parts: 1, ExternalID: out.SID, At: time.Now().UTC()}}
		cb := StatusCallback{MessageSID: out.SID, Status: strings.ToLower(out.Status)}
		if out.ErrorCode != nil {
			cb.ErrorCode = strconv.Itoa(*out.ErrorCode)
		}
		if state, reason := cb.Outcome(); state != sb.ReceiptPending {
			evs = append(evs, sb.CarrierEvent{Kind: sb.CarrierReceipt, MessageID: m.ID, ExternalID: out.SID, State: state, Reason: reason, At: time.Now().UTC()})
		}
		l.opt.Metrics.Submit(l.cfg.Name, "accepted", 1)
		l.record(ctx, j, evs)
	case res.StatusCode == http.StatusTooManyRequests:
		wait := l.opt.BackoffMin << min(j.tries, 6)
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		wait = min(wait, l.opt.BackoffMax)
		l.mu.Lock()
		l.pause = time.Now().Add(wait)
		l.mu.Unlock()
		l.opt.Metrics.Submit(l.cfg.Name, "throttled", 1)
		l.log.Warn("Twilio answered 429: pausing the link", "pause", wait.String())
		j.tries++
		l.requeue(j, 0, true)
	case res.StatusCode >= 500:
		l.failed(j, fmt.Sprintf("Twilio answered %d", res.StatusCode))
	case res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden && looksLikeAuth(body):
		// The credentials are refused: the operator's to fix, not the
		// message's fault. The link goes down and the message waits.
		l.setUp(false, fmt.Sprintf("Twilio refused the credentials (%d)", res.StatusCode))
		l.requeue(j, l.opt.BackoffMin, true)
	default:
		var e apiError
		json.Unmarshal(body, &e)
		reason := fmt.Sprintf("Twilio refused the message (%d)", res.StatusCode)
		if e.Code != 0 {
			reason = fmt.Sprintf("Twilio %s", ErrorText(strconv.Itoa(e.Code)))
			if e.Message != "" {
				// Twilio's text may quote the numbers ("The 'To' number
				// +1... is not a valid phone number"): the reason reaches
				// logs, and numbers must not.
				reason += ": " + RedactNumbers(e.Message)
			}
		}
		l.opt.Metrics.Submit(l.cfg.Name, "refused", 1)
		l.refuse(j, reason)
	}
}

func looksLikeAuth(body []byte) bool {
	var e apiError
	return json.Unmarshal(body, &e) == nil && e.Code == 20003
}

// failed retries j after a back-off; three failures in a row take the
// link down.
func (l *Link) failed(j *job, why string) {
	j.tries++
	wait := l.opt.BackoffMin << min(j.tries-1, 6)
	wait = min(wait, l.opt.BackoffMax)
	wait = wait/2 + rand.N(wait/2+1)
	l.mu.Lock()
	l.failures++
	down := l.failures >= 3
	l.mu.Unlock()
	l.opt.Metrics.Submit(l.cfg.Name, "retried", 1)
	l.log.Warn("Twilio request failed: retrying", "message_id", j.m.ID, "err", why, "retry_in", wait.String())
	if down {
		l.setUp(false, "three requests in a row failed: "+why)
	}
	l.requeue(j, wait, false)
}

func (l *Link) requeue(j *job, wait time.Duration, front bool) {
	l.mu.Lock()
	j.notBefore = time.Now().Add(wait)
	if front {
		l.queue = append([]*job{j}, l.queue...)
	} else {
		l.queue = append(l.queue, j)
	}
	l.mu.Unlock()
	signal(l.wake)
}

func (l *Link) refuse(j *job, reason string) {
	l.record(context.Background(), j, []sb.CarrierEvent{{Kind: sb.CarrierRefused, MessageID: j.m.ID, Parts: 1, Reason: reason, At: time.Now().UTC()}})
}

// record writes what became of j, retrying until it is on disk, and
// forgets j.
func (l *Link) record(ctx context.Context, j *job, evs []sb.CarrierEvent) {
	for attempt := 0; ; attempt++ {
		_, err := l.store.RecordCarrier(context.WithoutCancel(ctx), l.cfg.Name, evs)
		if err == nil {
			break
		}
		if attempt >= 20 {
			// Unrecorded, the message is handed over again when its claim
			// runs out, and sent again (at least once).
			l.log.Error("recording a Twilio answer failed", "message_id", j.m.ID, "err", err)
			break
		}
		time.Sleep(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second))
	}
	l.forget(j)
}

// Held reports how many messages the link holds in memory (for tests).
func (l *Link) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.msgs)
}

// forget drops j from memory.
func (l *Link) forget(j *job) {
	l.mu.Lock()
	delete(l.msgs, j.m.ID)
	l.mu.Unlock()
}

// phoneLike is a run of digits, with the separators numbers are written
// with, long enough to be a phone number.
var phoneLike = regexp.MustCompile(`\+?\(?\d[\d ().-]{5,}\d`)

// RedactNumbers replaces what looks like a phone number in a carrier's
// text with "[number]".
func RedactNumbers(s string) string { return phoneLike.ReplaceAllString(s, "[number]") }

// StatusURL is the StatusCallback of a message: Twilio posts its statuses
// there, and the URL (which Twilio's signature covers) names the message.
func (l *Link) StatusURL(messageID string) string {
	return l.opt.PublicURL + carrier.Prefix + l.cfg.Name + "/status/" + url.PathEscape(messageID)
}

// InboundURL is where Twilio posts the texts the link's numbers receive:
// set it as the numbers' "A message comes in" webhook (HTTP POST).
func (l *Link) InboundURL() string { return l.opt.PublicURL + carrier.Prefix + l.cfg.Name + "/inbound" }

// ServeHTTP serves the link's callbacks: POST .../status/{message id} and
// POST .../inbound, each verified with X-Twilio-Signature against the
// public URL it was made to. A bad signature answers 403 and stores
// nothing.
func (l *Link) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, carrier.Prefix+l.cfg.Name)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxCallbackBytes+1))
	if err != nil {
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}
	form, err := ParseForm(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !ValidSignature(l.cfg.AuthToken.Reveal(), l.requestURL(r), form, r.Header.Get("X-Twilio-Signature")) {
		l.log.Warn("Twilio callback with a bad signature: refused", "path", r.URL.Path, "remote", r.RemoteAddr)
		http.Error(w, "invalid X-Twilio-Signature", http.StatusForbidden)
		return
	}
	switch {
	case strings.HasPrefix(rest, "/status/"):
		messageID, err := url.PathUnescape(strings.TrimPrefix(rest, "/status/"))
		if err != nil || messageID == "" || strings.Contains(messageID, "/") {
			http.Error(w, "no such callback", http.StatusNotFound)
			return
		}
		cb, err := ParseStatusCallback(form)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		state, reason := cb.Outcome()
		l.opt.Metrics.Receipt(l.cfg.Name, state)
		if _, err := l.store.RecordCarrier(r.Context(), l.cfg.Name, []sb.CarrierEvent{{Kind: sb.CarrierReceipt, MessageID: messageID,
			ExternalID: cb.MessageSID, State: state, Reason: reason, At: time.Now().UTC()}}); err != nil {
			l.log.Error("recording a Twilio status callback", "err", err)
			http.Error(w, "try again", http.StatusServiceUnavailable) // Twilio retries
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case rest == "/inbound":
		from, to, sid := form.Get("From"), form.Get("To"), form.Get("MessageSid")
		if from == "" || to == "" || sid == "" {
			http.Error(w, "an inbound text needs From, To and MessageSid", http.StatusBadRequest)
			return
		}
		l.opt.Metrics.Inbound(l.cfg.Name)
		now := time.Now().UTC()
		if _, err := l.store.RecordCarrier(r.Context(), l.cfg.Name, []sb.CarrierEvent{{Kind: sb.CarrierInbound, At: now,
			Inbound: &sb.Message{From: from, To: to, Body: form.Get("Body"), ExternalID: sid, CreatedAt: now}}}); err != nil {
			l.log.Error("recording a Twilio inbound text", "err", err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		// An empty TwiML answer: no reply text.
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Response></Response>`)
	default:
		http.Error(w, "no such callback", http.StatusNotFound)
	}
}

// requestURL is the URL Twilio made the request to: --public-url and the
// request's path and query, or, without --public-url, the scheme and host
// the request came with.
func (l *Link) requestURL(r *http.Request) string {
	base := l.opt.PublicURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + r.URL.RequestURI()
}
