// Package imessage is the iMessage chat engine (docs/chat.md): a
// BlueBubbles server (BlueBubblesApp/bluebubbles-server) on the operator's
// Mac, reached over its REST API (/api/v1, the server password as the
// password query parameter). Detection asks its iMessage availability
// check (GET /api/v1/handle/availability/imessage?address=), sending uses
// its text endpoint (POST /api/v1/message/text, the message id as its
// tempGuid), and its webhook (new-message, updated-message: unsigned, so
// Switchboard gives it a URL holding a secret) reports deliveries, reads
// and replies.
//
// A Link is a carrier.Link like the SMS links: the phones bound to it
// (kind imessage, channel chat) hand it their messages, and it records
// what the server answered in the store as carrier events (the iMessage
// guid is the carrier's id).
package imessage

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/chat"
)

// Store is what a link needs from storage.
type Store = chat.Store

// Options tune a Link; zero values take the defaults (chat.Options; the
// client's timeout is 60s: AppleScript sends take seconds).
type Options = chat.Options

// Link is one BlueBubbles server.
type Link struct {
	*chat.Link
	cfg carrier.Config
}

// New returns the link of cfg (an imessage link of the providers file).
func New(cfg carrier.Config, store Store, opt Options) *Link {
	opt = opt.WithDefaults(60 * time.Second)
	if cfg.Window <= 0 {
		cfg.Window = 1 // one Mac sends one message at a time
	}
	return &Link{Link: chat.NewLink(cfg.Name, carrier.TypeIMessage, "BlueBubbles server", cfg.Window, store, opt), cfg: cfg}
}

// Name implements carrier.Link.
func (l *Link) Name() string { return l.cfg.Name }

// Type implements carrier.Link.
func (l *Link) Type() string { return carrier.TypeIMessage }

// Up implements carrier.Link: the server answers its ping.
func (l *Link) Up() bool { return l.Health.Up() }

// Run implements carrier.Link: it pings the server at once and every 30
// seconds, and waits for the sends in flight when ctx ends.
func (l *Link) Run(ctx context.Context) {
	l.Watch(ctx, true, func() {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		status, body, err := l.do(pctx, http.MethodGet, "/api/v1/ping", nil, nil)
		switch {
		case err != nil:
			l.Health.Set(false, err.Error())
		case status != http.StatusOK:
			l.Health.Set(false, errorText(status, body))
		default:
			l.Health.Set(true, "")
		}
	})
}

