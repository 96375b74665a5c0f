package switchboard

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"time"
)

// Phone states and channels.
const (
	PhoneOnline  = "online"
	PhoneOffline = "offline"
	// PhoneQuarantined is a phone taken out of rotation because its own
	// reports say its sends fail (QuarantinePolicy); it stays so until the
	// tenant sets it back online.
	PhoneQuarantined = "quarantined"

	ChannelSMS  = "sms"
	ChannelChat = "chat"
	ChannelAuto = "auto"
)

// Phone kinds (docs/phones.md): what delivers the messages a phone
// sends. Test messages always go to the simulator, whatever the kind.
const (
	// PhoneSimulated phones are served by the built-in simulator.
	PhoneSimulated = "simulated"
	// PhoneAndroid phones are real Android phones running the app "SMS
	// Gateway for Android", which take their messages over the device
	// protocol (a pull: the device asks for them).
	PhoneAndroid = "android"
	// PhoneSMPP and PhoneTwilio phones are numbers carried by an SMS
	// carrier or aggregator, reached over a carrier link of that type
	// (docs/carriers.md): an SMPP 3.4 bind, or Twilio's Messages API.
	PhoneSMPP   = "smpp"
	PhoneTwilio = "twilio"
	// PhoneRBM phones are a tenant's numbers bound to a chat engine: an RCS
	// Business Messaging agent (docs/chat.md). They send chat only.
	PhoneRBM = "rbm"
	// PhoneIMessage phones are a tenant's numbers (Apple IDs' phone
	// numbers) bound to a BlueBubbles server sending iMessages.
	PhoneIMessage = "imessage"
)

// NumberUniqueAcrossTenants reports whether a phone of kind holds its
// number against every other tenant. A carrier or simulated phone does:
// carriers and the simulator route inbound texts by number. An android
// phone does not (a paired device is what proves a number, and its texts
// find it by its device's secret), nor does a chat engine's (replies go to
// the phone that last wrote to the person, and tenants bind these numbers
// themselves): so that no tenant can hold such a number against the
// others, or learn that another has it. Every number is unique within its
// tenant. (The store's index phones_number says the same: migration 0073.)
func NumberUniqueAcrossTenants(kind string) bool {
	switch kind {
	case PhoneAndroid, PhoneRBM, PhoneIMessage:
		return false
	}
	return true
}

// Engines: what carries a message (the record's engine). Every message of
// the test environment is carried by the simulator; a live one by the
// engine of its phone's kind (see EngineOf).
const (
	EngineSimulator = "simulator"
	EngineAndroid   = "android"
	EngineSMPP      = "smpp"
	EngineTwilio    = "twilio"
	EngineRBM       = "rbm"
	EngineIMessage  = "imessage"
)

// EngineOf is the engine that carries a message of env sent from (or
// received by) a phone of kind: the simulator for the test environment and
// for simulated phones (or no phone at all), else the kind itself.
func EngineOf(env Environment, kind string) string {
	if env != Live || kind == "" || kind == PhoneSimulated {
		return EngineSimulator
	}
	return kind
}

// SandboxNumber is the number a test message goes out from when none of
// its tenant's phones can take it: test mode needs no phone, and the
// simulator sends from a number of its own (docs/api.md).
const SandboxNumber = "+15005550006"

// SkipsSimulated reports whether a live message of env must not go out from
// a simulated phone because the tenant has a phone of another kind among
// phones (whatever its state): live traffic goes to the simulator only while
// the tenant has nothing else, so that a live send never "delivers" to
// nobody once a real phone, carrier number or chat engine is bound.
func SkipsSimulated(env Environment, phones []PhoneUse) bool {
	if env != Live {
		return false
	}
	for _, u := range phones {
		if u.Phone.Kind != PhoneSimulated {
			return true
		}
	}
	return false
}

