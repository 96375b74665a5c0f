// Package android is the server side of the device protocol of "SMS Gateway
// for Android" (capcom6/android-sms-gateway), the open-source app that turns
// an Android phone into a sending phone. Switchboard acts as the app's
// private server: the app pairs with a one-time code, holds a Server-Sent
// Events stream open, takes the messages waiting for it, reports what
// becomes of them, and posts the texts it receives to a callback URL.
//
// The wire format is the app's (modules/gateway/GatewayApi.kt and the
// mobile types of github.com/android-sms-gateway/client-go): bare JSON
// objects, not Switchboard's envelope, and errors as {"message": ...}. The
// messages themselves live in the store's device queue; this package moves
// them between the store and the devices, keeps the phones' last-seen time,
// wakes the devices, and runs the sweeper that moves messages no device took
// away from phones that went offline, and fails those a device took and
// never reported on (see sqlstore.SweepDeviceMessages).
package android

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/clientip"
	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/ratelimit"
)

// Store is what the device protocol needs from storage.
type Store interface {
	PairDevice(ctx context.Context, code string, dev *sb.Device, creds sb.DeviceCredentials, now time.Time) (*sb.Phone, error)
	PhoneByToken(ctx context.Context, token string) (*sb.Phone, error)
	PhoneByInboundSecret(ctx context.Context, secret string) (*sb.Phone, error)
	TouchDevice(ctx context.Context, phoneID, deviceID string, now time.Time) (bool, error)
	UpdateDevice(ctx context.Context, phoneID, deviceID, name string, pushToken bool) error
	TakeDeviceMessages(ctx context.Context, phoneID, deviceID string, lifo bool, now time.Time, validFor time.Duration) (msgs []*sb.Message, fresh int, next time.Time, err error)
	ReportDeviceStates(ctx context.Context, phoneID, deviceID string, reports []sb.DeviceReport, now time.Time) error
	DeviceWorkWaiting(ctx context.Context, phoneID, deviceID string, now time.Time) (bool, error)
	// DeviceCancels returns the messages the device holds whose cancel it
	// has not confirmed.
	DeviceCancels(ctx context.Context, deviceID string) ([]string, error)
	SweepDeviceMessages(ctx context.Context, now time.Time, limit int) (sb.DeviceSweep, error)
	Inbound(ctx context.Context, m *sb.Message) error
	// RecordHealth stores what a device said of itself in its ping;
	// AndroidPhones lists every android phone, for the fleet's metrics.
	RecordHealth(ctx context.Context, phoneID, deviceID string, h sb.Health) error
	AndroidPhones(ctx context.Context) ([]*sb.Phone, error)
	// AnnouncePresence emits phone.offline and phone.online for the
	// phones whose presence changed.
	AnnouncePresence(ctx context.Context, now, cutoff time.Time, limit int) (offline, online int, err error)
	// DeviceConfig and SetDeviceConfig keep the hashes of the settings and
	// webhooks a device last fetched.
	DeviceConfig(ctx context.Context, phoneID, deviceID string) (settings, webhooks string, err error)
	SetDeviceConfig(ctx context.Context, phoneID, deviceID string, webhooks bool, hash string) error
	// DevicePhones returns the phones a device speaks for: the one it
	// paired with, then those of its other SIMs.
	DevicePhones(ctx context.Context, id, deviceID string) ([]*sb.Phone, error)
	// PhoneWork tells every node that a phone's device has work;
	// OnPhoneWork registers what to call when one has.
	PhoneWork(ctx context.Context, phoneID string) error
	OnPhoneWork(fn func(phoneID string))
}

// Config configures a Server; zero values take the defaults.
type Config struct {
	Store   Store
	Routing sb.Routing
	// ValidFor is how long a message handed to a device stays valid there
	// (its validUntil). Default 10 minutes.
	ValidFor time.Duration
	// PublicURL is the base of the URLs handed to devices (their inbound
	// callback), e.g. https://sms.example.com. Empty: the scheme and host
	// the device used.
	PublicURL string
	Now       func() time.Time
	// Limiter counts the inbound texts of each phone (InboundPerMinute);
	// nil: one of this process.
	Limiter ratelimit.Limiter
	// Access, when set, decides whether a phone's tenant may use its
	// device now (auth.Authenticator.TenantAccess): a suspended tenant's,
	// or one whose trial ended, gets 403 and its event streams end.
	Access interface {
		TenantAccess(ctx context.Context, tenantID string) error
	}
	// Shared, when set, counts pairing attempts across the nodes that
	// share it (ratelimit.Postgres on PostgreSQL); each node also limits
	// its own (see limits.go).
	Shared Counter
	// Registry, when set, gets the protocol's metrics.
	Registry prometheus.Registerer
	// Log receives the protocol's log lines (default slog.Default()).
	Log *slog.Logger
}

// DefaultValidFor is the default of Config.ValidFor.
const DefaultValidFor = 10 * time.Minute

// Server serves the device protocol (an http.Handler for the paths under
// /api/mobile/v1/) and runs the device sweeper.
type Server struct {
	cfg       Config
	mux       *http.ServeMux
	keepAlive time.Duration // between keep-alive comments on /events
	// touchGap is the least time between two last-seen writes of a phone
	// on this node (a quarter of OfflineAfter): an open stream, whose
	// beats would write it every keepAlive, keeps its phone online with
	// four writes or more in every OfflineAfter.
	touchGap time.Duration
	// detached counts the streams served by goroutines of their own
	// (events): Shutdown waits for them. conns are their connections,
	// whose writes Shutdown cuts short (under mu).
	detached sync.WaitGroup
	conns    map[net.Conn]bool

	streams streams
	pacing  pacing
	pings   pingCache
	pairs   pairingLimits
	creds   credentialGuard
	metrics metrics

	mu      sync.Mutex
	touched map[string]time.Time // phone id -> last last-seen write

	closing chan struct{} // closed by Shutdown
	once    sync.Once
}

