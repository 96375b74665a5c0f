// Package agent is a reference device for the device protocol of "SMS
// Gateway for Android": it pairs, holds the /events stream, takes the
// messages waiting for it, simulates the radio (delivers, or fails a given
// share) and reports each state, and sends inbound texts when asked, the
// way the app does. It writes and reads the protocol with the wire types of
// the app's own Go client, github.com/android-sms-gateway/client-go, so
// that a server that drifts from the app's protocol fails against it.
//
// `switchboard phone-agent` runs one, so that a person without an Android
// phone can try the whole flow; the tests and the devices benchmark run
// many.
package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/android-sms-gateway/client-go/smsgateway"
)

// Options configure an Agent.
type Options struct {
	// URL is the server's device API, e.g. https://host/api/mobile/v1. As
	// in the app, a trailing slash is kept (requests go to .../v1//device).
	URL string
	// Name is the device name sent when pairing.
	Name string
	// HTTP is the client; nil: one without timeout (the event stream is
	// long-lived), over http.DefaultTransport.
	HTTP *http.Client
	// FailShare is the share of messages (0 to 1) whose sending fails with
	// FailError.
	FailShare float64
	// Hold makes the agent take messages and never send or report them:
	// a phone that vanished with messages in hand.
	Hold bool
	// DropSent makes the radio's Sent go unheard, as the app's current
	// release misses Android's sent broadcast when it lacks a uri extra:
	// the agent reports Processed and then Delivered, never Sent.
	DropSent bool
	// SilentAfter, when set, makes the agent go silent (SetSilent) once it
	// has reported this state of a message: a phone that loses its data
	// connection right after, while its radio goes on.
	SilentAfter smsgateway.ProcessingState
	// FinalOnly reports only each message's final state (with the times
	// of the others), one request per batch instead of three.
	FinalOnly bool
	// PushToken is the Google push token the agent says its app has
	// (pairing and PATCH /device); empty: none, as with the app's "SSE
	// Only" notification channel.
	PushToken string
	// PairWithBearer makes Pair send the code as the app does from its
	// "Private Token" setting (Authorization: Bearer <code>) rather than
	// from its sign-in dialog (Code <code>).
	PairWithBearer bool
	// Order is the processing order asked for: "fifo" (default) or "lifo".
	Order string
	// OnEvent, when set, is called as each event of the stream arrives.
	OnEvent func(name string, at time.Time)
	// OnTake, when set, is called for each message the device takes for
	// the first time, as the answer that hands it over arrives.
	OnTake func(m smsgateway.MobileMessage, at time.Time)
	// OnMessage, when set, is called for each message the radio sends.
	OnMessage func(m smsgateway.MobileMessage)
	// OnCancel, when set, is called for each message the agent cancels
	// (the server asked, and it was still Pending on the phone).
	OnCancel func(id string)
	// PingEvery, when set, makes Run post a system:ping (the phone's
	// health: SetBattery, SetNetwork) at this interval, as the app does at
	// the interval of its ping setting.
	PingEvery time.Duration
	// Battery is the battery level (percent) the pings report until
	// SetBattery changes it; 0 means 100.
	Battery int
}

// FailError is the error reported for a message the radio failed to send.
const FailError = "RESULT_ERROR_GENERIC_FAILURE (simulated radio failure)"

// Agent is one paired reference device.
type Agent struct {
	opt   Options
	ID    string
	Token string
	Login string

	mu     sync.Mutex
	held   map[string]*held // every message taken, by id
	hooks  []smsgateway.Webhook
	events int
	open   bool  // the event stream is open
	err    error // why the stream last ended
	// silent is set while the agent has no data connection: it makes no
	// request, and its stream is closed (hangUp ends it).
	silent bool
	hangUp context.CancelFunc
	speak  chan struct{} // closed when the agent speaks again
	// unreported holds the messages whose last report failed: as the app
	// does, the agent reports them again (before its next pull).
	unreported map[string]bool
	// The health its pings report, and whether its radio fails every send.
	battery  int
	charging bool
	network  int // the app's transport flags: 2 cellular, 4 wifi; 0 none
	failing  bool
	failedAt []time.Time // when sends failed, for messages:failed
	// paused holds the messages taken Pending on the phone: none goes to
	// the radio until SetPaused(false), as an app whose own queue waits
	// (its send limits or delays).
	paused bool
}

