package switchboard

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Key states. A revoked key is never shown again and authenticates nothing.
const (
	KeyActive   = "active"
	KeyInactive = "inactive"
	KeyRevoked  = "revoked"
)

// MaxKeysPerTenant caps the unrevoked keys of one tenant.
const MaxKeysPerTenant = 100

const (
	liveKeyPrefix = "svc_live_"
	testKeyPrefix = "svc_test_"
	keySecretLen  = 32
)

// APIKey is a stored API key. Only the SHA-256 of the key text is kept; the
// text itself is shown once, when the key is created.
type APIKey struct {
	ID          string
	TenantID    string
	Name        string
	Hash        string // lowercase hex SHA-256 of the full key text
	Hint        string // "..." and the last four characters
	Environment Environment
	Status      string
	// RateLimit is the key's own per-minute limit; 0 means "the plan's".
	RateLimit  int
	LastUsedAt *time.Time
	CreatedAt  time.Time
	// RevokedAt is set on a revoked key (RevokedKeys).
	RevokedAt *time.Time
}

// EffectiveRateLimit is the per-minute limit enforced for k under plan p:
// the key's own limit capped by the plan's ceiling, or the plan's default.
// Zero means unlimited.
func (k *APIKey) EffectiveRateLimit(p Plan) int {
	switch {
	case k.RateLimit == 0:
		return p.RateLimit
	case p.RateLimit == 0 || k.RateLimit < p.RateLimit:
		return k.RateLimit
	default:
		return p.RateLimit
	}
}

// NewKeyText returns fresh key text for env: the environment prefix and 32
// random characters of [0-9A-Za-z] (about 190 bits).
func NewKeyText(env Environment) (string, error) {
	secret, err := randomAlnum(rand.Reader, keySecretLen)
	if err != nil {
		return "", err
	}
	if env == Live {
		return liveKeyPrefix + secret, nil
	}
	return testKeyPrefix + secret, nil
}

// ParseKeyText checks the form of key text and returns its environment.
// It allocates nothing and runs in time independent of where a bad character is.
func ParseKeyText(s string) (Environment, bool) {
	var env Environment
	switch {
	case strings.HasPrefix(s, liveKeyPrefix):
		env = Live
	case strings.HasPrefix(s, testKeyPrefix):
		env = Test
	default:
		return "", false
	}
	secret := s[len(liveKeyPrefix):] // both prefixes have the same length
	if len(secret) != keySecretLen {
		return "", false
	}
	ok := true
	for i := 0; i < len(secret); i++ {
		c := secret[i]
		ok = ok && (c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z')
	}
	return env, ok
}

// HashKey returns the stored form of key text.
func HashKey(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// KeyHint returns the displayable hint of key text: "..." and its last four characters.
func KeyHint(text string) string {
	if len(text) < 4 {
		return "..."
	}
	return "..." + text[len(text)-4:]
}