// Shutdown ends every open event stream, and returns once those served
// outside a handler (events) have ended: the server's graceful shutdown
// waits for handlers only, and a stream never ends on its own.
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.once.Do(func() { close(s.closing) })
	// A stream writing to a device that stopped reading would wait for
	// its write's deadline (streamWriteTimeout): it fails now.
	for c := range s.conns {
		c.SetWriteDeadline(time.Now())
	}
	s.mu.Unlock()
	s.detached.Wait()
}

// track adds (on) or removes the connection of a stream served outside
// its handler, for Shutdown.
func (s *Server) track(c net.Conn, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !on {
		delete(s.conns, c)
		return
	}
	if s.conns == nil {
		s.conns = map[net.Conn]bool{}
	}
	s.conns[c] = true
}

// detach counts a stream about to be served outside its handler, unless
// the server is shutting down.
func (s *Server) detach() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		return false
	default:
		s.detached.Add(1)
		return true
	}
}

// Prefix is where the protocol is served; the URL a person types into the
// app is https://HOST/api/mobile/v1.
const Prefix = "/api/mobile/v1"

// New returns a Server and registers its wake-ups with the store.
func New(cfg Config) *Server {
	if cfg.ValidFor <= 0 {
		cfg.ValidFor = DefaultValidFor
	}
	if cfg.Routing.OfflineAfter <= 0 {
		cfg.Routing.OfflineAfter = sb.DefaultPhoneOfflineAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Routing.PingInterval <= 0 {
		cfg.Routing.PingInterval = sb.DefaultPingInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Limiter == nil {
		cfg.Limiter = ratelimit.NewMemory(nil)
	}
	cfg.PublicURL = strings.TrimSuffix(cfg.PublicURL, "/")
	s := &Server{cfg: cfg, mux: http.NewServeMux(), touched: map[string]time.Time{}, closing: make(chan struct{}),
		keepAlive: min(15*time.Second, cfg.Routing.OfflineAfter/3),
		touchGap:  cfg.Routing.OfflineAfter / 4}
	s.streams.init()
	s.pacing.init()
	s.pings.init()
	s.pairs.init(cfg.Shared)
	s.metrics = newMetrics(cfg.Registry, &s.streams, s.fleetStates)
	cfg.Store.OnPhoneWork(s.streams.wake)
	s.mux.HandleFunc("POST "+Prefix+"/device", s.register)
	s.mux.HandleFunc("GET "+Prefix+"/device", s.device(s.getDevice))
	s.mux.HandleFunc("PATCH "+Prefix+"/device", s.device(s.patchDevice))
	s.mux.HandleFunc("GET "+Prefix+"/events", s.device(s.events))
	s.mux.HandleFunc("GET "+Prefix+"/message", s.device(s.getMessages))
	s.mux.HandleFunc("PATCH "+Prefix+"/message", s.device(s.patchMessages))
	s.mux.HandleFunc("GET "+Prefix+"/settings", s.device(s.getSettings))
	s.mux.HandleFunc("GET "+Prefix+"/webhooks", s.device(s.getWebhooks))
	s.mux.HandleFunc("POST "+Prefix+"/inbound/{secret}", s.inbound)
	s.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "No such endpoint of the device protocol.")
	})
	return s
}

// ServeHTTP serves the device protocol.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// errorBody is the app's error answer (client-go's ErrorResponse).
type errorBody struct {
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"message":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// fail answers err: the message of an *sb.Error with its status, anything
// else logged and answered 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *sb.Error
	if !errors.As(err, &e) {
		if r.Context().Err() == nil {
			// The route, not the path: an inbound callback's path holds
			// its secret.
			s.cfg.Log.Error("device protocol", "route", r.Pattern, "err", err)
		}
		writeError(w, http.StatusInternalServerError, "An unexpected error occurred.")
		return
	}
	status := http.StatusBadRequest
	switch e.Code {
	case sb.CodeInvalidToken:
		status = http.StatusUnauthorized
	case sb.CodeTenantSuspended, sb.CodeTrialExpired:
		status = http.StatusForbidden
	case sb.CodeRateLimitExceeded:
		status = http.StatusTooManyRequests
	}
	writeError(w, status, e.Message)
}

// authorization returns the credentials of the scheme (compared without
// regard to case, RFC 9110) in the Authorization header, or "".
func authorization(r *http.Request, scheme string) string {
	h := r.Header.Get("Authorization")
	if len(h) > len(scheme) && strings.EqualFold(h[:len(scheme)], scheme) && h[len(scheme)] == ' ' {
		return strings.TrimSpace(h[len(scheme)+1:])
	}
	return ""
}

// maxBody bounds every request body of the protocol.
const maxBody = 1 << 20

// readBody reads a request body of at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return nil, sb.Errorf(sb.CodeValidation, "The request body could not be read or is larger than %d bytes.", maxBody)
	}
	return raw, nil
}

// unmarshal decodes the JSON the protocol expects; unknown fields are
// ignored (the app adds fields between releases).
func unmarshal(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return sb.Errorf(sb.CodeValidation, "The request body is not the JSON the protocol expects: %v.", err)
	}
	return nil
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := readBody(w, r)
	if err != nil {
		return err
	}
	return unmarshal(raw, v)
}