type held struct {
	msg smsgateway.MobileMessage
	// radio is set once the message is given to the radio's queue (it is
	// still Pending, and can be canceled, until the radio takes it).
	radio bool
	// state is the message's state on the phone: "" while it is Pending
	// (taken, not yet handed to the radio).
	sent  int // times the radio sent it: more than 1 would be a duplicate
	state smsgateway.ProcessingState
	err   string
	at    map[string]time.Time
	// offers are the validUntils of the hand-outs of the message after
	// the first (the server hands a message again until it hears of it).
	offers []time.Time
}

// registerRequest is the app's DeviceRegisterRequest: client-go's
// MobileRegisterRequest with the SIM cards the app adds.
type registerRequest struct {
	smsgateway.MobileRegisterRequest
	SimCards []simCard `json:"simCards"`
}

type simCard struct {
	SlotIndex   int     `json:"slotIndex"`
	SimNumber   int     `json:"simNumber"`
	PhoneNumber *string `json:"phoneNumber"`
	CarrierName *string `json:"carrierName"`
	ICCID       *string `json:"iccid"`
}

// Pair registers a new device with a pairing code and returns it.
func Pair(ctx context.Context, opt Options, code string) (*Agent, error) {
	a := New(opt, "", "")
	name := opt.Name
	if name == "" {
		name = "Switchboard phone-agent"
	}
	carrier := "Simulated carrier"
	req := registerRequest{MobileRegisterRequest: smsgateway.MobileRegisterRequest{Name: &name},
		SimCards: []simCard{{SlotIndex: 0, SimNumber: 1, CarrierName: &carrier}}}
	if opt.PushToken != "" {
		req.PushToken = &opt.PushToken
	}
	var resp smsgateway.MobileRegisterResponse
	scheme := "Code "
	if opt.PairWithBearer {
		scheme = "Bearer "
	}
	if err := a.call(ctx, "POST", "/device", scheme+code, req, &resp, http.StatusCreated); err != nil {
		return nil, fmt.Errorf("pairing: %w", err)
	}
	a.ID, a.Token, a.Login = resp.Id, resp.Token, resp.Login
	return a, nil
}

// New returns an agent for a device paired before, with its id and token.
func New(opt Options, id, token string) *Agent {
	if opt.HTTP == nil {
		opt.HTTP = &http.Client{}
	}
	if opt.Order == "" {
		opt.Order = "fifo"
	}
	battery := opt.Battery
	if battery <= 0 {
		battery = 100
	}
	return &Agent{opt: opt, ID: id, Token: token, held: map[string]*held{}, unreported: map[string]bool{}, speak: make(chan struct{}),
		battery: battery, network: transportWiFi}
}

// ErrSilent is what a request of a silent agent fails with: it never
// leaves the phone.
var ErrSilent = errors.New("agent: no data connection (silent)")

// SetSilent takes the agent's data connection away (true) or gives it back:
// while silent it makes no request and its event stream is closed; its
// radio goes on, and what it could not report it reports when it speaks
// again, as the app does (Run opens the stream again, and pulls).
func (a *Agent) SetSilent(silent bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.silent == silent {
		return
	}
	a.silent = silent
	if silent {
		a.speak = make(chan struct{})
		if a.hangUp != nil {
			a.hangUp()
		}
	} else {
		close(a.speak)
	}
}

// Silent reports whether the agent is silent.
func (a *Agent) Silent() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.silent
}

// StatusError is a non-2xx answer of the server.
type StatusError struct {
	Status  int
	Message string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message) }

