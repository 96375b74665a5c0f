package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
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
	return out
}

type pairingJSON struct {
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expires_at"`
}

type createdPhoneJSON struct {
	PhoneJSON
	Pairing pairingJSON `json:"pairing"`
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
	Number     *string         `json:"number"`
	DailyLimit json.RawMessage `json:"daily_limit"`
	RateLimit  json.RawMessage `json:"rate_limit"`
	SimNumber  json.RawMessage `json:"sim_number"`
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
	if req.SimNumber != nil {
		if ph.SimNumber, err = wholeNumber(req.SimNumber, "sim_number", 1, 3, true); err != nil {
			return err
		}
	}
	if !phonenum.Valid(ph.Number) {
		return sb.InvalidPhone("number", "number must be an E.164 number: + and 10 to 15 digits.")
	}
	pairing, err := s.newPairing(r.Context(), func(pr *sb.Pairing) error { return s.cfg.Store.AddTenantPhone(r.Context(), ph, pr, p.Plan.MaxPhones) })
	if err != nil {
		return err
	}
	writeData(w, http.StatusCreated, createdPhoneJSON{PhoneJSON: ToPhoneJSON(ph, s.cfg.Routing, now),
		Pairing: pairingJSON{Code: pairing.Code, ExpiresAt: pairing.ExpiresAt}})
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
	DailyLimit json.RawMessage `json:"daily_limit"`
	RateLimit  json.RawMessage `json:"rate_limit"`
}

// updatePhone changes a phone's limits; null removes one.
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
	ctx, id := r.Context(), r.PathValue("id")
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