// LiveSenders returns the phones of phones that may send messages of env:
// all of them, except the simulated ones of a live environment whose
// tenant has a phone of another kind (see SkipsSimulated).
func LiveSenders(env Environment, phones []*Phone) []*Phone {
	uses := make([]PhoneUse, len(phones))
	for i, p := range phones {
		uses[i] = PhoneUse{Phone: p}
	}
	if !SkipsSimulated(env, uses) {
		return phones
	}
	var out []*Phone
	for _, p := range phones {
		if p.Kind != PhoneSimulated {
			out = append(out, p)
		}
	}
	return out
}

// Limits of a phone's settings.
const (
	MaxPhoneDailyLimit = 1_000_000
	MaxPhoneRateLimit  = 6_000 // messages a minute: 100 a second
)

// IsChatEngineKind reports whether kind is the kind of a chat engine's
// phones (docs/chat.md).
func IsChatEngineKind(kind string) bool { return kind == PhoneRBM || kind == PhoneIMessage }

// ChatFallbackAfter is the default ttl of a chat message of channel auto
// sent through a chat engine: not delivered by then, it is sent again by
// SMS. A send may set its own, from MinChatTTL to MaxChatTTL.
const (
	ChatFallbackAfter = time.Hour
	MinChatTTL        = time.Minute
	MaxChatTTL        = 24 * time.Hour
)

// IsCarrierKind reports whether kind is the kind of a carrier link's
// phones.
func IsCarrierKind(kind string) bool {
	return kind == PhoneSMPP || kind == PhoneTwilio || kind == PhoneRBM
}

// Phone is one of a tenant's sending numbers.
type Phone struct {
	ID       string
	TenantID string
	Number   string
	Kind     string
	// DailyLimit is the most messages a day (UTC); 0 means no limit.
	DailyLimit int
	// RateLimit is the most messages a minute handed to the phone's
	// device; 0 means no limit.
	RateLimit int
	Channels  []string
	// Status is the operator's switch: an offline phone takes no message,
	// whatever its device does (see Routing.Online).
	Status string
	// SimNumber is the SIM (1 to 3) an android phone sends with; 0 lets
	// the phone choose.
	SimNumber  int
	LastSeenAt *time.Time
	// Device is the paired device of an android phone, or nil.
	Device *Device
	// DeviceOf is the phone whose device this one shares, one SIM each
	// (its own SimNumber); empty for a phone with a device of its own.
	DeviceOf string
	// Link is the name of the carrier link a carrier phone's number lives
	// at (its Kind is the link's type); empty for other kinds.
	Link      string
	CreatedAt time.Time
	// SentToday is read with the phone: the messages counted against its
	// daily limit today (UTC), in the reader's environment.
	SentToday int64
	// Health is what the phone's app last said of itself in its ping (nil
	// before its first).
	Health *Health
	// Quarantine says when and why the phone was quarantined, while its
	// Status is PhoneQuarantined.
	Quarantine *Quarantine
	// QuarantinePolicy is the phone's own rule, zero for the default.
	QuarantinePolicy QuarantinePolicy
	// Warmup ramps the phone's daily limit up from its first day, or nil.
	Warmup *Warmup
}

// DeviceCredentials are what pairing gives a device: the token of its
// requests and the secret of its inbound callback URL. Only their hashes
// are stored.
type DeviceCredentials struct {
	Token         string
	InboundSecret string
}

// PhonePatch changes a phone's limits: a nil field stays as it is, a
// pointer to 0 removes the limit.
type PhonePatch struct {
	DailyLimit *int
	RateLimit  *int
	// Status, when set, is PhoneOnline: a quarantined phone back in
	// rotation (its quarantine and its recent reports forgotten).
	Status *string
	// Warmup, when set, starts a warm-up (a zero Warmup ends one).
	Warmup           *Warmup
	QuarantinePolicy *QuarantinePolicy
}

// Device is the Android phone paired with a Phone.
type Device struct {
	ID       string
	Name     string
	PairedAt time.Time
	// PushToken is set while the device's app has a Google push token: its
	// notification channel is Auto, and it relies on push (which a private
	// server cannot send) instead of holding the event stream open.
	PushToken bool
}

// HasChannel reports whether the phone can send on channel.
func (p *Phone) HasChannel(channel string) bool {
	for _, c := range p.Channels {
		if c == channel {
			return true
		}
	}
	return false
}