// call makes one request of the protocol, JSON both ways.
func (a *Agent) call(ctx context.Context, method, path, auth string, body, out any, want ...int) error {
	if a.Silent() {
		return ErrSilent
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.opt.URL+path, rd)
	if err != nil {
		return err
	}
	if auth == "" {
		auth = "Bearer " + a.Token
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("User-Agent", "switchboard-phone-agent")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.opt.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return err
	}
	ok := res.StatusCode/100 == 2
	for _, w := range want {
		ok = ok && res.StatusCode == w
	}
	if !ok {
		var e smsgateway.ErrorResponse
		json.Unmarshal(raw, &e)
		if e.Message == "" {
			e.Message = strings.TrimSpace(string(raw))
		}
		return &StatusError{Status: res.StatusCode, Message: e.Message}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return nil
}

// Device returns what the server says of this device.
func (a *Agent) Device(ctx context.Context) (smsgateway.MobileDeviceResponse, error) {
	var out smsgateway.MobileDeviceResponse
	err := a.call(ctx, "GET", "/device", "", nil, &out)
	return out, err
}

// Settings returns the settings the server gives the device.
func (a *Agent) Settings(ctx context.Context) (smsgateway.DeviceSettings, error) {
	var out smsgateway.DeviceSettings
	err := a.call(ctx, "GET", "/settings", "", nil, &out)
	return out, err
}

// Update sends the app's PATCH /device, with its push token (none when
// empty).
func (a *Agent) Update(ctx context.Context, pushToken string) error {
	return a.call(ctx, "PATCH", "/device", "", smsgateway.MobileUpdateRequest{Id: a.ID, PushToken: pushToken}, nil, http.StatusNoContent)
}

// Webhooks returns the subscriptions the server gives the device.
func (a *Agent) Webhooks(ctx context.Context) ([]smsgateway.Webhook, error) {
	var out []smsgateway.Webhook
	if err := a.call(ctx, "GET", "/webhooks", "", nil, &out); err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.hooks = out
	a.mu.Unlock()
	return out, nil
}

// Run holds the event stream open until ctx ends, pulling messages when it
// opens and whenever the server says MessageEnqueued, and opening it again
// after a failure or once a silent agent speaks again. It returns an error
// only when the server refuses the device (a 401: unpaired, replaced or
// deleted).
func (a *Agent) Run(ctx context.Context) error {
	if a.opt.PingEvery > 0 {
		go a.pings(ctx)
	}
	for ctx.Err() == nil {
		a.mu.Lock()
		silent, speak := a.silent, a.speak
		a.mu.Unlock()
		if silent {
			select {
			case <-ctx.Done():
			case <-speak:
			}
			continue
		}
		err := a.stream(ctx)
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusUnauthorized {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// stream holds one /events connection until it ends, or the agent goes
// silent.
func (a *Agent) stream(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	if a.silent {
		a.mu.Unlock()
		return ErrSilent
	}
	a.hangUp = cancel
	a.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, "GET", a.opt.URL+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	req.Header.Set("Accept", "text/event-stream")
	res, err := a.opt.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var e smsgateway.ErrorResponse
		json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&e)
		return &StatusError{Status: res.StatusCode, Message: e.Message}
	}
	a.setOpen(true)
	defer a.setOpen(false)
	pulls := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	go func() { // pulls run beside the stream, as the app's workers do
		for {
			select {
			case <-pulls:
				a.Pull(ctx)
			case <-done:
				return
			}
		}
	}()
	pull := func() {
		select {
		case pulls <- struct{}{}:
		default:
		}
	}
	pull() // on connect, as the app does
	sc := bufio.NewScanner(res.Body)
	event, data, payload := "", false, ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data { // an event is dispatched at the blank line that ends it
				if a.opt.OnEvent != nil {
					a.opt.OnEvent(event, time.Now())
				}
				a.mu.Lock()
				a.events++
				a.mu.Unlock()
				switch event {
				case "", "MessageEnqueued":
					pull()
				case "SettingsUpdated": // as the app: fetch them again
					go a.Settings(ctx)
				case "WebhooksUpdated":
					go a.Webhooks(ctx)
				case eventMessageCancelled: // as the app: cancel it if still Pending
					var p messageCancelled
					if json.Unmarshal([]byte(payload), &p) == nil && p.MessageID != "" {
						go a.cancel(ctx, p.MessageID)
					}
				}
			}
			event, data, payload = "", false, ""
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data {
				payload += "\n"
			}
			data, payload = true, payload+strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	return sc.Err()
}

func (a *Agent) setOpen(open bool) {
	a.mu.Lock()
	a.open = open
	a.mu.Unlock()
}

// Connected reports whether the event stream is open.
func (a *Agent) Connected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.open
}

// StreamErr returns why the event stream last ended (nil: it never did, or
// it ended cleanly).
func (a *Agent) StreamErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Events returns how many events the stream has delivered.
func (a *Agent) Events() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.events
}

