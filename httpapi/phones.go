package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/auth"
	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/sqlstore"
)

// PhoneStore is what the phone routes need from storage.
type PhoneStore interface {
	AddTenantPhone(ctx context.Context, p *sb.Phone, pairing *sb.Pairing, maxPhones int) error
	Phones(ctx context.Context, tenantID string, env sb.Environment) ([]*sb.Phone, error)
	Phone(ctx context.Context, tenantID string, env sb.Environment, id string) (*sb.Phone, error)
	UpdatePhone(ctx context.Context, tenantID, id string, patch sb.PhonePatch) error
	DeletePhone(ctx context.Context, tenantID, id string, now time.Time) error
	SetPairing(ctx context.Context, tenantID, id string, pairing *sb.Pairing) error
}

// Limits of a phone's settings.
const (
	MaxPhoneDailyLimit = sb.MaxPhoneDailyLimit
	MaxPhoneRateLimit  = sb.MaxPhoneRateLimit
)

// PhoneJSON is the API form of a phone (docs/phones.md). The operator
// commands print the same.
type PhoneJSON struct {
	ID         string      `json:"id"`
	Number     string      `json:"number"`
	Kind       string      `json:"kind"`
	Provider   *string     `json:"provider"`
	Status     string      `json:"status"`
	Channels   []string    `json:"channels"`
	DailyLimit *int        `json:"daily_limit"`
	RateLimit  *int        `json:"rate_limit"`
	SentToday  int64       `json:"sent_today"`
	LastSeenAt *time.Time  `json:"last_seen_at"`
	Device     *deviceJSON `json:"device"`
	CreatedAt  time.Time   `json:"created_at"`
	// The fleet (docs/phones.md).
	Health              *healthJSON          `json:"health"`
	Trouble             []string             `json:"trouble"`
	Quarantine          *quarantineJSON      `json:"quarantine"`
	QuarantinePolicy    quarantinePolicyJSON `json:"quarantine_policy"`
	Warmup              *warmupJSON          `json:"warmup"`
	EffectiveDailyLimit *int                 `json:"effective_daily_limit"`
	DevicePhoneID       *string              `json:"device_phone_id"`
}

type healthJSON struct {
	BatteryLevel   *int      `json:"battery_level"`
	Charging       bool      `json:"charging"`
	Network        string    `json:"network"`
	FailedLastHour int       `json:"failed_last_hour"`
	ReportedAt     time.Time `json:"reported_at"`
}

type quarantineJSON struct {
	At      time.Time `json:"at"`
	Reasons []string  `json:"reasons"`
}

type quarantinePolicyJSON struct {
	Failed int `json:"failed"`
	Of     int `json:"of"`
}

type warmupJSON struct {
	Start     int       `json:"start"`
	Days      int       `json:"days"`
	StartedAt time.Time `json:"started_at"`
	Day       int       `json:"day"`
}

type deviceJSON struct {
	Name      string `json:"name"`
	SimNumber *int   `json:"sim_number"`
	PushToken bool   `json:"push_token"`
}

func positiveOrNil(n int) *int {
	if n <= 0 {
		return nil
	}
	return &n
}

// ToPhoneJSON returns the API form of p, its status as routing sees it at
// now.
func ToPhoneJSON(p *sb.Phone, routing sb.Routing, now time.Time) PhoneJSON {
	out := PhoneJSON{ID: p.ID, Number: p.Number, Kind: p.Kind, Status: routing.Status(p, now), Channels: p.Channels,
		DailyLimit: positiveOrNil(p.DailyLimit), RateLimit: positiveOrNil(p.RateLimit), SentToday: p.SentToday,
		LastSeenAt: p.LastSeenAt, CreatedAt: p.CreatedAt}
	if p.Device != nil {
		out.Device = &deviceJSON{Name: p.Device.Name, SimNumber: positiveOrNil(p.SimNumber), PushToken: p.Device.PushToken}
	}
	if p.Link != "" {
		link := p.Link
		out.Provider = &link
	}
	out.Trouble = routing.Trouble(p, now)
	if out.Trouble == nil || p.Status != sb.PhoneOnline {
		out.Trouble = []string{}
	}
	if h := p.Health; h != nil {
		out.Health = &healthJSON{Charging: h.Charging, Network: h.Network, FailedLastHour: h.FailedLastHour, ReportedAt: h.ReportedAt}
		if h.BatteryLevel >= 0 {
			level := h.BatteryLevel
			out.Health.BatteryLevel = &level
		}
	}
	if q := p.Quarantine; q != nil {
		out.Quarantine = &quarantineJSON{At: q.At, Reasons: q.Reasons}
	}
	qp := p.QuarantinePolicy.OrDefault()
	out.QuarantinePolicy = quarantinePolicyJSON{Failed: qp.Failed, Of: qp.Of}
	if w := p.Warmup; w != nil {
		out.Warmup = &warmupJSON{Start: w.Start, Days: w.Days, StartedAt: w.From, Day: w.Day(now)}
	}
	out.EffectiveDailyLimit = positiveOrNil(p.LimitOn(now))
	out.DevicePhoneID = strOrNil(p.DeviceOf)
	return out
}