// Routing holds the rules that decide which phone a message goes out from.
// They are the service's rules, kept out of the store so that the store,
// the device sweeper and a plain unit test use the same ones.
type Routing struct {
	// OfflineAfter is how long an android phone stays online after its
	// device was last seen (a request, or a beat of its open event
	// stream).
	OfflineAfter time.Duration
	// ClockGrace is how far behind the server's clock a device's clock may
	// run: a device may still send a message it holds until the message's
	// validUntil plus ClockGrace, by the server's clock (default
	// DefaultClockGrace).
	ClockGrace time.Duration
	// OutcomeAfter is how long a message handed to a device, and not
	// reported on, waits past its validUntil and ClockGrace for its device
	// before it fails with its outcome unknown (default
	// DefaultOutcomeAfter).
	OutcomeAfter time.Duration
	// PingInterval is how often android phones ping with their health
	// (default DefaultPingInterval); see Trouble.
	PingInterval time.Duration
	// Links tells whether the carrier links are up. The links hold that
	// state (see provider/carrier); nil means it is not known here (the
	// operator commands hold no link), and the operator's switch alone
	// decides.
	Links LinkState
}

// LinkState tells whether a carrier link is up: bound to its SMSC, or
// answering, for an HTTP API.
type LinkState interface {
	LinkUp(name string) bool
}

// Defaults of Routing.
const (
	DefaultPhoneOfflineAfter = 2 * time.Minute
	DefaultClockGrace        = time.Minute
	DefaultOutcomeAfter      = time.Hour
)

func (r Routing) offlineAfter() time.Duration {
	return orDefault(r.OfflineAfter, DefaultPhoneOfflineAfter)
}
func (r Routing) clockGrace() time.Duration   { return orDefault(r.ClockGrace, DefaultClockGrace) }
func (r Routing) outcomeAfter() time.Duration { return orDefault(r.OutcomeAfter, DefaultOutcomeAfter) }

// orDefault is d, or def when d is not positive.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Online reports whether p can take messages at now: the operator has not
// switched it off and, for an android phone, a paired device was seen
// within OfflineAfter; for a carrier phone, its link is up.
func (r Routing) Online(p *Phone, now time.Time) bool {
	if p.Status != PhoneOnline {
		return false
	}
	if p.Link != "" {
		return r.Links == nil || r.Links.LinkUp(p.Link)
	}
	if p.Kind != PhoneAndroid {
		return true
	}
	return p.Device != nil && p.LastSeenAt != nil && p.LastSeenAt.After(r.SeenCutoff(now))
}

// SeenCutoff is the last-seen time at or before which an android phone is
// offline at now (see Online).
func (r Routing) SeenCutoff(now time.Time) time.Time { return now.Add(-r.offlineAfter()) }

// Status is the status a phone shows at now: online, offline, or
// quarantined.
func (r Routing) Status(p *Phone, now time.Time) string {
	switch {
	case p.Status == PhoneQuarantined:
		return PhoneQuarantined
	case r.Online(p, now):
		return PhoneOnline
	}
	return PhoneOffline
}

// PhoneUse is a phone with the messages already counted against its daily
// limit on the day in question.
type PhoneUse struct {
	Phone *Phone
	Used  int64
	// Day, when set, is a time on the day in question, when that is not
	// the day of the routing's now (a campaign placing a message on a later
	// day): the day whose warm-up limit applies.
	Day time.Time
}

// Usable reports whether u's phone can take one more message on channel
// at now.
func (r Routing) Usable(u PhoneUse, channel string, now time.Time) bool {
	p := u.Phone
	limit := p.LimitOn(cmp.Or(u.Day, now))
	return r.Online(p, now) && p.HasChannel(channel) && (limit <= 0 || u.Used < int64(limit))
}