// Pull takes the waiting messages and handles each as the app does: one it
// already has gets its state reported again; a new one goes to the radio.
func (a *Agent) Pull(ctx context.Context) error {
	a.mu.Lock()
	retry := make([]string, 0, len(a.unreported))
	for id := range a.unreported {
		retry = append(retry, id)
	}
	a.mu.Unlock()
	if len(retry) > 0 {
		if err := a.report(ctx, retry); err != nil {
			return err
		}
	}
	var msgs []mobileMessage
	if err := a.call(ctx, "GET", "/message?order="+a.opt.Order, "", nil, &msgs); err != nil {
		return err
	}
	at := time.Now()
	var fresh, again, cancel, unknown []string
	var taken []smsgateway.MobileMessage
	a.mu.Lock()
	for _, mm := range msgs {
		m := mm.MobileMessage
		if mm.State == stateCancelling { // as the app's GatewayService.processMessage
			if _, ok := a.held[m.ID]; ok {
				cancel = append(cancel, m.ID)
			} else if !a.opt.Hold {
				// Never got it: nothing to cancel, reported Cancelled.
				a.held[m.ID] = &held{msg: m, state: stateCancelled, at: map[string]time.Time{string(stateCancelled): at}}
				unknown = append(unknown, m.ID)
			}
			continue
		}
		if h, ok := a.held[m.ID]; ok {
			h.offers = append(h.offers, ptrTime(m.ValidUntil))
			if h.state != "" {
				again = append(again, m.ID)
			}
			continue
		}
		a.held[m.ID] = &held{msg: m, at: map[string]time.Time{}}
		fresh = append(fresh, m.ID)
		taken = append(taken, m)
	}
	paused := a.paused
	if !a.opt.Hold && !paused {
		for _, id := range fresh {
			a.held[id].radio = true
		}
	}
	a.mu.Unlock()
	if a.opt.OnTake != nil {
		for _, m := range taken {
			a.opt.OnTake(m, at)
		}
	}
	for _, id := range cancel {
		a.cancel(ctx, id)
	}
	if len(unknown) > 0 {
		if err := a.report(ctx, unknown); err != nil {
			return err
		}
	}
	if len(again) > 0 {
		if err := a.report(ctx, again); err != nil {
			return err
		}
	}
	if a.opt.Hold || paused || len(fresh) == 0 {
		return nil
	}
	return a.send(ctx, fresh)
}

// The app's wire names for cancels, which client-go v1.9 lacks: the event
// (ExternalEventType.MessageCancelled) and its data
// (MessageCancelledEvent.Payload), and the states (ProcessingState) of a
// message whose cancel is asked and of one canceled.
const (
	eventMessageCancelled                            = "MessageCancelled"
	stateCancelling       smsgateway.ProcessingState = "Cancelling"
	stateCancelled        smsgateway.ProcessingState = "Cancelled"
)

type messageCancelled struct {
	MessageID string `json:"messageId"`
}

// mobileMessage is a message of GET /message with its state on the server
// (the app's GatewayApi.Message.state).
type mobileMessage struct {
	smsgateway.MobileMessage
	State smsgateway.ProcessingState `json:"state"`
}