type pairingJSON struct {
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expires_at"`
}

type createdPhoneJSON struct {
	PhoneJSON
	Pairing *pairingJSON `json:"pairing"`
}

// wholeNumber decodes a JSON number that is a whole number in [min, max]
// (5 and 5.0 alike); null gives 0 when nullable.
func wholeNumber(raw json.RawMessage, field string, min, max int, nullable bool) (int, error) {
	if nullable && bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return 0, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || f < float64(min) || f > float64(max) {
		or := ""
		if nullable {
			or = ", or null"
		}
		return 0, sb.Invalid(field, "%s must be a whole number from %d to %d%s.", field, min, max, or)
	}
	return int(f), nil
}

// liveOnly refuses a change to the tenant's phones with a test key: phones
// are real, and the sandbox never changes them.
func liveOnly(p *auth.Principal) error {
	if p.Env != sb.Live {
		return sb.Errorf(sb.CodeForbidden, "Phones are added, changed and paired with a live key; a test key can only read them.")
	}
	return nil
}

type createPhoneRequest struct {
	Number           *string         `json:"number"`
	DailyLimit       json.RawMessage `json:"daily_limit"`
	RateLimit        json.RawMessage `json:"rate_limit"`
	SimNumber        json.RawMessage `json:"sim_number"`
	Warmup           json.RawMessage `json:"warmup"`
	QuarantinePolicy json.RawMessage `json:"quarantine_policy"`
	DevicePhoneID    *string         `json:"device_phone_id"`
	Provider         *string         `json:"provider"`
}

// limits sets ph's daily and rate limits from the request's, where given.
func (req *createPhoneRequest) limits(ph *sb.Phone) error {
	var err error
	if req.DailyLimit != nil {
		if ph.DailyLimit, err = wholeNumber(req.DailyLimit, "daily_limit", 1, MaxPhoneDailyLimit, true); err != nil {
			return err
		}
	}
	if req.RateLimit != nil {
		if ph.RateLimit, err = wholeNumber(req.RateLimit, "rate_limit", 1, MaxPhoneRateLimit, true); err != nil {
			return err
		}
	}
	return nil
}

// warmupRequest is the body's warmup: {start, days}.
type warmupRequest struct {
	Start json.RawMessage `json:"start"`
	Days  json.RawMessage `json:"days"`
}

// parseWarmup reads a warmup field (null ends one: a zero Warmup) starting
// at now, toward the daily limit limit (0: none, which a warm-up needs).
func parseWarmup(raw json.RawMessage, limit int, now time.Time) (*sb.Warmup, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return &sb.Warmup{}, nil
	}
	var req warmupRequest
	if err := exactJSON(raw, &req); err != nil || req.Start == nil || req.Days == nil {
		return nil, sb.Invalid("warmup", "warmup must be an object {start, days}, or null.")
	}
	if limit <= 0 {
		return nil, sb.Invalid("warmup", "A warm-up grows toward the daily limit: set daily_limit too.")
	}
	start, err := wholeNumber(req.Start, "warmup.start", 1, limit, false)
	if err != nil {
		return nil, err
	}
	days, err := wholeNumber(req.Days, "warmup.days", 2, sb.MaxWarmupDays, false)
	if err != nil {
		return nil, err
	}
	return &sb.Warmup{Start: start, Days: days, From: now}, nil
}

// quarantinePolicyRequest is the body's quarantine_policy: {failed, of}.
type quarantinePolicyRequest struct {
	Failed json.RawMessage `json:"failed"`
	Of     json.RawMessage `json:"of"`
}

// parseQuarantinePolicy reads a quarantine_policy field (null: the
// default).
func parseQuarantinePolicy(raw json.RawMessage) (*sb.QuarantinePolicy, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return &sb.QuarantinePolicy{}, nil
	}
	var req quarantinePolicyRequest
	if err := exactJSON(raw, &req); err != nil || req.Failed == nil || req.Of == nil {
		return nil, sb.Invalid("quarantine_policy", "quarantine_policy must be an object {failed, of}, or null for the default (5 of 10).")
	}
	of, err := wholeNumber(req.Of, "quarantine_policy.of", 1, sb.MaxQuarantineOf, false)
	if err != nil {
		return nil, err
	}
	failed, err := wholeNumber(req.Failed, "quarantine_policy.failed", 1, of, false)
	if err != nil {
		return nil, err
	}
	return &sb.QuarantinePolicy{Failed: failed, Of: of}, nil
}

