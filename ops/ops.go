// Package ops holds the operator actions that change what a deployment
// holds (creating a tenant with its keys and simulated phone, adding a
// sending phone) so that `switchboard tenant create` and `switchboard phone
// add` (cmd/switchboard, which only parses flags) and the benchmarks
// (bench/) run the same code against the store. It is not an API: the HTTP
// layer has its own handlers.
package ops

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/phonenum"
	"github.com/switchboard/switchboard/provider/carrier"
)

// TenantStore is what CreateTenant writes to.
type TenantStore interface {
	CreateTenant(ctx context.Context, t *sb.Tenant) error
	CreateKey(ctx context.Context, k *sb.APIKey) error
	PhoneStore
}

// PhoneStore is what AddPhone writes to.
type PhoneStore interface {
	AddPhone(ctx context.Context, p *sb.Phone, pairing *sb.Pairing) error
}

// NewTenant is what `switchboard tenant create` prints: the tenant's id,
// the text of its two keys (shown once, only their hashes are stored) and
// its simulated sending phone.
type NewTenant struct {
	TenantID string    `json:"tenant_id"`
	LiveKey  string    `json:"live_key"`
	TestKey  string    `json:"test_key"`
	Phone    *NewPhone `json:"phone,omitempty"`
}

// NewPhone names the simulated phone CreateTenant gives a tenant.
type NewPhone struct {
	ID     string `json:"id"`
	Number string `json:"number"`
}

// CreateTenant creates an active tenant on plan (which the caller has
// checked against its plan table), a live and a test key, and, the
// simulator being the live provider, one simulated sending phone with no
// daily limit.
func CreateTenant(ctx context.Context, db TenantStore, name, plan string) (*NewTenant, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("a tenant needs a name")
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	t := &sb.Tenant{ID: sb.NewID(), Name: name, Plan: plan, Status: sb.TenantActive, TrialEndsAt: now.Add(sb.TrialLength), CreatedAt: now}
	if err := db.CreateTenant(ctx, t); err != nil {
		return nil, err
	}
	out := &NewTenant{TenantID: t.ID}
	for _, env := range []sb.Environment{sb.Live, sb.Test} {
		text, err := sb.NewKeyText(env)
		if err != nil {
			return nil, err
		}
		k := &sb.APIKey{ID: sb.NewID(), TenantID: t.ID, Name: "Default " + string(env) + " key", Hash: sb.HashKey(text),
			Hint: sb.KeyHint(text), Environment: env, Status: sb.KeyActive, CreatedAt: now}
		if err := db.CreateKey(ctx, k); err != nil {
			return nil, err
		}
		if env == sb.Live {
			out.LiveKey = text
		} else {
			out.TestKey = text
		}
	}
	for attempt := 0; ; attempt++ {
		p := &sb.Phone{ID: sb.NewID(), TenantID: t.ID, Number: SimulatedNumber(), Kind: sb.PhoneSimulated, Channels: []string{sb.ChannelSMS, sb.ChannelChat},
			Status: sb.PhoneOnline, CreatedAt: now}
		err := db.AddPhone(ctx, p, nil)
		if err == nil {
			out.Phone = &NewPhone{ID: p.ID, Number: p.Number}
			return out, nil
		}
		if sb.ErrorCode(err) != sb.CodeDuplicatePhone || attempt == 10 {
			return nil, err
		}
	}
}

// SimulatedNumber returns a random number in the +1 555 range that no real
// phone uses.
func SimulatedNumber() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(10_000_000))
	return fmt.Sprintf("+1555%07d", n.Int64())
}

// PhoneSpec is a sending phone to add, as `switchboard phone add` takes it.
type PhoneSpec struct {
	Tenant string
	Number string // E.164
	// DailyLimit is messages per UTC day; 0 for no limit.
	DailyLimit int
	// Channels the phone sends on; empty: sms and chat, or sms only for a
	// carrier phone.
	Channels []string
	// Link is the carrier link (a name of ProvidersFile) the number lives
	// at; empty for a simulated phone.
	Link          string
	ProvidersFile string
}

// NewPhoneFromSpec checks s and returns the phone it describes, not yet
// stored. A carrier phone's kind is its link's type, read from the
// providers file (names and types only: no secret is needed).
func NewPhoneFromSpec(s PhoneSpec) (*sb.Phone, error) {
	if s.Tenant == "" {
		return nil, errors.New("--tenant is required")
	}
	if !phonenum.Valid(s.Number) {
		return nil, errors.New("--number must be E.164: + and 10 to 15 digits")
	}
	if s.DailyLimit < 0 {
		return nil, errors.New("--daily-limit must be >= 0")
	}
	kind, chans := sb.PhoneSimulated, s.Channels
	if s.Link != "" {
		if s.ProvidersFile == "" {
			return nil, errors.New("--provider needs the providers file (--providers, or SWITCHBOARD_PROVIDERS) to know the link's type")
		}
		links, err := carrier.LoadFile(s.ProvidersFile, nil)
		if err != nil {
			return nil, err
		}
		lc, ok := carrier.Find(links, s.Link)
		if !ok {
			names := make([]string, len(links))
			for i, l := range links {
				names[i] = l.Name
			}
			return nil, fmt.Errorf("--provider %q is not a link of %s (links: %s)", s.Link, s.ProvidersFile, strings.Join(names, ", "))
		}
		kind = lc.Type
		if len(chans) == 0 {
			chans = []string{sb.ChannelSMS}
			if carrier.IsChatType(lc.Type) {
				chans = []string{sb.ChannelChat}
			}
		}
		for _, c := range chans {
			if carrier.IsChatType(lc.Type) && c != sb.ChannelChat {
				return nil, fmt.Errorf("the %s link %q is a chat engine: its phones send chat only (--channels chat)", lc.Type, lc.Name)
			}
			if !carrier.IsChatType(lc.Type) && c == sb.ChannelChat {
				return nil, errors.New("a carrier phone sends sms only (--channels sms)")
			}
		}
	}
	if len(chans) == 0 {
		chans = []string{sb.ChannelSMS, sb.ChannelChat}
	}
	for _, c := range chans {
		if c != sb.ChannelSMS && c != sb.ChannelChat {
			return nil, fmt.Errorf("unknown channel %q (sms, chat)", c)
		}
	}
	return &sb.Phone{ID: sb.NewID(), TenantID: s.Tenant, Number: s.Number, Kind: kind, Link: s.Link, DailyLimit: s.DailyLimit,
		Channels: chans, Status: sb.PhoneOnline, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}, nil
}

// ErrDuplicateNumber is what AddPhone's error wraps when the number is
// already a sending phone.
var ErrDuplicateNumber = errors.New("already a sending phone")

// AddPhone stores p, saying so in plain words (an error wrapping
// ErrDuplicateNumber) when its number is already a sending phone.
func AddPhone(ctx context.Context, db PhoneStore, p *sb.Phone) error {
	if err := db.AddPhone(ctx, p, nil); err != nil {
		if sb.ErrorCode(err) == sb.CodeDuplicatePhone {
			return fmt.Errorf("the number %s is %w", p.Number, ErrDuplicateNumber)
		}
		return err
	}
	return nil
}