// device adapts a handler of a call made with a device token.
func (s *Server) device(h func(w http.ResponseWriter, r *http.Request, ph *sb.Phone) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token := authorization(r, "Bearer")
		if token == "" {
			writeError(w, http.StatusUnauthorized, "A device token is required: Authorization: Bearer <token>.")
			return
		}
		if s.throttled(w, r, credToken, token) {
			return
		}
		ph, err := s.cfg.Store.PhoneByToken(r.Context(), token)
		s.checked(r, credToken, token, err)
		if err == nil {
			err = s.access(r.Context(), ph)
		}
		if err == nil {
			err = s.seen(r.Context(), ph, s.touchGap)
		}
		if err == nil {
			err = h(w, r, ph)
		}
		if err != nil {
			s.fail(w, r, err)
		}
	}
}

// access answers TENANT_SUSPENDED or TRIAL_EXPIRED when ph's tenant may
// not use its device now.
func (s *Server) access(ctx context.Context, ph *sb.Phone) error {
	if s.cfg.Access == nil {
		return nil
	}
	return s.cfg.Access.TenantAccess(ctx, ph.TenantID)
}

// TenantChanged makes the event streams of the tenant's phones on this
// node check at once whether the tenant may still use them (a suspension
// ends them); otherwise they check at every beat.
func (s *Server) TenantChanged(tenantID string) { s.streams.recheck(tenantID) }

// seen records that ph's device was seen now, unless this node wrote it
// less than gap ago, and answers INVALID_TOKEN when the device is no longer
// the phone's.
func (s *Server) seen(ctx context.Context, ph *sb.Phone, gap time.Duration) error {
	now := s.cfg.Now()
	s.mu.Lock()
	last, ok := s.touched[ph.ID]
	if ok && now.Sub(last) < gap {
		s.mu.Unlock()
		return nil
	}
	s.touched[ph.ID] = now
	s.mu.Unlock()
	current, err := s.cfg.Store.TouchDevice(ctx, ph.ID, ph.Device.ID, now.UTC())
	if err != nil {
		return err
	}
	if !current {
		return sb.Errorf(sb.CodeInvalidToken, "The device token is not valid.")
	}
	return nil
}

type simCard struct {
	SlotIndex   int     `json:"slotIndex"`
	SimNumber   int     `json:"simNumber"`
	PhoneNumber *string `json:"phoneNumber"`
	CarrierName *string `json:"carrierName"`
	ICCID       *string `json:"iccid"`
}

type registerRequest struct {
	Name      *string   `json:"name"`
	PushToken *string   `json:"pushToken"`
	SimCards  []simCard `json:"simCards"`
}

type registerResponse struct {
	ID       string  `json:"id"`
	Token    string  `json:"token"`
	Login    string  `json:"login"`
	Password *string `json:"password"`
}

// maxDeviceName bounds the name a device gives itself.
const maxDeviceName = 128

// register pairs a device by one-time code: POST /device with
// Authorization: Code <code>, or Bearer <code> (what the app sends from its
// "Private Token" setting when it registers again without a sign-in).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	code := cmp.Or(authorization(r, "Code"), authorization(r, "Bearer"))
	if code == "" {
		writeError(w, http.StatusUnauthorized, "A pairing code is required: Authorization: Code <code> (or Bearer <code>).")
		return
	}
	if !sb.IsPairingCode(code) { // cannot be one: no lookup, nothing counted
		s.metrics.pairings.WithLabelValues("refused").Inc()
		writeError(w, http.StatusUnauthorized, "The pairing code is unknown, used or expired.")
		return
	}
	now := s.cfg.Now()
	client := clientip.KeyOf(r.RemoteAddr)
	limit, wait, err := s.pairs.take(r.Context(), client)
	if err != nil {
		s.cfg.Log.Error("counting a pairing attempt", "err", err)
		writeError(w, http.StatusServiceUnavailable, "Pairing is unavailable for a moment. Try again.")
		return
	}
	if limit != "" {
		s.metrics.pairings.WithLabelValues("limited").Inc()
		s.metrics.pairingLimited.WithLabelValues(limit).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(wait))
		writeError(w, http.StatusTooManyRequests, "Too many pairing attempts. Wait and try again.")
		return
	}
	raw, err := readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name, pushToken, err := parseRegister(raw)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := sb.NewDeviceID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	token, err := sb.NewDeviceToken()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	dev := &sb.Device{ID: id, Name: name, PairedAt: now.UTC().Truncate(time.Microsecond), PushToken: pushToken}
	ph, err := s.cfg.Store.PairDevice(r.Context(), code, dev, sb.DeviceCredentials{Token: token, InboundSecret: sb.InboundSecret(token)}, now.UTC())
	if err != nil {
		if sb.ErrorCode(err) == sb.CodeInvalidToken {
			s.metrics.pairings.WithLabelValues("refused").Inc()
			s.cfg.Log.Info("device pairing refused", "client", client)
		}
		s.fail(w, r, err)
		return
	}
	s.pairs.refund(r.Context(), client)
	s.metrics.pairings.WithLabelValues("paired").Inc()
	s.cfg.Log.Info("device paired", "tenant_id", ph.TenantID, "phone_id", ph.ID, "device_id", id, "device_name", name)
	// The stream of a device paired before ends now on this node; on
	// another, when that node next writes last-seen for it (within
	// sb.Routing.OfflineAfter/4 and a beat) and finds it replaced.
	s.streams.end(ph.ID)
	writeJSON(w, http.StatusCreated, registerResponse{ID: id, Token: token, Login: ph.ID})
}