// response is BlueBubbles' answer shape (responses/success.ts and
// errors.ts): {status, message, data, error: {type, message}}.
type response struct {
	Status  int             `json:"status"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Error   *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func errorText(status int, body []byte) string {
	var r response
	ok := json.Unmarshal(body, &r) == nil && r.Error != nil
	if !ok {
		return chat.ErrorText(status, "", "", false)
	}
	return chat.ErrorText(status, r.Error.Type, r.Error.Message, true)
}

// do makes a request with the server password as the password query
// parameter (authMiddleware.ts takes guid, password or token).
func (l *Link) do(ctx context.Context, method, path string, q url.Values, body any) (int, []byte, error) {
	if q == nil {
		q = url.Values{}
	}
	q.Set("password", l.cfg.Password.Reveal())
	return chat.Do(ctx, l.Opt.Client, method, l.cfg.BaseURL+path+"?"+q.Encode(), body)
}

// ErrDetection is the DETECTION_UNAVAILABLE of an availability check that
// got no usable answer.
var ErrDetection = sb.Errorf(sb.CodeDetectionUnavailable, "Channel detection is temporarily unavailable: the iMessage server did not answer the availability check. Send with channel \"sms\", or retry.")

// Detect returns chat when the number has iMessage (the availability check,
// handleRouter.ts getMessagesAvailability: {data: {available}}), else sms;
// ErrDetection when the server does not answer within DetectTimeout or
// answers an error (its Private API is off, or it is down). Answers are
// cached per number.
func (l *Link) Detect(ctx context.Context, number string) (string, error) {
	if ch, ok := l.Cached(number); ok {
		return ch, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.Opt.DetectTimeout)
	defer cancel()
	status, body, err := l.do(ctx, http.MethodGet, "/api/v1/handle/availability/imessage", url.Values{"address": {number}}, nil)
	var r struct {
		Data struct {
			Available *bool `json:"available"`
		} `json:"data"`
	}
	if err == nil && status == http.StatusOK && json.Unmarshal(body, &r) == nil && r.Data.Available != nil {
		ch := sb.ChannelSMS
		if *r.Data.Available {
			ch = sb.ChannelChat
		}
		l.Caps.Keep(number, ch)
		l.Detected(ch)
		return ch, nil
	}
	why := errorText(status, body)
	if err != nil {
		why = err.Error()
	}
	l.Detected("unavailable")
	l.Log.Warn("iMessage availability check failed", "err", why)
	return "", ErrDetection
}

// DetectMany asks about each number (BlueBubbles has no batch check);
// the answers are cached for Detect.
func (l *Link) DetectMany(ctx context.Context, numbers []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range numbers {
		ch, err := l.Detect(ctx, n)
		if err != nil {
			return out, err
		}
		out[n] = ch
	}
	return out, nil
}

// ChatGUID is the chat of a one-to-one iMessage conversation with number,
// as BlueBubbles names it.
func ChatGUID(number string) string { return "iMessage;-;" + number }

// Send implements carrier.Link: it takes m and sends it in the background.
func (l *Link) Send(ctx context.Context, m *sb.Message) error { return l.Take(m, l.send) }

// send posts m to /api/v1/message/text (messageValidator.ts sendTextRules:
// chatGuid, tempGuid, message, method apple-script, which wants a
// tempGuid; the message id is the tempGuid, and the server refuses a
// tempGuid it is still sending). 200 gives the message's guid; a 4xx or a
// 500 with an iMessage error fails it; a failed request or another 5xx is
// tried again.
func (l *Link) send(ctx context.Context, m *sb.Message) {
	body := map[string]any{"chatGuid": ChatGUID(m.To), "tempGuid": m.ID, "message": m.Body, "method": "apple-script"}
	for try := 0; ; try++ {
		if ctx.Err() != nil {
			return
		}
		status, resp, err := l.do(ctx, http.MethodPost, "/api/v1/message/text", nil, body)
		now := l.Opt.Now().UTC()
		var r struct {
			Data struct {
				GUID  string `json:"guid"`
				Error int    `json:"error"`
			} `json:"data"`
		}
		switch {
		case err == nil && status == http.StatusOK && json.Unmarshal(resp, &r) == nil && r.Data.GUID != "":
			l.Health.OK()
			l.SendResult("accepted")
			l.Record(ctx, m.ID, []sb.CarrierEvent{{Kind: sb.CarrierAccepted, MessageID: m.ID, Parts: 1, ExternalID: r.Data.GUID, At: now}})
			return
		case err == nil && status >= 400 && status < 500 && status != http.StatusTooManyRequests && status != http.StatusUnauthorized:
			reason := "the iMessage server refused the message (" + errorText(status, resp) + ")"
			l.Refused(ctx, m.ID, reason, true, now)
			return
		}
		why := "the request failed"
		if err != nil {
			why = err.Error()
		} else {
			why = errorText(status, resp)
		}
		l.Health.Failed(why)
		if !l.Retry(ctx, try, m.ID, why) {
			return
		}
	}
}

// WebhookURL is the URL to add as a webhook in the BlueBubbles server
// (events new-message and updated-message): it carries the link's secret,
// since BlueBubbles does not sign its webhooks.
func WebhookURL(publicURL, link, secret string) string {
	return strings.TrimSuffix(publicURL, "/") + carrier.Prefix + link + "/events/" + secret
}

// Event is a BlueBubbles webhook (webhookService: {type, data}, data a
// serialized message, MessageSerializer.ts).
type Event struct {
	Type string `json:"type"`
	Data struct {
		GUID          string `json:"guid"`
		TempGUID      string `json:"tempGuid"`
		Text          string `json:"text"`
		IsFromMe      bool   `json:"isFromMe"`
		DateCreated   *int64 `json:"dateCreated"`
		DateDelivered *int64 `json:"dateDelivered"`
		DateRead      *int64 `json:"dateRead"`
		Error         int    `json:"error"`
		Handle        *struct {
			Address string `json:"address"`
		} `json:"handle"`
	} `json:"data"`
}

// MaxEventBytes is the largest webhook body read.
const MaxEventBytes = 256 << 10

// ServeHTTP serves POST /api/providers/NAME/events/{secret}: a wrong
// secret answers 403 and stores nothing. An updated-message of a message
// Switchboard sent with dateDelivered delivers it, with dateRead sets its
// read_at, with an error fails it; a new-message from someone else is an
// inbound message (STOP and START apply).
func (l *Link) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secret, ok := strings.CutPrefix(r.URL.Path, carrier.Prefix+l.cfg.Name+"/events/")
	if !ok {
		http.Error(w, "no such callback", http.StatusNotFound)
		return
	}
	want := l.cfg.WebhookSecret.Reveal()
	if want == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(want)) != 1 {
		l.Log.Warn("BlueBubbles webhook with a wrong secret: refused", "remote", r.RemoteAddr)
		http.Error(w, "wrong secret", http.StatusForbidden)
		return
	}
	// The body is read only once the secret is right: a stranger's post
	// costs no read.
	body, ok := chat.ReadEvent(w, r, MaxEventBytes)
	if !ok {
		return
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "not a BlueBubbles webhook", http.StatusBadRequest)
		return
	}
	at := func(ms *int64) time.Time {
		now := l.Opt.Now().UTC()
		if ms == nil || *ms <= 0 {
			return now
		}
		t := time.UnixMilli(*ms).UTC()
		if t.After(now) {
			return now
		}
		return t
	}
	d := ev.Data
	var rerr error
	switch {
	case ev.Type == "updated-message" && d.IsFromMe && d.GUID != "":
		var evs []sb.CarrierEvent
		switch {
		case d.Error != 0:
			evs = append(evs, sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: d.GUID, State: sb.ReceiptFailed,
				Reason: fmt.Sprintf("iMessage error %d", d.Error), At: at(nil)})
		case d.DateDelivered != nil:
			evs = append(evs, sb.CarrierEvent{Kind: sb.CarrierReceipt, ExternalID: d.GUID, State: sb.ReceiptDelivered, Reason: "delivered", At: at(d.DateDelivered)})
		}
		if len(evs) > 0 {
			l.Metric("delivered")
			_, rerr = l.Store.RecordCarrier(r.Context(), l.cfg.Name, evs)
		}
		if rerr == nil && d.DateRead != nil {
			l.Metric("read")
			rerr = l.Store.RecordRead(r.Context(), l.cfg.Name, d.GUID, at(d.DateRead))
		}
	case ev.Type == "new-message" && !d.IsFromMe && d.Handle != nil && d.Handle.Address != "" && d.Text != "":
		t := at(d.DateCreated)
		rerr = l.Inbound(r.Context(), &sb.Message{From: d.Handle.Address, Body: d.Text, ExternalID: d.GUID, CreatedAt: t, Channel: sb.ChannelChat}, d.GUID)
	default:
		l.Metric("ignored")
	}
	if rerr != nil {
		l.Log.Error("recording a BlueBubbles webhook", "type", ev.Type, "err", rerr)
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}