// Pick chooses the phone a message of env goes out from among phones (each
// with its use on the day): among those that can take it on channel at now
// (Usable), are not exclude when that is set, and are not simulated phones
// that a live message must skip (SkipsSimulated), the phone whose number is
// from when from is set (nil if that one cannot take it); else the
// recipient's own phone (sticky: the one that first wrote to it or was
// first used for it); else the least used, the first on a tie. It makes
// one pass and builds nothing, since a tenant may have a thousand phones.
func (r Routing) Pick(env Environment, phones []PhoneUse, channel, from, sticky, exclude string, now time.Time) *PhoneUse {
	skipSim := SkipsSimulated(env, phones)
	var least *PhoneUse
	for i := range phones {
		u := &phones[i]
		if (exclude != "" && u.Phone.ID == exclude) || (skipSim && u.Phone.Kind == PhoneSimulated) || !r.Usable(*u, channel, now) {
			continue
		}
		switch {
		case from != "":
			if u.Phone.Number == from {
				return u
			}
		case sticky != "" && u.Phone.ID == sticky:
			return u
		case least == nil || u.Used < least.Used:
			least = u
		}
	}
	if from != "" {
		return nil
	}
	return least
}

// Full reports whether a phone among phones would take a message on
// channel (from the number from, when set) at now but for its daily limit:
// in test mode a limit is simulated like in live mode, while a phone that
// is offline, switched off or missing never stops a test message (the
// simulator's sandbox number sends it).
func (r Routing) Full(phones []PhoneUse, channel, from string, now time.Time) bool {
	for _, u := range phones {
		if (from == "" || u.Phone.Number == from) && r.Online(u.Phone, now) && u.Phone.HasChannel(channel) {
			return true
		}
	}
	return false
}

// PhoneBackAfter is how long a send that found no phone is told to wait
// (NO_PHONE_AVAILABLE's Retry-After) when a phone that could take it is
// offline but may come back by itself: an android phone whose device went
// quiet, a carrier link that is re-binding. Nobody can tell when that
// happens, so it is an interval to poll at.
const PhoneBackAfter = time.Minute

// NoPhoneWait returns how long a send of env on channel (from the number from,
// when set) that found no usable phone among phones should wait before it
// is tried again: until the next UTC day, when the daily counters start
// again, if a phone that could take it is at its daily limit; PhoneBackAfter
// if one is offline but may come back by itself; the shorter of the two
// when both. It returns false when waiting does not help: no phone sends
// on channel (or none is from), or each one that does was switched off by
// the operator, quarantined (only the tenant brings it back), or never
// paired with a device. A phone at its warm-up's limit waits for the next
// day like one at its daily limit.
func (r Routing) NoPhoneWait(env Environment, phones []PhoneUse, channel, from string, now time.Time) (time.Duration, bool) {
	skipSim := SkipsSimulated(env, phones)
	now = now.UTC()
	nextDay := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
	var wait time.Duration
	found := false
	for _, u := range phones {
		p := u.Phone
		if (from != "" && p.Number != from) || !p.HasChannel(channel) || p.Status != PhoneOnline || (skipSim && p.Kind == PhoneSimulated) {
			continue
		}
		var w time.Duration
		switch {
		case p.LimitOn(now) > 0 && u.Used >= int64(p.LimitOn(now)):
			w = nextDay // a warm-up's limit grows tomorrow too
		case p.Kind == PhoneAndroid && p.Device == nil:
			continue // not paired: a person has to pair it first
		default:
			w = PhoneBackAfter
		}
		if !found || w < wait {
			wait, found = w, true
		}
	}
	return wait, found
}

// ViaDevice reports whether m is delivered by its phone's device (pulled
// over the device protocol) rather than handed to a provider: a live
// message from an android phone.
func (m *Message) ViaDevice() bool { return m.Env == Live && m.PhoneKind == PhoneAndroid }

// The device queue's rules (docs/phones.md). The app reports Processed
// as soon as it hands a text to Android's SmsManager, which may send it at
// once, and its later reports can be lost (Android's sent broadcast is not
// always delivered to it; its data connection can drop right after the
// radio sent). So a message handed to a device is taken as possibly sent
// until the device proves otherwise, and moves to another phone only with
// proof that it was not sent: no device was ever handed it, or its device
// reported it Failed with "TTL expired" before it reported it Processed or
// Sent. A vanished phone delays or fails a message; it never sends it
// twice.

