package rbm

import (
	"crypto/hmac"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/provider/carrier"
	"github.com/switchboard/switchboard/provider/chat"
)

// MaxEventBytes is the largest event body read.
const MaxEventBytes = 256 << 10

// Event is what Google posts about a conversation: a user event (eventType
// DELIVERED, READ, IS_TYPING about the agent message messageId) or a user
// message (text, or a suggestion response, location or file, which
// Switchboard does not store). The REST reference's UserEvent and
// UserMessage share these field names.
type Event struct {
	SenderPhoneNumber string `json:"senderPhoneNumber"`
	EventType         string `json:"eventType"`
	EventID           string `json:"eventId"`
	MessageID         string `json:"messageId"`
	SendTime          string `json:"sendTime"`
	Text              string `json:"text"`
	AgentID           string `json:"agentId"`
}

// envelope is the body Google posts to a webhook: the event, base64 in
// message.data (the shape of a Pub/Sub push).
type envelope struct {
	Message *struct {
		Data        string `json:"data"`
		MessageID   string `json:"messageId"`
		PublishTime string `json:"publishTime"`
	} `json:"message"`
	// The webhook set-up handshake: Google posts clientToken and secret,
	// and wants the secret back as the body of a 200.
	ClientToken *string `json:"clientToken"`
	Secret      *string `json:"secret"`
}

// Sign is X-Goog-Signature of an event's decoded data: base64 of its
// HMAC-SHA512 keyed with the webhook's client token.
func Sign(clientToken string, data []byte) string {
	m := hmac.New(sha512.New, []byte(clientToken))
	m.Write(data)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// ParseEvent reads the body Google posted: the handshake (secret set), or
// an event whose decoded data (the bytes the signature covers) it returns.
func ParseEvent(body []byte) (secret, clientToken string, data []byte, ev *Event, err error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return "", "", nil, nil, errors.New("the body is not the JSON of an RBM event")
	}
	if env.Secret != nil || env.ClientToken != nil {
		if env.Secret == nil || env.ClientToken == nil {
			return "", "", nil, nil, errors.New("a webhook handshake needs clientToken and secret")
		}
		return *env.Secret, *env.ClientToken, nil, nil, nil
	}
	if env.Message == nil || env.Message.Data == "" {
		return "", "", nil, nil, errors.New("an RBM event needs message.data")
	}
	data, err = base64.StdEncoding.DecodeString(env.Message.Data)
	if err != nil {
		if data, err = base64.URLEncoding.DecodeString(env.Message.Data); err != nil {
			return "", "", nil, nil, errors.New("message.data is not base64")
		}
	}
	ev = &Event{}
	if err := json.Unmarshal(data, ev); err != nil {
		return "", "", nil, nil, errors.New("message.data is not the JSON of an event")
	}
	return "", "", data, ev, nil
}

// EventsURL is where Google is to post the agent's events: the agent's
// webhook in the Business Communications Developer Console.
func EventsURL(publicURL, link string) string {
	return strings.TrimSuffix(publicURL, "/") + carrier.Prefix + link + "/events"
}

// ServeHTTP serves POST /api/providers/NAME/events: the webhook handshake
// (answered with the secret when clientToken is the link's), and events
// checked with X-Goog-Signature; a bad token or signature answers 403 and
// stores nothing. DELIVERED delivers the message, READ sets its read_at, a
// user's text is an inbound message (STOP and START apply).
func (l *Link) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.TrimPrefix(r.URL.Path, carrier.Prefix+l.cfg.Name) != "/events" {
		http.Error(w, "no such callback", http.StatusNotFound)
		return
	}
	body, ok := chat.ReadEvent(w, r, MaxEventBytes)
	if !ok {
		return
	}
	token := l.cfg.ClientToken.Reveal()
	secret, clientToken, data, ev, err := ParseEvent(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ev == nil {
		if subtle.ConstantTimeCompare([]byte(clientToken), []byte(token)) != 1 {
			l.Log.Warn("RBM webhook handshake with a wrong client token: refused", "remote", r.RemoteAddr)
			http.Error(w, "wrong clientToken", http.StatusForbidden)
			return
		}
		l.Log.Info("RBM webhook handshake answered")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, secret)
		return
	}
	if !hmac.Equal([]byte(r.Header.Get("X-Goog-Signature")), []byte(Sign(token, data))) {
		l.Log.Warn("RBM event with a bad X-Goog-Signature: refused", "remote", r.RemoteAddr)
		http.Error(w, "invalid X-Goog-Signature", http.StatusForbidden)
		return
	}
	at := l.Opt.Now().UTC()
	if t, err := time.Parse(time.RFC3339Nano, ev.SendTime); err == nil && !t.After(at) {
		at = t.UTC()
	}
	var rerr error
	switch {
	case ev.EventType == "DELIVERED" && ev.MessageID != "":
		l.Metric("delivered")
		_, rerr = l.Store.RecordCarrier(r.Context(), l.cfg.Name, []sb.CarrierEvent{{Kind: sb.CarrierReceipt, ExternalID: ev.MessageID,
			State: sb.ReceiptDelivered, Reason: "DELIVERED", At: at, From: ev.SenderPhoneNumber}})
	case ev.EventType == "READ" && ev.MessageID != "":
		l.Metric("read")
		rerr = l.Store.RecordRead(r.Context(), l.cfg.Name, ev.MessageID, at)
	case ev.EventType == "" && ev.Text != "" && ev.SenderPhoneNumber != "":
		rerr = l.Inbound(r.Context(), &sb.Message{From: ev.SenderPhoneNumber, Body: ev.Text, ExternalID: ev.MessageID, CreatedAt: at, Channel: sb.ChannelChat}, ev.MessageID)
	default:
		l.Metric("ignored")
	}
	if rerr != nil {
		l.Log.Error("recording an RBM event", "event", ev.EventType, "err", rerr)
		http.Error(w, "try again", http.StatusServiceUnavailable) // Google retries
		return
	}
	w.WriteHeader(http.StatusOK)
}