// exactJSON decodes raw into v, refusing fields v does not have.
func exactJSON(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// createPhone adds an android phone, offline until a device pairs with the
// code it answers with.
func (s *Server) createPhone(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := liveOnly(p); err != nil {
		return err
	}
	var req createPhoneRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Number == nil || *req.Number == "" {
		return sb.Invalid("number", "number is required.")
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	ph := &sb.Phone{ID: sb.NewID(), TenantID: p.Tenant.ID, Number: *req.Number, Kind: sb.PhoneAndroid, DailyLimit: sb.DefaultPhoneDailyLimit,
		Channels: []string{sb.ChannelSMS}, Status: sb.PhoneOnline, CreatedAt: now}
	if req.Provider != nil {
		return s.bindEngine(w, r, p, &req, ph)
	}
	err := req.limits(ph)
	if err != nil {
		return err
	}
	if req.SimNumber != nil {
		if ph.SimNumber, err = wholeNumber(req.SimNumber, "sim_number", 1, 3, true); err != nil {
			return err
		}
	}
	if req.Warmup != nil {
		if ph.Warmup, err = parseWarmup(req.Warmup, ph.DailyLimit, now); err != nil {
			return err
		}
		if ph.Warmup.Start == 0 {
			ph.Warmup = nil
		}
	}
	if req.QuarantinePolicy != nil {
		q, err := parseQuarantinePolicy(req.QuarantinePolicy)
		if err != nil {
			return err
		}
		ph.QuarantinePolicy = *q
	}
	if !phonenum.Valid(ph.Number) {
		return sb.InvalidPhone("number", "number must be an E.164 number: + and 10 to 15 digits.")
	}
	if req.DevicePhoneID != nil && *req.DevicePhoneID != "" {
		// Another SIM of a paired device: no pairing of its own.
		ph.DeviceOf = *req.DevicePhoneID
		if err := s.cfg.Store.AddTenantPhone(r.Context(), ph, nil, p.Plan.MaxPhones); err != nil {
			return err
		}
		created, err := s.cfg.Store.Phone(r.Context(), p.Tenant.ID, p.Env, ph.ID)
		if err != nil {
			return err
		}
		writeData(w, http.StatusCreated, createdPhoneJSON{PhoneJSON: ToPhoneJSON(created, s.cfg.Routing, now)})
		return nil
	}
	pairing, err := s.newPairing(r.Context(), func(pr *sb.Pairing) error { return s.cfg.Store.AddTenantPhone(r.Context(), ph, pr, p.Plan.MaxPhones) })
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, createdPhoneJSON{PhoneJSON: ToPhoneJSON(ph, s.cfg.Routing, now),
		Pairing: &pairingJSON{Code: pairing.Code, ExpiresAt: pairing.ExpiresAt}})
	return nil
}

// bindEngine adds ph as a phone of a chat engine the operator lets tenants
// bind (Config.Engines): its number is the tenant's, shown as the from of
// its messages; it sends chat only and needs no pairing. A provider that is
// not such an engine (unknown, a carrier link, or an engine only the
// operator binds) is one VALIDATION_ERROR, the same for all, naming the
// engines there are.
func (s *Server) bindEngine(w http.ResponseWriter, r *http.Request, p *auth.Principal, req *createPhoneRequest, ph *sb.Phone) error {
	name := *req.Provider
	kind, ok := s.cfg.Engines[name]
	if !ok {
		names := slices.Sorted(maps.Keys(s.cfg.Engines))
		if len(names) == 0 {
			return sb.Invalid("provider", "This service has no chat engine that you can bind a number to; leave provider out to add an Android phone.")
		}
		return sb.Invalid("provider", "provider must be a chat engine that you can bind a number to: %s.", strings.Join(names, ", "))
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"sim_number", req.SimNumber != nil}, {"warmup", req.Warmup != nil}, {"quarantine_policy", req.QuarantinePolicy != nil},
		{"device_phone_id", req.DevicePhoneID != nil}} {
		if f.set {
			return sb.Invalid(f.name, "%s is for Android phones; a chat engine's phone has none.", f.name)
		}
	}
	if err := req.limits(ph); err != nil {
		return err
	}
	if !phonenum.Valid(ph.Number) {
		return sb.InvalidPhone("number", "number must be an E.164 number: + and 10 to 15 digits.")
	}
	ph.Kind, ph.Link, ph.Channels = kind, name, []string{sb.ChannelChat}
	if err := s.cfg.Store.AddTenantPhone(r.Context(), ph, nil, p.Plan.MaxPhones); err != nil {
		return err
	}
	s.log.Info("chat engine bound by its tenant", "tenant_id", p.Tenant.ID, "phone_id", ph.ID, "link", name, "kind", kind)
	writeData(w, http.StatusCreated, createdPhoneJSON{PhoneJSON: ToPhoneJSON(ph, s.cfg.Routing, s.now())})
	return nil
}