// DeviceQueued is a message in the device queue (queued, of an android
// phone) as the sweeper sees it.
type DeviceQueued struct {
	// Holder is the device the message was handed to; empty while no
	// device has been handed it.
	Holder string
	// ValidUntil is the validUntil handed with it (zero while not handed
	// out).
	ValidUntil time.Time
	// Phone is the message's phone, nil when it was deleted.
	Phone *Phone
	// Pinned is set when the sender named the phone (from): the message
	// goes out from that number or not at all.
	Pinned bool
}

// DeviceAction is what the sweeper does with a message of the device queue.
type DeviceAction int

// Device actions.
const (
	// DeviceWait leaves the message where it is.
	DeviceWait DeviceAction = iota
	// DeviceMove moves it to another phone that can take it.
	DeviceMove
	// DeviceOutcomeUnknown fails it: its device took it and never said
	// whether it sent it.
	DeviceOutcomeUnknown
	// DeviceSenderDeleted fails it: its sender named its phone, which was
	// deleted before any device took it (see SenderDeletedReason).
	DeviceSenderDeleted
)

// Sweep decides what becomes of a message of the device queue at now. One
// that no device was handed moves when its phone cannot take it (offline,
// switched off, unpaired or deleted): nothing was sent. But one whose
// sender named its phone (Pinned) never goes out from another number: it
// waits for its phone however long that is offline, and fails once the
// phone is deleted. One handed to a device never moves: it stays with its
// device, which is handed it again (with its original validUntil) whenever
// it asks for messages, so that the app reports what it did with it; once
// its device has been silent on it until OutcomeUnknownAt, it fails.
func (r Routing) Sweep(m DeviceQueued, now time.Time) DeviceAction {
	switch {
	case m.Holder == "" && m.Phone == nil && m.Pinned:
		return DeviceSenderDeleted
	case m.Holder == "" && (m.Phone == nil || !r.Online(m.Phone, now)):
		return DeviceMove
	case m.Holder != "" && !now.Before(r.OutcomeUnknownAt(m.ValidUntil)):
		return DeviceOutcomeUnknown
	}
	return DeviceWait
}

// DeviceSweep is what one pass of the sweeper did.
type DeviceSweep struct {
	// Considered is how many messages it read; Moved how many went to
	// another phone; Unknown how many failed with their outcome unknown;
	// SenderDeleted how many failed because the phone their sender named
	// was deleted.
	Considered, Moved, Unknown, SenderDeleted int
}

// OutcomeUnknownAt is when a message handed to a device with validUntil,
// and never reported on, fails with its outcome unknown: OutcomeAfter past
// the last moment the device may send it (validUntil plus ClockGrace).
func (r Routing) OutcomeUnknownAt(validUntil time.Time) time.Time {
	return validUntil.Add(r.clockGrace() + r.outcomeAfter())
}

// OutcomeUnknownReason is the failure_reason of a message that the phone
// numbered number took and never reported on by validUntil.
func OutcomeUnknownReason(number, phoneID string, validUntil time.Time) string {
	return "outcome unknown: the phone " + number + " (" + phoneID + ") took the message and has not reported whether it sent it" +
		" (it could send it until " + validUntil.UTC().Format(time.RFC3339) + "); it may have been sent, so it was not sent from another phone"
}

// SenderDeletedReason is the failure_reason of a message whose sender
// named the phone numbered number (from), deleted before any device took
// the message.
func SenderDeletedReason(number, phoneID string) string {
	return "the phone " + number + " (" + phoneID + ") named by from was deleted before the message went out; " +
		"a message with from never goes out from another number"
}

// ProvesUnsent reports whether rep, a device's report on a message whose
// last reported state was prev, proves that the message was not sent: the
// app's Failed "TTL expired", which it reports for a message it did not
// hand to Android because its validUntil had passed, while neither this
// report nor an earlier one says the message got as far as Processed.
func ProvesUnsent(rep DeviceReport, prev string) bool {
	return rep.State == DeviceFailed && rep.Error == DeviceTTLExpired && rep.SentAt.IsZero() &&
		DeviceStateRank(prev) < DeviceStateRank(DeviceProcessed)
}