// cancel withdraws the message id as the app's MessagesService.cancelMessage
// does: only one still Pending on the phone (taken, not handed to the
// radio), which it reports Cancelled; one it does not have, or that went
// further, is left as it is. A Hold agent (a phone that vanished) does
// nothing. It reports whether it canceled the message.
func (a *Agent) cancel(ctx context.Context, id string) bool {
	a.mu.Lock()
	h := a.held[id]
	if h == nil || h.state != "" || a.opt.Hold {
		a.mu.Unlock()
		return false
	}
	h.state, h.at[string(stateCancelled)] = stateCancelled, time.Now()
	a.mu.Unlock()
	if a.opt.OnCancel != nil {
		a.opt.OnCancel(id)
	}
	a.report(ctx, []string{id})
	return true
}

// SetPaused holds the messages the agent takes Pending on the phone (true),
// as an app whose own queue waits, so that they can be canceled; false
// sends those waiting, and those taken from then on.
func (a *Agent) SetPaused(ctx context.Context, paused bool) error {
	a.mu.Lock()
	a.paused = paused
	var ids []string
	if !paused && !a.opt.Hold {
		for id, h := range a.held {
			if h.state == "" && !h.radio {
				h.radio = true
				ids = append(ids, id)
			}
		}
	}
	a.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return a.send(ctx, ids)
}

// send runs the radio for ids: each is processed (handed to the radio),
// then sent (or fails to be, for FailShare of them), then delivered, with
// its states reported as it goes (FinalOnly: only the last; DropSent: never
// Sent). As the app does, a message whose validUntil has passed is not
// processed: it fails with "TTL expired"; once processed, it goes out
// whatever its validUntil.
func (a *Agent) send(ctx context.Context, ids []string) error {
	const (
		processed = smsgateway.ProcessingStateProcessed
		sent      = smsgateway.ProcessingStateSent
		delivered = smsgateway.ProcessingStateDelivered
		failed    = smsgateway.ProcessingStateFailed
	)
	steps := []smsgateway.ProcessingState{processed, sent, delivered}
	var last error
	for i, step := range steps {
		now := time.Now()
		a.mu.Lock()
		for _, id := range ids {
			h := a.held[id]
			before := h.state
			switch {
			case h.state == failed || h.state == delivered || h.state == stateCancelled:
			case step == processed && h.msg.ValidUntil != nil && now.After(*h.msg.ValidUntil):
				h.state, h.err = failed, "TTL expired"
			case step == sent && (a.failing || chance(a.opt.FailShare)):
				h.state, h.err = failed, FailError
				a.failedAt = append(a.failedAt, now)
			case step == sent:
				h.sent++
				if a.opt.OnMessage != nil {
					a.opt.OnMessage(h.msg)
				}
				if !a.opt.DropSent {
					h.state = sent
				}
			default:
				h.state = step
			}
			if h.state != before {
				h.at[string(h.state)] = now
			}
		}
		a.mu.Unlock()
		if (a.opt.FinalOnly && i < len(steps)-1) || (a.opt.DropSent && step == sent) {
			continue
		}
		// The radio goes on whether the server hears of it or not: a report
		// that fails is sent again later, with the state of the moment.
		if err := a.report(ctx, ids); err != nil {
			last = err
		}
	}
	return last
}

// report sends the current state of messages it holds (PATCH /message);
// when that fails, they are reported again later.
func (a *Agent) report(ctx context.Context, ids []string) error {
	states, err := a.patch(ctx, ids)
	a.mu.Lock()
	hangUp := false
	for i, id := range ids {
		if err != nil {
			a.unreported[id] = true
		} else {
			delete(a.unreported, id)
			hangUp = hangUp || (a.opt.SilentAfter != "" && states[i] == a.opt.SilentAfter)
		}
	}
	a.mu.Unlock()
	if hangUp {
		a.SetSilent(true)
	}
	return err
}

