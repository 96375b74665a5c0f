// Package chat is what the chat engines (provider/rbm, provider/imessage)
// share beside their own APIs: the store they record in, their options, the
// per-number detection cache, whether the engine answers, the sends in
// flight with their back-off, and how an answer, a reply or a dropped reply
// is recorded. It knows no engine's API; each engine's package speaks its
// own (Google's RBM, BlueBubbles) and uses these pieces.
package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
)

// Store is what a chat engine's link needs from storage.
type Store interface {
	RecordCarrier(ctx context.Context, link string, evs []sb.CarrierEvent) (sb.CarrierResult, error)
	// RecordRead keeps when the message the link knows as externalID was
	// read (read_at), once.
	RecordRead(ctx context.Context, link, externalID string, at time.Time) error
	// ChatFallback sends a chat message of channel auto again by SMS; it
	// reports false when the message was not auto (it then fails).
	ChatFallback(ctx context.Context, messageID, reason string, now time.Time) (bool, error)
}

// Options tune a chat engine's link; zero values take the defaults.
type Options struct {
	// Client makes the engine's requests (default: a timeout the engine
	// chooses).
	Client *http.Client
	// DetectTimeout bounds a detection request (default 1s): a slower
	// answer is DETECTION_UNAVAILABLE.
	DetectTimeout time.Duration
	// ChatFor and SMSFor are how long a detection answer is kept: a
	// positive one (default a day), a negative one (default an hour).
	ChatFor, SMSFor time.Duration
	// BackoffMin and BackoffMax bound the waits before a send is tried
	// again after an error the engine may get over (default 1s to 60s).
	BackoffMin, BackoffMax time.Duration
	Metrics                *carrier.ChatMetrics
	Log                    *slog.Logger
	Now                    func() time.Time
}

// WithDefaults returns o with its zero values set, the client's timeout
// being clientTimeout.
func (o Options) WithDefaults(clientTimeout time.Duration) Options {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: clientTimeout}
	}
	if o.DetectTimeout <= 0 {
		o.DetectTimeout = time.Second
	}
	if o.ChatFor <= 0 {
		o.ChatFor = 24 * time.Hour
	}
	if o.SMSFor <= 0 {
		o.SMSFor = time.Hour
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = time.Minute
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Backoff is the wait before the send tried try times (from 0) is tried
// again: BackoffMin doubled per try up to BackoffMax, then a random point
// in its upper half, so that sends that failed together do not come back
// together.
func (o Options) Backoff(try int) time.Duration {
	wait := min(o.BackoffMin<<min(try, 6), o.BackoffMax)
	return wait/2 + rand.N(wait/2+1)
}

// Link is what every chat engine's link holds beside its API: its name
// and engine (carrier.TypeRBM, carrier.TypeIMessage), options (defaults
// set), store and logger, whether the engine answers, its detection cache
// and its sends in flight.
type Link struct {
	Name, Engine string
	Opt          Options
	Store        Store
	Log          *slog.Logger
	Health       *Health
	Caps         *Cache
	Flights      *Flights
	what         string
}

// NewLink returns the Link of an engine's link: what names the engine in
// logs and errors ("RBM agent"), window is how many sends run at once,
// attrs are added to its health's log lines.
func NewLink(name, engine, what string, window int, store Store, opt Options, attrs ...any) *Link {
	l := &Link{Name: name, Engine: engine, Opt: opt, Store: store, Log: opt.Log.With("link", name, "type", engine),
		Caps: NewCache(opt), Flights: NewFlights(window), what: what}
	l.Health = NewHealth(l, what, attrs...)
	return l
}

// Take is a link's carrier.Link Send: it hands m to send in the
// background and returns nil, or nil at once when m is in flight already;
// while the engine does not answer, it puts m off (sb.Deferred) and m waits
// in the queue.
func (l *Link) Take(m *sb.Message, send func(ctx context.Context, m *sb.Message)) error {
	if l.Flights.Holds(m.ID) {
		return nil
	}
	if !l.Health.Up() {
		return &sb.Deferred{Until: l.Opt.Now().Add(5 * time.Second), Reason: "the " + l.what + " " + l.Name + " is unreachable"}
	}
	l.Flights.Go(m, send)
	return nil
}

// Metric counts an event of the engine by kind (switchboard_chat_events_total).
func (l *Link) Metric(kind string) { l.Opt.Metrics.Event(l.Engine, l.Name, kind) }

// SendResult counts a send by its result (switchboard_chat_sends_total).
func (l *Link) SendResult(result string) { l.Opt.Metrics.Send(l.Engine, l.Name, result) }

// Retry logs why the send of messageID failed and waits the back-off of
// try (Backoff); it reports false when ctx ended first.
func (l *Link) Retry(ctx context.Context, try int, messageID, why string) bool {
	l.SendResult("retried")
	wait := l.Opt.Backoff(try)
	l.Log.Warn("chat send failed: retrying", "message_id", messageID, "err", why, "retry_in", wait.String())
	select {
	case <-ctx.Done():
		return false
	case <-time.After(wait):
		return true
	}
}

// Record writes what the engine answered about messageID, trying again
// until it is on disk (for about half a minute, then it is logged): the
// engine's answer cannot be asked again.
func (l *Link) Record(ctx context.Context, messageID string, evs []sb.CarrierEvent) {
	for attempt := 0; ; attempt++ {
		_, err := l.Store.RecordCarrier(context.WithoutCancel(ctx), l.Name, evs)
		if err == nil {
			return
		}
		if attempt >= 20 {
			l.Log.Error("recording a chat engine's answer failed", "message_id", messageID, "err", err)
			return
		}
		time.Sleep(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second))
	}
}