// CancelOnDevice reports whether a canceled message that a device holds,
// whose last reported state is prev, is withdrawn from the device: while
// the device has not reported it Processed (handed to Android, which may
// have sent it), the app can still take it out of its queue. One that got
// that far is not canceled: it stays sent.
func CancelOnDevice(prev string) bool {
	return DeviceStateRank(prev) < DeviceStateRank(DeviceProcessed)
}

// ConfirmsCancel reports whether rep, a device's report on a message whose
// cancel was asked (cancelAsked) and whose last reported state was prev,
// makes it canceled (failed with CAMPAIGN_CANCELED): the app's Cancelled,
// which it reports only for a message it withdrew while Pending, or a
// report that proves the message unsent (ProvesUnsent: its validUntil
// passed first), which must not move a canceled message to another phone.
func ConfirmsCancel(rep DeviceReport, prev string, cancelAsked bool) bool {
	if !CancelOnDevice(prev) {
		return false
	}
	return (rep.State == DeviceCancelled && rep.SentAt.IsZero()) || (cancelAsked && ProvesUnsent(rep, prev))
}

// DeviceStatus is the message status that a device state makes: Pending
// keeps a message queued; Processed (handed to Android, which may have sent
// it already) and Sent make it sent; Delivered and Failed are final. An
// unknown state gives "".
func DeviceStatus(state string) string {
	switch state {
	case DevicePending:
		return StatusQueued
	case DeviceProcessed, DeviceSent:
		return StatusSent
	case DeviceDelivered:
		return StatusDelivered
	case DeviceFailed, DeviceCancelled:
		return StatusFailed
	}
	return ""
}

// DeviceTime is the time of a device's report as recorded: what the device
// said (zero when it said nothing readable), but never after now (the
// phone's clock may run ahead) nor before floor (the message's creation;
// its clock may run behind).
func DeviceTime(said, floor, now time.Time) time.Time {
	switch {
	case said.IsZero() || said.After(now):
		return now
	case said.Before(floor):
		return floor
	}
	return said
}

// Pairing is a one-time code that pairs a device with an android phone.
type Pairing struct {
	Code      string
	ExpiresAt time.Time
}

// PairingTTL is how long a pairing code is valid.
const PairingTTL = 15 * time.Minute

// PairingCodeLength is the number of digits of a pairing code.
const PairingCodeLength = 8

// NewPairing returns a fresh code of 8 digits (the app's field takes
// digits only) valid from now for PairingTTL.
func NewPairing(now time.Time) (*Pairing, error) {
	code, err := randomDigits(rand.Reader, PairingCodeLength)
	if err != nil {
		return nil, err
	}
	return &Pairing{Code: code, ExpiresAt: now.Add(PairingTTL)}, nil
}

// NewDeviceToken returns a random token for a paired device.
func NewDeviceToken() (string, error) { return randomAlnum(rand.Reader, 40) }

// NewDeviceID returns a random device id of 21 characters, the length of
// the ids the app's own server gives.
func NewDeviceID() (string, error) { return randomAlnum(rand.Reader, 21) }

// InboundSecret returns the secret in the inbound callback URL of the
// device whose token is token. It is derived from the token, which the
// device presents whenever it asks for the URL, so that only hashes of
// both need to be stored; it does not reveal the token.
func InboundSecret(token string) string {
	sum := sha256.Sum256([]byte("switchboard inbound callback:" + token))
	return hex.EncodeToString(sum[:20])
}

