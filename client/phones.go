package client

import (
	"context"
	"net/http"
	"time"
)

// PhoneKind says what delivers a phone's messages.
type PhoneKind string

// The phone kinds.
const (
	PhoneSimulated PhoneKind = "simulated" // the built-in simulator
	PhoneAndroid   PhoneKind = "android"   // a real phone running SMS Gateway for Android
	PhoneSMPP      PhoneKind = "smpp"      // a number at a carrier, over an SMPP link
	PhoneTwilio    PhoneKind = "twilio"    // a number at Twilio (or SignalWire), over its Messages API
	PhoneRBM       PhoneKind = "rbm"       // a number bound to an RCS Business Messaging agent (chat)
	PhoneIMessage  PhoneKind = "imessage"  // a number bound to iMessage through a BlueBubbles server (chat)
)

// PhoneStatus says whether a phone can take messages.
type PhoneStatus string

// The phone statuses.
const (
	PhoneOnline  PhoneStatus = "online"
	PhoneOffline PhoneStatus = "offline"
	// PhoneQuarantined is a phone taken out of rotation because its own
	// reports said its sends fail; UpdatePhone with Status PhoneOnline
	// brings it back.
	PhoneQuarantined PhoneStatus = "quarantined"
)

// Phone is a sending phone of the tenant.
type Phone struct {
	ID     string    `json:"id"`
	Number string    `json:"number"` // E.164
	Kind   PhoneKind `json:"kind"`
	// Provider is the carrier link or chat engine of an smpp, twilio, rbm
	// or imessage phone; nil for other kinds.
	Provider *string     `json:"provider"`
	Status   PhoneStatus `json:"status"`
	Channels []Channel   `json:"channels"`
	// DailyLimit is the messages per UTC day; nil: none.
	DailyLimit *int `json:"daily_limit"`
	// RateLimit is the messages a minute handed to the phone; nil: none.
	RateLimit *int `json:"rate_limit"`
	// SentToday counts the messages of the caller's environment counted
	// against the daily limit today (UTC).
	SentToday int `json:"sent_today"`
	// LastSeenAt is when the paired device was last seen.
	LastSeenAt *time.Time `json:"last_seen_at"`
	// Device is the paired device of an android phone; nil before pairing
	// and for other kinds.
	Device    *Device   `json:"device"`
	CreatedAt time.Time `json:"created_at"`
	// Health is what an android phone's app said in its last ping; nil
	// before the first.
	Health *PhoneHealth `json:"health"`
	// Trouble lists what is wrong with a paired android phone in rotation:
	// "low_battery", "no_network", "ping_late".
	Trouble []string `json:"trouble"`
	// Quarantine says when and why, while Status is PhoneQuarantined.
	Quarantine       *PhoneQuarantine `json:"quarantine"`
	QuarantinePolicy QuarantinePolicy `json:"quarantine_policy"`
	// Warmup is the phone's warm-up; nil: none.
	Warmup *PhoneWarmup `json:"warmup"`
	// EffectiveDailyLimit is today's limit: DailyLimit, or its warm-up's
	// of the day; nil: none.
	EffectiveDailyLimit *int `json:"effective_daily_limit"`
	// DevicePhoneID is the phone whose device this one shares (another SIM
	// of the same Android phone); nil for a phone with its own device.
	DevicePhoneID *string `json:"device_phone_id"`
}

// PhoneHealth is what a phone's app said of itself in a ping.
type PhoneHealth struct {
	// BatteryLevel is in percent; nil when the app did not say.
	BatteryLevel *int `json:"battery_level"`
	Charging     bool `json:"charging"`
	// Network is "wifi", "cellular", "ethernet", "none" or "unknown".
	Network        string    `json:"network"`
	FailedLastHour int       `json:"failed_last_hour"`
	ReportedAt     time.Time `json:"reported_at"`
}

// PhoneQuarantine is when and why a phone was quarantined.
type PhoneQuarantine struct {
	At time.Time `json:"at"`
	// Reasons are the failure reasons the phone reported, most recent
	// first.
	Reasons []string `json:"reasons"`
}

// QuarantinePolicy quarantines a phone when Failed of its last Of
// reported outcomes within an hour failed (default 5 of 10).
type QuarantinePolicy struct {
	Failed int `json:"failed"`
	Of     int `json:"of"`
}

// PhoneWarmup is a phone's warm-up: its limit grows from Start on day 1
// (the UTC day of StartedAt) to its daily limit on day Days.
type PhoneWarmup struct {
	Start     int       `json:"start"`
	Days      int       `json:"days"`
	StartedAt time.Time `json:"started_at"`
	// Day is today's day of the warm-up.
	Day int `json:"day"`
}

// WarmupParams start a warm-up today: Start messages on the first day,
// growing to the phone's daily limit on day Days.
type WarmupParams struct {
	Start int `json:"start"`
	Days  int `json:"days"`
}

// Device is the Android device paired with a phone.
type Device struct {
	// Name is the name the device gave itself.
	Name string `json:"name"`
	// SIMNumber is the SIM the phone sends with (1 to 3); nil: the
	// phone's choice.
	SIMNumber *int `json:"sim_number"`
}