// parseRegister reads the body of POST /device and returns the name the
// device gives itself (a default when it gives none) and whether its app
// has a push token.
func parseRegister(raw []byte) (name string, pushToken bool, err error) {
	var req registerRequest
	if err := unmarshal(raw, &req); err != nil {
		return "", false, err
	}
	name = "Android phone"
	if req.Name != nil && strings.TrimSpace(*req.Name) != "" {
		name = truncate(strings.TrimSpace(*req.Name), maxDeviceName)
	}
	return name, hasPushToken(req.PushToken), nil
}

// hasPushToken reports whether the app gave a push token: it gives none
// (the field is left out: Gson writes no nulls) when its notification
// channel is "SSE Only".
func hasPushToken(token *string) bool { return token != nil && strings.TrimSpace(*token) != "" }

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// clientAddr is the client's IP address, the key of pairing limits.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type deviceInfo struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	CreatedAt appTime `json:"createdAt"`
	UpdatedAt appTime `json:"updatedAt"`
	LastSeen  appTime `json:"lastSeen"`
}

type deviceResponse struct {
	Device     *deviceInfo `json:"device,omitempty"`
	ExternalIP string      `json:"externalIp,omitempty"`
}

func (s *Server) getDevice(w http.ResponseWriter, r *http.Request, ph *sb.Phone) error {
	now := appTime(s.cfg.Now())
	d := ph.Device
	writeJSON(w, http.StatusOK, deviceResponse{ExternalIP: clientAddr(r),
		Device: &deviceInfo{ID: d.ID, Name: d.Name, CreatedAt: appTime(d.PairedAt), UpdatedAt: now, LastSeen: now}})
	return nil
}

type devicePatch struct {
	ID        string    `json:"id"`
	Name      *string   `json:"name"`
	PushToken *string   `json:"pushToken"`
	SimCards  []simCard `json:"simCards"`
}