// patch reports the current state of messages it holds, and returns the
// state it reported of each.
func (a *Agent) patch(ctx context.Context, ids []string) ([]smsgateway.ProcessingState, error) {
	a.mu.Lock()
	req := make(smsgateway.MobilePatchMessageRequest, 0, len(ids))
	states := make([]smsgateway.ProcessingState, 0, len(ids))
	for _, id := range ids {
		h := a.held[id]
		var errp *string
		if h.err != "" {
			e := h.err
			errp = &e
		}
		rec := make([]smsgateway.RecipientState, len(h.msg.PhoneNumbers))
		for i, n := range h.msg.PhoneNumbers {
			rec[i] = smsgateway.RecipientState{PhoneNumber: n, State: h.state, Error: errp}
		}
		at := make(map[string]time.Time, len(h.at))
		for k, v := range h.at {
			at[k] = v
		}
		req = append(req, smsgateway.MobilePatchMessageItem{ID: id, State: h.state, Recipients: rec, States: at})
		states = append(states, h.state)
	}
	a.mu.Unlock()
	return states, a.call(ctx, "PATCH", "/message", "", req, nil, http.StatusNoContent)
}

// Held returns the messages the device has taken, by id.
func (a *Agent) Held() map[string]smsgateway.MobileMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]smsgateway.MobileMessage, len(a.held))
	for id, h := range a.held {
		out[id] = h.msg
	}
	return out
}

// Offers returns the validUntil of each hand-out of the message id after
// the first.
func (a *Agent) Offers(id string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := a.held[id]; h != nil {
		return append([]time.Time(nil), h.offers...)
	}
	return nil
}

// State returns the last state of the message id on the phone ("" before
// its radio took it).
func (a *Agent) State(id string) smsgateway.ProcessingState {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := a.held[id]; h != nil {
		return h.state
	}
	return ""
}

func ptrTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// SentCount returns how many times the radio sent the message id: 0 or 1,
// unless a message was sent twice.
func (a *Agent) SentCount(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := a.held[id]; h != nil {
		return h.sent
	}
	return 0
}

// smsReceived is the app's sms:received payload (SmsEventPayload.SmsReceived;
// client-go has no type for it).
type smsReceived struct {
	MessageID   string    `json:"messageId"`
	Sender      string    `json:"sender"`
	Recipient   *string   `json:"recipient"`
	SimNumber   *int      `json:"simNumber"`
	Message     string    `json:"message"`
	ReceivedAt  time.Time `json:"receivedAt"`
	PhoneNumber string    `json:"phoneNumber"`
}

// Event is the app's webhook body (WebHookEventDTO).
type Event struct {
	ID        string `json:"id"`
	WebhookID string `json:"webhookId"`
	Event     string `json:"event"`
	DeviceID  string `json:"deviceId"`
	Payload   any    `json:"payload"`
}

// Inbound makes the phone receive text from sender: it posts sms:received
// to the callback the server subscribed it to, as the app does, and returns
// the event it posted (post it again with Post to play the app's retry).
func (a *Agent) Inbound(ctx context.Context, sender, text string) (Event, error) {
	return a.InboundSIM(ctx, sender, text, 0)
}

// InboundSIM is Inbound on the phone's SIM sim (1 to 3; 0: the app does
// not say which).
func (a *Agent) InboundSIM(ctx context.Context, sender, text string, sim int) (Event, error) {
	p := smsReceived{MessageID: randomID(), Sender: sender, Message: text, ReceivedAt: time.Now(), PhoneNumber: sender}
	if sim > 0 {
		p.SimNumber = &sim
	}
	ev := Event{ID: randomID(), Event: smsgateway.WebhookEventSmsReceived, DeviceID: a.ID, Payload: p}
	return ev, a.Post(ctx, ev)
}

// Post posts a webhook event to the device's sms:received subscription.
func (a *Agent) Post(ctx context.Context, ev Event) error {
	ev.Event = smsgateway.WebhookEventSmsReceived
	return a.post(ctx, ev)
}