// newPairing makes a pairing code and stores it with store, making another
// in the rare case that another phone's live code is the same.
func (s *Server) newPairing(ctx context.Context, store func(*sb.Pairing) error) (*sb.Pairing, error) {
	for attempt := 0; ; attempt++ {
		pr, err := sb.NewPairing(s.now().UTC().Truncate(time.Second))
		if err != nil {
			return nil, err
		}
		err = store(pr)
		if !errors.Is(err, sqlstore.ErrPairingTaken) || attempt == 5 {
			return pr, err
		}
	}
}

func (s *Server) listPhones(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	phones, err := s.cfg.Store.Phones(r.Context(), p.Tenant.ID, p.Env)
	if err != nil {
		return err
	}
	now := s.now()
	out := make([]PhoneJSON, len(phones))
	for i, ph := range phones {
		out[i] = ToPhoneJSON(ph, s.cfg.Routing, now)
	}
	writeData(w, http.StatusOK, out)
	return nil
}

func (s *Server) getPhone(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	ph, err := s.cfg.Store.Phone(r.Context(), p.Tenant.ID, p.Env, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, ToPhoneJSON(ph, s.cfg.Routing, s.now()))
	return nil
}

type updatePhoneRequest struct {
	DailyLimit       json.RawMessage `json:"daily_limit"`
	RateLimit        json.RawMessage `json:"rate_limit"`
	Status           json.RawMessage `json:"status"`
	Warmup           json.RawMessage `json:"warmup"`
	QuarantinePolicy json.RawMessage `json:"quarantine_policy"`
}

// updatePhone changes a phone's limits (null removes one), its warm-up and
// quarantine policy, and brings a quarantined phone back (status
// "online").
func (s *Server) updatePhone(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := liveOnly(p); err != nil {
		return err
	}
	var req updatePhoneRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	var patch sb.PhonePatch
	if req.DailyLimit != nil {
		n, err := wholeNumber(req.DailyLimit, "daily_limit", 1, MaxPhoneDailyLimit, true)
		if err != nil {
			return err
		}
		patch.DailyLimit = &n
	}
	if req.RateLimit != nil {
		n, err := wholeNumber(req.RateLimit, "rate_limit", 1, MaxPhoneRateLimit, true)
		if err != nil {
			return err
		}
		patch.RateLimit = &n
	}
	if req.QuarantinePolicy != nil {
		q, err := parseQuarantinePolicy(req.QuarantinePolicy)
		if err != nil {
			return err
		}
		patch.QuarantinePolicy = q
	}
	if req.Status != nil {
		var status string
		if json.Unmarshal(req.Status, &status) != nil || status != sb.PhoneOnline {
			return sb.Invalid("status", `status can only be set to "online": a quarantined phone back in rotation.`)
		}
		patch.Status = &status
	}
	ctx, id := r.Context(), r.PathValue("id")
	if req.Warmup != nil {
		// A warm-up grows toward the daily limit the phone will have.
		limit := 0
		if patch.DailyLimit != nil {
			limit = *patch.DailyLimit
		} else {
			cur, err := s.cfg.Store.Phone(ctx, p.Tenant.ID, p.Env, id)
			if err != nil {
				return err
			}
			limit = cur.DailyLimit
		}
		w, err := parseWarmup(req.Warmup, limit, s.now().UTC().Truncate(time.Microsecond))
		if err != nil {
			return err
		}
		patch.Warmup = w
	}
	if err := s.cfg.Store.UpdatePhone(ctx, p.Tenant.ID, id, patch); err != nil {
		return err
	}
	return s.getPhone(w, r, p)
}

func (s *Server) deletePhone(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := liveOnly(p); err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := s.cfg.Store.DeletePhone(r.Context(), p.Tenant.ID, id, s.now().UTC()); err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"id": id, "deleted": true})
	return nil
}

// pairPhone gives an android phone a fresh pairing code; its earlier codes
// stop working.
func (s *Server) pairPhone(w http.ResponseWriter, r *http.Request, p *auth.Principal) error {
	if err := liveOnly(p); err != nil {
		return err
	}
	if err := noBody(w, r); err != nil {
		return err
	}
	ctx, id := r.Context(), r.PathValue("id")
	pairing, err := s.newPairing(ctx, func(pr *sb.Pairing) error { return s.cfg.Store.SetPairing(ctx, p.Tenant.ID, id, pr) })
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, pairingJSON{Code: pairing.Code, ExpiresAt: pairing.ExpiresAt})
	return nil
}