// Inbound stores a user's text (STOP and START apply) and counts it. A
// user writes to the engine (an RBM agent, an Apple ID), not to a tenant's
// number, and one engine may serve several tenants: the text is the
// tenant's whose phone of the link last wrote to the user. When no tenant
// did, it is dropped (not stored, no webhook), counted as dropped and
// logged without the number; id is the engine's id of the text.
func (l *Link) Inbound(ctx context.Context, in *sb.Message, id string) error {
	res, err := l.Store.RecordCarrier(ctx, l.Name, []sb.CarrierEvent{{Kind: sb.CarrierInbound, At: in.CreatedAt, Inbound: in}})
	if err != nil {
		return err
	}
	if res.Dropped > 0 {
		l.Metric("dropped")
		l.Log.Info("chat message from someone no tenant wrote to: dropped", "external_id", id)
		return nil
	}
	l.Metric("inbound")
	return nil
}

// Refused records that the engine refused messageID for reason: when
// fallback is set and the message was of channel auto, it goes again by SMS
// (counted fell_back); otherwise it fails (counted refused).
func (l *Link) Refused(ctx context.Context, messageID, reason string, fallback bool, now time.Time) {
	if fallback {
		if moved, err := l.Store.ChatFallback(context.WithoutCancel(ctx), messageID, reason, now); err == nil && moved {
			l.SendResult("fell_back")
			return
		}
	}
	l.SendResult("refused")
	l.Record(ctx, messageID, []sb.CarrierEvent{{Kind: sb.CarrierRefused, MessageID: messageID, Parts: 1, Reason: reason, At: now}})
}

// MaxAnswerBytes is the most of an engine's answer Do reads.
const MaxAnswerBytes = 1 << 20

// Do makes a request of c with body as JSON (none when nil) and returns
// the answer's status and body (up to MaxAnswerBytes). Its error never
// holds the URL, which names a phone number and may hold a password.
func Do(ctx context.Context, c *http.Client, method, url string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, errors.New("the request cannot be made")
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			return 0, nil, fmt.Errorf("%s: %w", ue.Op, ue.Err)
		}
		return 0, nil, errors.New("the request failed")
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, MaxAnswerBytes))
	return res.StatusCode, b, nil
}

// ErrorText is an engine's error answer for a log line or a failure
// reason: "status kind: message", the message cut to 200 bytes, or the
// status alone when the answer had no error of the engine's shape (ok
// false).
func ErrorText(status int, kind, message string, ok bool) string {
	if !ok {
		return fmt.Sprintf("%d", status)
	}
	if len(message) > 200 {
		message = message[:200]
	}
	return fmt.Sprintf("%d %s: %s", status, kind, message)
}

// Watch is the heart of a link's carrier.Link Run: it calls check (which
// sets Health) at once and every half minute (only while the engine is
// down, unless always), and when ctx ends waits for the sends in flight.
// The sends started from now run in ctx.
func (l *Link) Watch(ctx context.Context, always bool, check func()) {
	l.Flights.Bind(ctx)
	check()
	l.Health.Report()
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.Flights.Wait()
			return
		case <-t.C:
			if always || !l.Health.Up() {
				check()
			}
		}
	}
}

// Cached returns the detection answer the cache holds for number, counted
// as a cached detection.
func (l *Link) Cached(number string) (string, bool) {
	ch, ok := l.Caps.Get(number)
	if ok {
		l.Detected("cached")
	}
	return ch, ok
}

// Detected counts a detection by its result
// (switchboard_chat_detections_total).
func (l *Link) Detected(result string) { l.Opt.Metrics.Detect(l.Engine, l.Name, result) }

// ReadEvent reads the body of an engine's event, at most limit bytes, after
// checking that it was posted; it answers the request itself (405, 400) and
// reports false when it is not an event to handle.
func ReadEvent(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil || int64(len(body)) > limit {
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return nil, false
	}
	return body, true
}

// RevokeResult is what an engine answered when asked to revoke a message it
// had not delivered within its ttl.
type RevokeResult int

const (
	// RevokeFailed: no final answer (5xx, 429, a timeout, any other
	// error): the message may still be delivered by chat, so it does not go
	// by SMS now; the revoke is tried again later.
	RevokeFailed RevokeResult = iota
	// Revoked: the engine will never deliver the message; it goes by SMS.
	Revoked
	// RevokeDelivered: the engine delivered the message already (it is
	// recorded as delivered); it does not go by SMS.
	RevokeDelivered
)

// String is the result as the revokes metric's label.
func (r RevokeResult) String() string {
	switch r {
	case Revoked:
		return "revoked"
	case RevokeDelivered:
		return "delivered"
	}
	return "failed"
}

// Revoked counts a revoke by its result (switchboard_chat_revokes_total).
func (l *Link) Revoked(r RevokeResult) { l.Opt.Metrics.Revoke(l.Engine, l.Name, r.String()) }