// patchDevice takes what the app says of itself after it starts, and
// whenever its push token changes: a new name, and whether it has a push
// token (the whole state each time).
func (s *Server) patchDevice(w http.ResponseWriter, r *http.Request, ph *sb.Phone) error {
	var req devicePatch
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	name := ""
	if req.Name != nil {
		name = truncate(strings.TrimSpace(*req.Name), maxDeviceName)
	}
	if err := s.cfg.Store.UpdateDevice(r.Context(), ph.ID, ph.Device.ID, name, hasPushToken(req.PushToken)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Settings is what GET /settings gives the app: what an unattended phone
// needs (docs/phones.md), in the sections and names of the app's
// settings code (modules/settings/SettingsService.kt and each module's
// *Settings.kt import). Sections and names it does not give stay as the
// phone's owner set them.
type Settings struct {
	Gateway  GatewaySettings  `json:"gateway"`
	Messages MessagesSettings `json:"messages"`
	Ping     *PingSettings    `json:"ping,omitempty"`
}

// PingSettings are the app's PingSettings: how often it emits
// system:ping (its health), in seconds.
type PingSettings struct {
	IntervalSeconds int `json:"interval_seconds"`
}

// GatewaySettings are the app's GatewaySettings.
type GatewaySettings struct {
	// NotificationChannel "SSE_ONLY": the app holds the event stream open
	// instead of registering for Google push, which a private server
	// cannot send (the default "AUTO" pulls every 15 minutes).
	NotificationChannel string `json:"notification_channel"`
}

// MessagesSettings are the app's MessagesSettings.
type MessagesSettings struct {
	// SendIntervalMin and SendIntervalMax are the app's random delay
	// between two texts, in seconds: 0 and none, as on a fresh install,
	// turn it off.
	SendIntervalMin int  `json:"send_interval_min"`
	SendIntervalMax *int `json:"send_interval_max"`
	// LimitPeriod "Disabled" and LimitValue 0 turn the app's own send
	// limit off: pacing is Switchboard's (rate_limit, daily_limit).
	LimitPeriod string `json:"limit_period"`
	LimitValue  int    `json:"limit_value"`
	// ProcessingOrder "FIFO": the oldest message first.
	ProcessingOrder string `json:"processing_order"`
}

// DeviceSettings is the answer of GET /settings.
var DeviceSettings = Settings{
	Gateway:  GatewaySettings{NotificationChannel: "SSE_ONLY"},
	Messages: MessagesSettings{LimitPeriod: "Disabled", ProcessingOrder: "FIFO"},
}

// getSettings gives the app DeviceSettings and its ping interval. The app
// asks at start, once a day, and when told SettingsUpdated; it applies what
// changed, and asks its owner once to restart it (the notification channel
// and the ping take effect then).
func (s *Server) getSettings(w http.ResponseWriter, r *http.Request, ph *sb.Phone) error {
	settings := s.Settings()
	writeJSON(w, http.StatusOK, settings)
	return s.cfg.Store.SetDeviceConfig(r.Context(), ph.ID, ph.Device.ID, false, hashJSON(settings))
}

// hashJSON is the hash of v's JSON, by which a device's fetched settings
// and webhooks are compared with what it would fetch now.
func hashJSON(v any) string {
	b, _ := json.Marshal(v)
	return sb.HashSecret(string(b))[:32]
}

// Settings is what GET /settings answers.
func (s *Server) Settings() Settings {
	out := DeviceSettings
	out.Ping = &PingSettings{IntervalSeconds: max(1, int(s.cfg.Routing.PingInterval/time.Second))}
	return out
}

type webhookJSON struct {
	ID       string  `json:"id"`
	DeviceID *string `json:"deviceId"`
	URL      string  `json:"url"`
	Event    string  `json:"event"`
}

// The ids of the subscriptions a device is given.
const (
	InboundWebhookID = "switchboard-inbound"
	PingWebhookID    = "switchboard-ping"
	StartedWebhookID = "switchboard-started"
)

// getWebhooks gives the device its subscriptions, all posted to the
// phone's own callback URL, whose secret comes from the device's token:
// sms:received (inbound texts), system:ping (its health) and app:started.
func (s *Server) getWebhooks(w http.ResponseWriter, r *http.Request, ph *sb.Phone) error {
	hooks := s.webhooks(r, ph)
	writeJSON(w, http.StatusOK, hooks)
	return s.cfg.Store.SetDeviceConfig(r.Context(), ph.ID, ph.Device.ID, true, hashJSON(hooks))
}

// webhooks are the subscriptions of ph's device, which asked with r.
func (s *Server) webhooks(r *http.Request, ph *sb.Phone) []webhookJSON {
	base := s.cfg.PublicURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	id := ph.Device.ID
	url := base + Prefix + "/inbound/" + sb.InboundSecret(authorization(r, "Bearer"))
	return []webhookJSON{
		{ID: InboundWebhookID, DeviceID: &id, Event: eventSMSReceived, URL: url},
		{ID: PingWebhookID, DeviceID: &id, Event: eventSystemPing, URL: url},
		{ID: StartedWebhookID, DeviceID: &id, Event: eventAppStarted, URL: url},
	}
}

type messageJSON struct {
	ID                 string   `json:"id"`
	TextMessage        textJSON `json:"textMessage"`
	PhoneNumbers       []string `json:"phoneNumbers"`
	SimNumber          *int     `json:"simNumber,omitempty"`
	WithDeliveryReport bool     `json:"withDeliveryReport"`
	// Priority is the app's message priority: from PriorityBypass on, it
	// skips the app's own limits and delays.
	Priority   int     `json:"priority,omitempty"`
	ValidUntil appTime `json:"validUntil"`
	// State is the app's ProcessingState of the message on the server:
	// "Pending", or "Cancelling" for one whose cancel is asked (the app
	// withdraws it if it is still Pending there, and reports it Cancelled).
	State     string  `json:"state"`
	CreatedAt appTime `json:"createdAt"`
}

type textJSON struct {
	Text string `json:"text"`
}

// getMessages hands the device the messages waiting for it
// (sqlstore.TakeDeviceMessages), oldest first or, with order=lifo, newest
// first. When the phone's pacing holds some back, the device is woken
// again when the next may go.
func (s *Server) getMessages(w http.ResponseWriter, r *http.Request, ph *sb.Phone) error {
	order := r.URL.Query().Get("order")
	if order != "" && !strings.EqualFold(order, "fifo") && !strings.EqualFold(order, "lifo") {
		return sb.Errorf(sb.CodeValidation, `order must be "fifo" or "lifo".`)
	}
	now := s.cfg.Now()
	phones, err := s.devicePhones(r.Context(), ph)
	if err != nil {
		return err
	}
	out := []messageJSON{}
	for _, p := range phones {
		// Each phone's messages go with its own SIM: a message of the
		// phone of SIM 2 never carries another SIM's number.
		msgs, fresh, next, err := s.cfg.Store.TakeDeviceMessages(r.Context(), p.ID, ph.Device.ID, strings.EqualFold(order, "lifo"), now.UTC(), s.cfg.ValidFor)
		if err != nil {
			return err
		}
		s.metrics.handed.Add(float64(fresh))
		if !next.IsZero() {
			id := p.ID
			s.pacing.wakeAt(id, next, func() { s.cfg.Store.PhoneWork(context.Background(), id) })
		}
		for _, m := range msgs {
			out = append(out, messageJSON{ID: m.ID, TextMessage: textJSON{Text: m.Body}, PhoneNumbers: []string{m.To},
				SimNumber: positiveOrNil(p.SimNumber), WithDeliveryReport: true, ValidUntil: appTime(*m.ValidUntil), CreatedAt: appTime(m.CreatedAt),
				Priority: priorityOf(m), State: stateOf(m)})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// devicePhones returns the phones ph's device speaks for: ph alone, or ph
// and the phones of its device's other SIMs.
func (s *Server) devicePhones(ctx context.Context, ph *sb.Phone) ([]*sb.Phone, error) {
	phones, err := s.cfg.Store.DevicePhones(ctx, ph.ID, ph.Device.ID)
	if err != nil {
		return nil, err
	}
	if len(phones) == 0 {
		return []*sb.Phone{ph}, nil
	}
	return phones, nil
}

// PriorityBypass is the app's priority from which a message skips its own
// limits and delays (client-go's PriorityBypassThreshold): what a send of
// priority "high" carries.
const PriorityBypass = 100

func priorityOf(m *sb.Message) int {
	if m.HighPriority {
		return PriorityBypass
	}
	return 0
}

// stateOf is the app's ProcessingState a message is handed out in.
func stateOf(m *sb.Message) string {
	if m.Cancelling {
		return sb.DeviceCancelling
	}
	return sb.DevicePending
}

func positiveOrNil(n int) *int {
	if n <= 0 {
		return nil
	}
	return &n
}

type recipientState struct {
	PhoneNumber string  `json:"phoneNumber"`
	State       string  `json:"state"`
	Error       *string `json:"error"`
}

type messagePatch struct {
	ID         string              `json:"id"`
	State      string              `json:"state"`
	Recipients []recipientState    `json:"recipients"`
	States     map[string]sentTime `json:"states"`
}

// maxPatchItems bounds one PATCH /message.
const maxPatchItems = 1000

// patchMessages takes the device's reports of the messages it holds.
func (s *Server) patchMessages(w http.ResponseWriter, r *http.Request, ph *sb.Phone) error {
	raw, err := readBody(w, r)
	if err != nil {
		return err
	}
	reports, err := parseReports(raw)
	if err != nil {
		return err
	}
	phones, err := s.devicePhones(r.Context(), ph)
	if err != nil {
		return err
	}
	for _, p := range phones { // each applies the reports on its own messages
		if err := s.cfg.Store.ReportDeviceStates(r.Context(), p.ID, ph.Device.ID, reports, s.cfg.Now().UTC()); err != nil {
			return err
		}
	}
	for _, rep := range reports {
		s.metrics.reports.WithLabelValues(reportLabel(rep.State)).Inc()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// parseReports reads the body of PATCH /message: an array of at most
// maxPatchItems reports, each naming a message.
func parseReports(raw []byte) ([]sb.DeviceReport, error) {
	var items []messagePatch
	if err := unmarshal(raw, &items); err != nil {
		return nil, err
	}
	if len(items) > maxPatchItems {
		return nil, sb.Errorf(sb.CodeValidation, "At most %d messages can be reported at once.", maxPatchItems)
	}
	reports := make([]sb.DeviceReport, 0, len(items))
	for _, it := range items {
		if it.ID == "" || len(it.ID) > maxID {
			return nil, sb.Errorf(sb.CodeValidation, "Every item needs the id of a message (at most %d characters).", maxID)
		}
		rep := sb.DeviceReport{MessageID: it.ID, State: it.State, At: time.Time(it.States[it.State]),
			SentAt: cmp.Or(time.Time(it.States[sb.DeviceProcessed]), time.Time(it.States[sb.DeviceSent]))}
		for _, rc := range it.Recipients {
			if rc.Error != nil && *rc.Error != "" {
				rep.Error = truncate(*rc.Error, maxError)
				break
			}
		}
		reports = append(reports, rep)
	}
	return reports, nil
}

// Limits of what a device reports.
const (
	maxID    = 64  // a message or event id
	maxError = 500 // a failure reason, in characters
)

// inboundEvent is the body the app posts to a webhook (WebHookEventDTO).
type inboundEvent struct {
	ID        string          `json:"id"`
	WebhookID string          `json:"webhookId"`
	Event     string          `json:"event"`
	DeviceID  string          `json:"deviceId"`
	Payload   json.RawMessage `json:"payload"`
}

// smsReceived is the payload of sms:received (SmsEventPayload.SmsReceived).
type smsReceived struct {
	MessageID  string   `json:"messageId"`
	Sender     string   `json:"sender"`
	Recipient  *string  `json:"recipient"`
	SimNumber  *int     `json:"simNumber"`
	Message    string   `json:"message"`
	ReceivedAt sentTime `json:"receivedAt"`
}

// inbound stores a text the phone received: an ordinary inbound message of
// the phone's tenant (live), with STOP/START and message.received. The
// secret in the URL names the phone; a wrong one stores nothing. The app
// retries a callback until it gets a 2xx, so a repeated event id stores
// nothing new, and a callback Switchboard cannot use (see parseInbound) is
// answered 204, logged and counted, so that the app stops retrying it. A
// phone that posts more than InboundPerMinute texts a minute is answered
// 429: the app tries again later.
func (s *Server) inbound(w http.ResponseWriter, r *http.Request) {
	secret := r.PathValue("secret")
	if s.throttled(w, r, credInbound, secret) {
		return
	}
	raw, rerr := readBody(w, r)
	var dev deviceEventBody
	isDev := false
	if rerr == nil {
		dev, isDev = parseDeviceEvent(raw)
	}
	// A ping or start of a device whose secret this node looked up
	// lately needs no lookup: its health is written only where the
	// device is still the phone's (sqlstore.RecordHealth), so a stale
	// entry changes nothing.
	if isDev {
		if ph := s.pings.phone(secret, s.cfg.Now()); ph != nil && s.access(r.Context(), ph) == nil {
			s.deviceEvent(r.Context(), ph, &dev)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	ph, err := s.cfg.Store.PhoneByInboundSecret(r.Context(), secret)
	s.checked(r, credInbound, secret, err)
	if err == nil {
		// Refused, the app posts the text again later: stored once the
		// tenant is back.
		err = s.access(r.Context(), ph)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if isDev { // not a text: not counted against the inbound limit
		s.pings.remember(secret, ph, s.cfg.Now())
		s.deviceEvent(r.Context(), ph, &dev)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if wait, ok := s.allowInbound(r.Context(), ph); !ok {
		s.metrics.inboundLimited.Inc()
		w.Header().Set("Retry-After", wait)
		writeError(w, http.StatusTooManyRequests, "Too many inbound texts from this phone. Try again later.")
		return
	}
	if rerr != nil {
		s.metrics.inboundDropped.WithLabelValues(dropMalformed).Inc()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	text, drop := parseInboundBody(raw, ph.Number)
	if text != nil && text.SimNumber > 0 {
		// Received on another SIM of the device: that SIM's phone's text.
		phones, err := s.devicePhones(r.Context(), ph)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if p := phoneOfSIM(phones, text.SimNumber); p != nil {
			ph = p
		}
	}
	if drop != "" {
		s.metrics.inboundDropped.WithLabelValues(drop).Inc()
		s.cfg.Log.Warn("inbound callback dropped: nothing Switchboard can store", "tenant_id", ph.TenantID, "phone_id", ph.ID, "reason", drop)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if text == nil {
		w.WriteHeader(http.StatusNoContent) // another event the phone's owner subscribed to
		return
	}
	now := s.cfg.Now().UTC().Truncate(time.Microsecond)
	m := &sb.Message{ID: sb.NewID(), TenantID: ph.TenantID, Env: sb.Live, Direction: sb.Inbound, From: text.Sender,
		To: ph.Number, Body: text.Body, Channel: sb.ChannelSMS, Status: sb.StatusReceived, PhoneID: ph.ID,
		PhoneKind: ph.Kind, ExternalID: text.EventID, CreatedAt: now}
	err = s.cfg.Store.Inbound(r.Context(), m)
	switch {
	case errors.Is(err, sb.ErrAlreadyStored):
	case err != nil:
		s.fail(w, r, err)
		return
	default:
		s.metrics.inbound.Inc()
		s.cfg.Log.Debug("inbound text from a device", "tenant_id", ph.TenantID, "phone_id", ph.ID, "message_id", m.ID)
	}
	w.WriteHeader(http.StatusNoContent)
}

// InboundPerMinute is how many inbound texts a phone may post a minute
// (with a burst of as many), across the nodes that share the rate limits.
const InboundPerMinute = 60

// allowInbound counts an inbound callback of ph against InboundPerMinute;
// when it is refused it returns the Retry-After value. A limiter that
// fails lets the text in: nothing the phone received is lost for it.
func (s *Server) allowInbound(ctx context.Context, ph *sb.Phone) (string, bool) {
	d, err := s.cfg.Limiter.Allow(ctx, "device-inbound:"+ph.ID, InboundPerMinute, time.Minute)
	if err != nil || d.Allowed {
		return "", true
	}
	return strconv.Itoa(d.RetryAfterSeconds()), false
}

// inboundText is an sms:received callback, checked; SimNumber is the SIM
// that received it (0: the app did not say).
type inboundText struct {
	EventID, Sender, Body string
	SimNumber             int
}

// phoneOfSIM returns the phone of phones (a device's) that sends with SIM
// sim, or nil.
func phoneOfSIM(phones []*sb.Phone, sim int) *sb.Phone {
	for _, p := range phones {
		if p.SimNumber == sim {
			return p
		}
	}
	return nil
}

// maxInboundBody bounds the text of an inbound message, in characters: a
// long text of many parts is joined by the phone.
const maxInboundBody = 10 * sb.MaxBodyLength

// Why an inbound callback is dropped (the reason label of
// switchboard_device_inbound_dropped_total).
const (
	dropMalformed = "malformed"  // not the app's webhook body, or larger than maxBody
	dropNoID      = "no_id"      // no event id, or a longer one than maxID
	dropEmpty     = "empty_text" // an sms:received without text
	dropSender    = "bad_sender" // neither a number nor an alphanumeric sender id
)

// parseInboundBody reads the body the app posts to a webhook of the phone
// numbered like. It returns nil, "" for an event other than sms:received;
// the text, with its sender in E.164 (read in the country of like) or an
// alphanumeric sender id (phonenum.InboundSender); or, for a callback
// Switchboard cannot use, the reason it drops it.
func parseInboundBody(raw []byte, like string) (*inboundText, string) {
	var ev inboundEvent
	if json.Unmarshal(raw, &ev) != nil {
		return nil, dropMalformed
	}
	if ev.Event != "sms:received" {
		return nil, ""
	}
	var p smsReceived
	if json.Unmarshal(ev.Payload, &p) != nil {
		return nil, dropMalformed
	}
	sender, ok := phonenum.InboundSender(p.Sender, like)
	switch {
	case ev.ID == "" || len(ev.ID) > maxID:
		return nil, dropNoID
	case strings.TrimSpace(p.Message) == "":
		return nil, dropEmpty
	case !ok:
		return nil, dropSender
	}
	text := &inboundText{EventID: ev.ID, Sender: sender, Body: truncate(p.Message, maxInboundBody)}
	if p.SimNumber != nil && *p.SimNumber > 0 && *p.SimNumber <= 3 {
		text.SimNumber = *p.SimNumber
	}
	return text, ""
}

// Run runs the sweeper until ctx ends: every few seconds it moves the
// messages no device took away from phones that went offline, and fails
// those a device took and never reported on (see
// sqlstore.SweepDeviceMessages and sb.Routing.Sweep).
func (s *Server) Run(ctx context.Context) {
	flushed := make(chan struct{})
	go func() { defer close(flushed); s.flushHealth(ctx) }()
	defer func() { <-flushed }()
	every := min(2*time.Second, max(s.cfg.ValidFor/4, 100*time.Millisecond))
	t := time.NewTicker(every)
	defer t.Stop()
	defer s.pacing.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			const batch = 500
			sw, err := s.cfg.Store.SweepDeviceMessages(ctx, s.cfg.Now().UTC(), batch)
			if err != nil {
				if ctx.Err() == nil {
					s.cfg.Log.Error("sweeping device messages", "err", err)
				}
				break
			}
			if sw.Moved > 0 {
				s.metrics.moved.Add(float64(sw.Moved))
				s.cfg.Log.Info("device messages moved to another phone", "count", sw.Moved)
			}
			if sw.Unknown > 0 {
				s.metrics.unknown.Add(float64(sw.Unknown))
				s.cfg.Log.Warn("device messages failed: their phone took them and never reported whether it sent them", "count", sw.Unknown)
			}
			if sw.Considered < batch {
				break
			}
		}
		s.announce(ctx)
	}
}

// announce emits phone.offline and phone.online for the phones whose
// presence changed since they were last announced.
func (s *Server) announce(ctx context.Context) {
	now := s.cfg.Now().UTC()
	off, on, err := s.cfg.Store.AnnouncePresence(ctx, now, s.cfg.Routing.SeenCutoff(now), 500)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Error("announcing phones that went offline or came back", "err", err)
		}
		return
	}
	if off > 0 || on > 0 {
		s.metrics.presence.WithLabelValues(sb.PhoneOffline).Add(float64(off))
		s.metrics.presence.WithLabelValues(sb.PhoneOnline).Add(float64(on))
		s.cfg.Log.Info("phones went offline or came back", "offline", off, "online", on)
	}
}

// deviceEvent handles ev, a system:ping or app:started callback of ph's
// device (parseDeviceEvent): the ping's health is stored (and counted), a
// start is logged and counted.
func (s *Server) deviceEvent(ctx context.Context, ph *sb.Phone, ev *deviceEventBody) {
	switch ev.Event {
	case eventSystemPing:
		h, ok := ev.ping(s.cfg.Now().UTC().Truncate(time.Microsecond))
		if !ok {
			s.metrics.pings.WithLabelValues("malformed").Inc()
			return
		}
		// A health like the last one written is written again only once
		// that is two ping intervals old, and then not at once but with
		// the others due (flushHealth): a phone stays short of ping_late
		// (three intervals) on every node. A health that changed is
		// written at once.
		switch s.pings.verdict(ph.ID, h, 2*s.cfg.Routing.PingInterval) {
		case pingSkip:
			s.metrics.pings.WithLabelValues("unchanged").Inc()
			return
		case pingRefresh:
			s.pings.queue(ph, h)
			return
		}
		s.pings.writing.RLock()
		err := s.cfg.Store.RecordHealth(ctx, ph.ID, ph.Device.ID, h)
		s.pings.writing.RUnlock()
		if err != nil {
			s.pings.forget(ph.ID)
			s.cfg.Log.Error("recording a phone's health", "tenant_id", ph.TenantID, "phone_id", ph.ID, "err", err)
			return
		}
		s.metrics.pings.WithLabelValues("stored").Inc()
	case eventAppStarted:
		s.metrics.started.Inc()
		s.cfg.Log.Info("the app of a phone started", "tenant_id", ph.TenantID, "phone_id", ph.ID, "device_id", ph.Device.ID)
	}
}

// flushHealth writes, every half ping interval until ctx ends (and once
// more then), the unchanged healths that pings confirmed since: together,
// so that their writes share commits (sqlstore's group commit), instead of
// a commit each. A phone's health in the database is therefore confirmed
// at least every two and a half ping intervals.
func (s *Server) flushHealth(ctx context.Context) {
	t := time.NewTicker(max(s.cfg.Routing.PingInterval/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.writeConfirmed(context.WithoutCancel(ctx))
			return
		case <-t.C:
			s.writeConfirmed(ctx)
		}
	}
}

// healthWriters bounds the writes of confirmed healths in flight at once.
const healthWriters = 64

// writeConfirmed writes the confirmed healths waiting. A health that
// changed meanwhile was written at once, and is not overwritten: its write
// waits for these, and it removed its phone's confirmation from those
// waiting.
func (s *Server) writeConfirmed(ctx context.Context) {
	s.pings.writing.Lock()
	defer s.pings.writing.Unlock()
	todo := s.pings.takeQueued()
	if len(todo) == 0 {
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, healthWriters)
	for _, p := range todo {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ph := p.phone
			if err := s.cfg.Store.RecordHealth(ctx, ph.ID, ph.Device.ID, p.health); err != nil {
				s.pings.forget(ph.ID)
				if ctx.Err() == nil {
					s.cfg.Log.Error("recording a phone's health", "tenant_id", ph.TenantID, "phone_id", ph.ID, "err", err)
				}
				return
			}
			s.metrics.pings.WithLabelValues("stored").Inc()
		})
	}
	wg.Wait()
}

// fleetStates counts the android phones by state (online, offline,
// quarantined) and by trouble (sb.PhoneTrouble), for the metrics.
func (s *Server) fleetStates() (states map[string]int, trouble map[string]int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	phones, err := s.cfg.Store.AndroidPhones(ctx)
	if err != nil {
		s.cfg.Log.Error("counting phones for the metrics", "err", err)
		return nil, nil
	}
	now := s.cfg.Now()
	states = map[string]int{sb.PhoneOnline: 0, sb.PhoneOffline: 0, sb.PhoneQuarantined: 0}
	trouble = map[string]int{sb.TroubleLowBattery: 0, sb.TroubleNoNetwork: 0, sb.TroublePingLate: 0}
	for _, p := range phones {
		states[s.cfg.Routing.Status(p, now)]++
		if p.Status != sb.PhoneOnline {
			continue // switched off or quarantined: its trouble is known
		}
		for _, t := range s.cfg.Routing.Trouble(p, now) {
			trouble[t]++
		}
	}
	return states, trouble
}