// post posts a webhook event to the device's subscription to its event.
func (a *Agent) post(ctx context.Context, ev Event) error {
	if a.Silent() {
		return ErrSilent
	}
	a.mu.Lock()
	hooks := a.hooks
	a.mu.Unlock()
	if hooks == nil {
		var err error
		if hooks, err = a.Webhooks(ctx); err != nil {
			return err
		}
	}
	for _, h := range hooks {
		if h.Event != ev.Event {
			continue
		}
		ev.WebhookID = h.ID
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, "POST", h.URL, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := a.opt.HTTP.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			return &StatusError{Status: res.StatusCode, Message: "the " + ev.Event + " callback failed"}
		}
		return nil
	}
	return errors.New("the server gave no " + ev.Event + " subscription")
}

// The app's transport flags (modules/connection/TransportType.kt).
const (
	transportCellular = 2
	transportWiFi     = 4
)

// SetBattery sets the battery level (percent) and charging its pings
// report.
func (a *Agent) SetBattery(level int, charging bool) {
	a.mu.Lock()
	a.battery, a.charging = level, charging
	a.mu.Unlock()
}

// SetNetwork sets the network its pings report: "wifi", "cellular", or
// "none" (no internet connection).
func (a *Agent) SetNetwork(network string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch network {
	case "cellular":
		a.network = transportCellular
	case "none":
		a.network = 0
	default:
		a.network = transportWiFi
	}
}

// SetFailing makes the radio fail every send (true), as a SIM whose
// carrier blocks it, or work again.
func (a *Agent) SetFailing(failing bool) {
	a.mu.Lock()
	a.failing = failing
	a.mu.Unlock()
}

// Ping posts the app's system:ping with the agent's health: the payload
// {"health": HealthResponse} of the app's PingEvent, with its checks
// (battery level and charging flags, connection status and transport
// flags, messages failed in the last hour).
func (a *Agent) Ping(ctx context.Context) error {
	a.mu.Lock()
	cut := time.Now().Add(-time.Hour)
	failed := 0
	for _, t := range a.failedAt {
		if t.After(cut) {
			failed++
		}
	}
	charging := 0
	if a.charging {
		charging = 1 + 2 // charging, on AC
	}
	connected := 0
	if a.network != 0 {
		connected = 1
	}
	pass := smsgateway.HealthStatusPass
	h := smsgateway.HealthResponse{Status: pass, Version: "switchboard-phone-agent", Checks: smsgateway.HealthChecks{
		"battery:level":        {Status: pass, ObservedValue: a.battery, ObservedUnit: "percent", Description: "Battery level in percent"},
		"battery:charging":     {Status: pass, ObservedValue: charging, ObservedUnit: "flags", Description: "Is the phone charging?"},
		"connection:status":    {Status: pass, ObservedValue: connected, ObservedUnit: "boolean", Description: "Internet connection status"},
		"connection:transport": {Status: pass, ObservedValue: a.network, ObservedUnit: "flags", Description: "Network transport type"},
		"messages:failed":      {Status: pass, ObservedValue: failed, ObservedUnit: "messages", Description: "Failed messages for last hour"},
	}}
	a.mu.Unlock()
	return a.post(ctx, Event{ID: randomID(), Event: smsgateway.WebhookEventSystemPing, DeviceID: a.ID, Payload: map[string]any{"health": h}})
}

// Started posts the app's app:started, with its SIM cards.
func (a *Agent) Started(ctx context.Context) error {
	carrier := "Simulated carrier"
	return a.post(ctx, Event{ID: randomID(), Event: "app:started", DeviceID: a.ID,
		Payload: map[string]any{"simCards": []simCard{{SlotIndex: 0, SimNumber: 1, CarrierName: &carrier}}}})
}

// pings posts system:ping every PingEvery until ctx ends (app:started
// first, as the app does when it starts).
func (a *Agent) pings(ctx context.Context) {
	a.Started(ctx)
	t := time.NewTicker(a.opt.PingEvery)
	defer t.Stop()
	for {
		a.Ping(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func randomID() string {
	var b [10]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func chance(p float64) bool {
	if p <= 0 {
		return false
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(1_000_000))
	return float64(n.Int64()) < p*1_000_000
}