// Pairing is a one-time code that pairs an Android phone: type it into the
// app before ExpiresAt.
type Pairing struct {
	Code      string    `json:"code"` // 8 digits
	ExpiresAt time.Time `json:"expires_at"`
}

// NewPhone is a phone just added, with its pairing code.
type NewPhone struct {
	Phone
	Pairing Pairing `json:"pairing"`
}

// CreatePhoneParams are the fields of a new Android phone, or of a number
// bound to a chat engine (Provider).
type CreatePhoneParams struct {
	// Number is the phone's own number, E.164 (required).
	Number string `json:"number"`
	// DailyLimit is the messages per UTC day: left out, the default
	// (1,000); Null, none.
	DailyLimit Nullable[int] `json:"daily_limit,omitzero"`
	// RateLimit is the messages a minute handed to the phone; 0: none.
	RateLimit int `json:"rate_limit,omitempty"`
	// SIMNumber is the SIM to send with, 1 to 3; 0: the phone's choice.
	SIMNumber int `json:"sim_number,omitempty"`
	// Warmup, when set, starts a warm-up (it needs a daily limit).
	Warmup *WarmupParams `json:"warmup,omitempty"`
	// QuarantinePolicy, when set, is the phone's own; nil: the default.
	QuarantinePolicy *QuarantinePolicy `json:"quarantine_policy,omitempty"`
	// DevicePhoneID, when set, adds another SIM (SIMNumber, required) of
	// the Android phone already paired as that phone: the new phone shares
	// its device and has no pairing code (Pairing is zero).
	DevicePhoneID string `json:"device_phone_id,omitempty"`
	// Provider, when set, binds Number to this chat engine instead (one the
	// operator lets tenants bind: an unknown one is 400 VALIDATION_ERROR on
	// "provider"): the phone sends chat only and has no pairing code
	// (Pairing is zero). SIMNumber, Warmup, QuarantinePolicy and
	// DevicePhoneID are for Android phones.
	Provider string `json:"provider,omitempty"`
}

// ListPhones lists the tenant's sending phones, oldest first
// (GET /v1/phones).
func (c *Client) ListPhones(ctx context.Context) ([]*Phone, error) {
	var ps []*Phone
	if err := c.call(ctx, http.MethodGet, nil, &ps, "v1", "phones"); err != nil {
		return nil, err
	}
	return ps, nil
}

// GetPhone returns a phone (GET /v1/phones/{id}); an unknown id is 404
// NOT_FOUND.
func (c *Client) GetPhone(ctx context.Context, id string) (*Phone, error) {
	var p Phone
	if err := c.call(ctx, http.MethodGet, nil, &p, "v1", "phones", id); err != nil {
		return nil, err
	}
	return &p, nil
}

// CreatePhone adds an Android phone, offline until it pairs with the code it
// returns (POST /v1/phones), or with Provider binds a number to a chat
// engine. Live keys only: a test key gets 403 FORBIDDEN. A number that is
// already one of the tenant's phones is 409 DUPLICATE_PHONE.
func (c *Client) CreatePhone(ctx context.Context, p CreatePhoneParams) (*NewPhone, error) {
	var np NewPhone
	if err := c.call(ctx, http.MethodPost, p, &np, "v1", "phones"); err != nil {
		return nil, err
	}
	return &np, nil
}

// UpdatePhoneParams are the changes of a phone's limits: a field left out
// stays as it is, Null removes the limit.
type UpdatePhoneParams struct {
	DailyLimit Nullable[int] `json:"daily_limit,omitzero"`
	RateLimit  Nullable[int] `json:"rate_limit,omitzero"`
	// Status PhoneOnline brings a quarantined phone back into rotation.
	Status PhoneStatus `json:"status,omitempty"`
	// Warmup starts a warm-up today; Null ends it.
	Warmup Nullable[WarmupParams] `json:"warmup,omitzero"`
	// QuarantinePolicy sets the phone's own policy; Null: the default.
	QuarantinePolicy Nullable[QuarantinePolicy] `json:"quarantine_policy,omitzero"`
}

// UpdatePhone changes a phone's limits (PATCH /v1/phones/{id}) and returns
// it. Live keys only.
func (c *Client) UpdatePhone(ctx context.Context, id string, p UpdatePhoneParams) (*Phone, error) {
	var ph Phone
	if err := c.call(ctx, http.MethodPatch, p, &ph, "v1", "phones", id); err != nil {
		return nil, err
	}
	return &ph, nil
}

// DeletePhone deletes a phone (DELETE /v1/phones/{id}): its device's token
// stops working and its waiting messages move to another phone. Live keys
// only.
func (c *Client) DeletePhone(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, nil, nil, "v1", "phones", id)
}

// PairPhone makes a fresh pairing code for an android phone
// (POST /v1/phones/{id}/pairing); its earlier codes stop working. Live keys
// only.
func (c *Client) PairPhone(ctx context.Context, id string) (*Pairing, error) {
	var p Pairing
	if err := c.call(ctx, http.MethodPost, nil, &p, "v1", "phones", id, "pairing"); err != nil {
		return nil, err
	}
	return &p, nil
}