// IsPairingCode reports whether s has the shape of a pairing code: 8
// digits. Anything else cannot be one, and needs no lookup.
func IsPairingCode(s string) bool {
	if len(s) != PairingCodeLength {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// HashPairingCode returns the stored form of a pairing code: its
// HMAC-SHA256 keyed with the server's pairing key, in hex. A code has only
// 10^8 values, so its bare SHA-256 would give itself up to anyone holding
// the database (every code is hashed in under a second); without the key,
// the stored form tells nothing.
func HashPairingCode(key []byte, code string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(code))
	return hex.EncodeToString(m.Sum(nil))
}

// HashSecret returns the stored form of a device token or inbound secret
// (random, of 160 bits or more): its SHA-256, in hex. Only the hash is
// stored.
func HashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// The fleet's rules (docs/phones.md): a phone's health from its pings,
// quarantine from its own failure reports, and the warm-up of a new SIM.

// Health is what a phone's app says of itself in its system:ping.
type Health struct {
	// BatteryLevel is in percent, -1 when the app did not say.
	BatteryLevel int
	Charging     bool
	// Network is "wifi", "cellular", "ethernet", or "none" when the phone
	// has no internet connection ("unknown" when it cannot tell).
	Network string
	// FailedLastHour is how many messages failed on the phone in the last
	// hour, by its own count.
	FailedLastHour int
	ReportedAt     time.Time
}

// Network kinds of Health.Network.
const (
	NetworkNone     = "none"
	NetworkWiFi     = "wifi"
	NetworkCellular = "cellular"
	NetworkEthernet = "ethernet"
	NetworkUnknown  = "unknown"
)

// Kinds of trouble a phone's health shows (PhoneTrouble).
const (
	TroubleLowBattery = "low_battery" // under LowBattery percent, not charging
	TroubleNoNetwork  = "no_network"  // the app says it has no internet connection
	TroublePingLate   = "ping_late"   // no ping for three ping intervals
)

// LowBattery is the battery level, in percent, under which a phone that is
// not charging is in trouble.
const LowBattery = 15

// DefaultPingInterval is how often a phone's app pings (its ping setting,
// which GET /settings gives it).
const DefaultPingInterval = time.Minute

// Trouble is PhoneTrouble at the routing's ping interval.
func (r Routing) Trouble(p *Phone, now time.Time) []string {
	return PhoneTrouble(p, r.PingInterval, now)
}

// PhoneTrouble returns what is wrong with a paired android phone at now by
// its health, pinging every interval: a battery under LowBattery percent
// that is not charging, no network, or a last ping older than three
// intervals (or none since it was paired that long ago). Nil when nothing
// is, and for phones that do not ping.
func PhoneTrouble(p *Phone, interval time.Duration, now time.Time) []string {
	if p.Kind != PhoneAndroid || p.Device == nil {
		return nil
	}
	if interval <= 0 {
		interval = DefaultPingInterval
	}
	var out []string
	h := p.Health
	if h != nil && h.BatteryLevel >= 0 && h.BatteryLevel < LowBattery && !h.Charging {
		out = append(out, TroubleLowBattery)
	}
	if h != nil && h.Network == NetworkNone {
		out = append(out, TroubleNoNetwork)
	}
	last := p.Device.PairedAt
	if h != nil && h.ReportedAt.After(last) {
		last = h.ReportedAt
	}
	if now.Sub(last) > 3*interval {
		out = append(out, TroublePingLate)
	}
	return out
}

// QuarantinePolicy is when a phone is quarantined: Failed of its last Of
// reported outcomes, within QuarantineWindow, were failures.
type QuarantinePolicy struct {
	Failed, Of int
}

// DefaultQuarantine is the policy of a phone that sets none: 5 of 10.
var DefaultQuarantine = QuarantinePolicy{Failed: 5, Of: 10}

// QuarantineWindow is how far back a phone's outcomes count.
const QuarantineWindow = time.Hour

// MaxQuarantineOf bounds QuarantinePolicy.Of.
const MaxQuarantineOf = 100

// OrDefault is q, or DefaultQuarantine when q is zero.
func (q QuarantinePolicy) OrDefault() QuarantinePolicy {
	if q.Of <= 0 || q.Failed <= 0 {
		return DefaultQuarantine
	}
	return q
}

// SendOutcome is the outcome of a message as its phone reported it, for
// quarantine: sent (or delivered), or failed with Reason.
type SendOutcome struct {
	At     time.Time `json:"at"`
	Failed bool      `json:"failed,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// CountsForQuarantine reports whether a device's report rep, on a message
// whose last reported state was prev, is an outcome for quarantine, and
// which: the first Sent or Delivered of a message is a success; Failed is
// a failure, except "TTL expired" (the message waited too long, which
// says nothing of the SIM).
func CountsForQuarantine(rep DeviceReport, prev string) (SendOutcome, bool) {
	switch {
	case rep.State == DeviceFailed && rep.Error != DeviceTTLExpired:
		return SendOutcome{Failed: true, Reason: rep.Error}, true
	case (rep.State == DeviceSent || rep.State == DeviceDelivered) && DeviceStateRank(prev) < DeviceStateRank(DeviceSent):
		return SendOutcome{}, true
	}
	return SendOutcome{}, false
}

// Quarantine is why a phone was quarantined.
type Quarantine struct {
	At      time.Time
	Reasons []string
}

// Recent keeps, of outcomes (oldest first), the last q.Of within
// QuarantineWindow of now.
func (q QuarantinePolicy) Recent(outcomes []SendOutcome, now time.Time) []SendOutcome {
	q = q.OrDefault()
	cut := now.Add(-QuarantineWindow)
	i := 0
	for i < len(outcomes) && !outcomes[i].At.After(cut) {
		i++
	}
	outcomes = outcomes[i:]
	if len(outcomes) > q.Of {
		outcomes = outcomes[len(outcomes)-q.Of:]
	}
	return outcomes
}

// Trips returns the quarantine that recent (the phone's outcomes, oldest
// first, as Recent keeps them) calls for at now, or nil: at least q.Failed
// of them are failures. Its reasons are the distinct failure reasons, most
// recent first.
func (q QuarantinePolicy) Trips(recent []SendOutcome, now time.Time) *Quarantine {
	q = q.OrDefault()
	recent = q.Recent(recent, now)
	failed := 0
	for _, o := range recent {
		if o.Failed {
			failed++
		}
	}
	if failed < q.Failed {
		return nil
	}
	qu := &Quarantine{At: now}
	seen := map[string]bool{}
	for i := len(recent) - 1; i >= 0; i-- {
		o := recent[i]
		r := o.Reason
		if r == "" {
			r = "the phone reported the message as failed"
		}
		if o.Failed && !seen[r] {
			seen[r] = true
			qu.Reasons = append(qu.Reasons, r)
		}
	}
	return qu
}

// Warmup ramps a new SIM's daily limit up: Start messages on its first day
// (the UTC day of From), growing geometrically to the phone's daily limit
// on day Days.
type Warmup struct {
	Start, Days int
	From        time.Time
}

// MaxWarmupDays bounds Warmup.Days.
const MaxWarmupDays = 365

// Day is the day of the warm-up at now, 1 on its first.
func (w *Warmup) Day(now time.Time) int {
	from := w.From.UTC()
	now = now.UTC()
	start := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if today.Before(start) {
		return 1
	}
	return int(today.Sub(start)/(24*time.Hour)) + 1
}

// Limit is the limit the warm-up allows at now toward the daily limit
// limit (> 0): Start on day 1, Start*(limit/Start)^((d-1)/(Days-1)) on day
// d, rounded down, and limit from day Days on.
func (w *Warmup) Limit(limit int, now time.Time) int {
	d := w.Day(now)
	if d >= w.Days || w.Start >= limit {
		return limit
	}
	if d <= 1 {
		return w.Start
	}
	v := float64(w.Start) * math.Pow(float64(limit)/float64(w.Start), float64(d-1)/float64(w.Days-1))
	return min(limit, max(w.Start, int(math.Floor(v+1e-9))))
}

// LimitOn is the phone's effective daily limit at now: its daily limit,
// or what its warm-up allows of it that day; 0 means none.
func (p *Phone) LimitOn(now time.Time) int {
	if p.DailyLimit <= 0 || p.Warmup == nil {
		return p.DailyLimit
	}
	return p.Warmup.Limit(p.DailyLimit, now)
}
