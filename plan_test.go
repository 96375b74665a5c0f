package switchboard

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoadPlansTenantRateLimit(t *testing.T) {
	def := DefaultPlans()
	for name, p := range def {
		if p.TenantRateLimit != TenantRateFactor*p.RateLimit {
			t.Errorf("%s: tenant_rate_limit %d, want %d times the key limit %d", name, p.TenantRateLimit, TenantRateFactor, p.RateLimit)
		}
	}
	if def["scale"].TenantRateLimit != 0 {
		t.Errorf("scale: tenant_rate_limit %d, want unlimited", def["scale"].TenantRateLimit)
	}
	path := filepath.Join(t.TempDir(), "plans.json")
	os.WriteFile(path, []byte(`{"trial": {"rate_limit": 7}, "starter": {"rate_limit": 7, "tenant_rate_limit": 9},
		"growth": {"tenant_rate_limit": 0}, "scale": {"tenant_rate_limit": 3000}}`), 0o600)
	plans, err := LoadPlans(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"trial": 7 * TenantRateFactor, "starter": 9, "growth": 0, "scale": 3000} {
		if got := plans[name].TenantRateLimit; got != want {
			t.Errorf("%s: tenant_rate_limit %d, want %d", name, got, want)
		}
	}
	for _, bad := range []string{`{"trial": {"tenant_rate_limit": -1}}`, `{"trial": {"tenant_rate_limit": 60000001}}`, `{"trial": {"rate_limit": 60000001}}`} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := LoadPlans(path); err == nil {
			t.Errorf("%s is accepted", bad)
		}
	}
	// A derived total stays within what the limiter can enforce.
	os.WriteFile(path, []byte(`{"growth": {"rate_limit": 20000000}}`), 0o600)
	if plans, err := LoadPlans(path); err != nil || plans["growth"].TenantRateLimit != MaxRateLimit {
		t.Errorf("derived from a high rate_limit: %v %+v", err, plans["growth"])
	}
}
