package switchboard

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// Plan holds the limits of one subscription plan (docs/api.md). A zero RateLimit, TenantRateLimit or MonthlyCalls means
// unlimited.
type Plan struct {
	Name string `json:"-"`
	// RateLimit is the default and ceiling of a key's requests per minute.
	RateLimit int `json:"rate_limit"`
	// TenantRateLimit bounds the requests per minute of all the tenant's
	// keys and tokens together, of both environments.
	TenantRateLimit   int `json:"tenant_rate_limit"`
	MonthlyCalls      int `json:"monthly_calls"`
	NewContactsPerDay int `json:"new_contacts_per_day"`
	// Caps on what one environment (live or test) of a tenant may hold;
	// zero means none. Campaigns count while they are open (draft or
	// running).
	MaxContacts      int `json:"max_contacts"`
	MaxTemplates     int `json:"max_templates"`
	MaxOpenCampaigns int `json:"max_open_campaigns"`
	// MaxPhones caps the sending phones of a tenant (of both
	// environments, every kind) that it adds itself (POST /v1/phones, the
	// dashboard); zero means none. The operator's phone add is not capped.
	MaxPhones int `json:"max_phones"`
}

// TenantRateFactor is how many keys at the plan's rate a tenant's total
// allows: a plan's tenant_rate_limit is this times its rate_limit unless it
// is set.
const TenantRateFactor = 5

// MaxRateLimit is the largest per-minute limit the rate limiter can
// enforce: it spaces requests in whole microseconds, so at most one per
// microsecond.
const MaxRateLimit = 60_000_000

// Plans maps a plan name to its limits.
type Plans map[string]Plan

// DefaultPlans is the one table of per-plan limits. `--plans FILE` overrides
// any of its values.
func DefaultPlans() Plans {
	return Plans{
		"trial": {Name: "trial", RateLimit: 50, TenantRateLimit: 250, MonthlyCalls: 50_000, NewContactsPerDay: 50,
			MaxContacts: 10_000, MaxTemplates: 1_000, MaxOpenCampaigns: 100, MaxPhones: 5},
		"starter": {Name: "starter", RateLimit: 50, TenantRateLimit: 250, MonthlyCalls: 50_000, NewContactsPerDay: 100,
			MaxContacts: 100_000, MaxTemplates: 1_000, MaxOpenCampaigns: 100, MaxPhones: 10},
		"growth": {Name: "growth", RateLimit: 200, TenantRateLimit: 1_000, MonthlyCalls: 200_000, NewContactsPerDay: 500,
			MaxContacts: 500_000, MaxTemplates: 1_000, MaxOpenCampaigns: 100, MaxPhones: 200},
		"scale": {Name: "scale", RateLimit: 0, TenantRateLimit: 0, MonthlyCalls: 0, NewContactsPerDay: 2_500,
			MaxContacts: 1_000_000, MaxTemplates: 1_000, MaxOpenCampaigns: 100, MaxPhones: 5_000},
	}
}

// TrialPlan is the plan a tenant is on until an operator chooses a paid one.
const TrialPlan = "trial"

// DefaultPhoneDailyLimit is the daily message limit of a sending phone added
// without --daily-limit.
const DefaultPhoneDailyLimit = 1000

// Names returns the plan names in a stable order.
func (p Plans) Names() []string {
	names := make([]string, 0, len(p))
	for n := range p {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LoadPlans reads a JSON object such as
// {"starter": {"rate_limit": 50, "monthly_calls": 50000}} and applies it over
// the defaults. Fields that are absent keep their default value, except
// tenant_rate_limit, which is TenantRateFactor times the plan's rate_limit
// when absent (so that raising the key limit raises the total with it); an
// unknown plan name or field is an error.
func LoadPlans(path string) (Plans, error) {
	plans := DefaultPlans()
	if path == "" {
		return plans, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plans file: %w", err)
	}
	var over map[string]json.RawMessage
	if err := json.Unmarshal(raw, &over); err != nil {
		return nil, fmt.Errorf("plans file %s: %w", path, err)
	}
	for name, body := range over {
		p, ok := plans[name]
		if !ok {
			return nil, fmt.Errorf("plans file %s: unknown plan %q (known: %v)", path, name, plans.Names())
		}
		if err := decodeStrict(body, &p); err != nil {
			return nil, fmt.Errorf("plans file %s: plan %q: %w", path, name, err)
		}
		var set struct {
			TenantRateLimit *int `json:"tenant_rate_limit"`
		}
		if err := json.Unmarshal(body, &set); err != nil {
			return nil, fmt.Errorf("plans file %s: plan %q: %w", path, name, err)
		}
		if set.TenantRateLimit == nil {
			p.TenantRateLimit = min(TenantRateFactor*p.RateLimit, MaxRateLimit)
		}
		if p.RateLimit < 0 || p.TenantRateLimit < 0 || p.MonthlyCalls < 0 || p.NewContactsPerDay < 0 ||
			p.MaxContacts < 0 || p.MaxTemplates < 0 || p.MaxOpenCampaigns < 0 || p.MaxPhones < 0 {
			return nil, fmt.Errorf("plans file %s: plan %q: limits must be >= 0", path, name)
		}
		if p.RateLimit > MaxRateLimit || p.TenantRateLimit > MaxRateLimit {
			return nil, fmt.Errorf("plans file %s: plan %q: rate limits must be at most %d per minute", path, name, MaxRateLimit)
		}
		plans[name] = p
	}
	return plans, nil
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
