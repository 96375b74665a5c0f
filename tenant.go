package switchboard

import (
	"bytes"
	"io"
	"time"
)

// TrialLength is how long a new tenant's trial lasts.
const TrialLength = 14 * 24 * time.Hour

// Tenant states.
const (
	TenantActive    = "active"
	TenantSuspended = "suspended"
)

// Tenant is one customer account. Every stored row belongs to exactly one.
type Tenant struct {
	ID          string
	Name        string
	Plan        string
	Status      string
	TrialEndsAt time.Time
	CreatedAt   time.Time
}

// Access decides whether the tenant may make requests at now: nil, or an
// *Error with TENANT_SUSPENDED or TRIAL_EXPIRED.
func (t *Tenant) Access(now time.Time) error {
	if t.Status == TenantSuspended {
		return Errorf(CodeTenantSuspended, "This account is suspended. Contact support.")
	}
	if t.Plan == TrialPlan && !now.Before(t.TrialEndsAt) {
		return Errorf(CodeTrialExpired, "The 14-day trial has ended. Choose a plan to continue.")
	}
	return nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
