// Package switchboard holds the domain of the Switchboard messaging service:
// tenants, API keys, plans and their limits, the error type with its stable
// codes, and the rules that decide them. It has no dependency on HTTP, SQL or
// any provider; adapters (sqlstore, httpapi, simulator, webhook) live in
// sub-packages and the wiring lives in cmd/switchboard.
package switchboard

import (
	"crypto/rand"
	"io"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// Environment separates live data from the test sandbox (docs/api.md).
type Environment string

const (
	Live Environment = "live"
	Test Environment = "test"
)

// Valid reports whether e is one of the two environments.
func (e Environment) Valid() bool { return e == Live || e == Test }

var (
	idMu      sync.Mutex
	idEntropy = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns a new ULID. IDs made by one process are strictly increasing,
// so ordering by id is ordering by creation.
func NewID() string {
	idMu.Lock()
	defer idMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(time.Now()), idEntropy).String()
}

// ValidID reports whether s has the form of an id NewID makes: a ULID, 26
// characters of Crockford's base32 (upper case, as NewID writes them).
func ValidID(s string) bool {
	if len(s) != ulid.EncodedSize {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z') || c == 'I' || c == 'L' || c == 'O' || c == 'U' {
			return false
		}
	}
	return s[0] <= '7' // 48 bits of time: the first character holds 3
}

// randomAlnum returns n characters of [0-9A-Za-z] from a CSPRNG without
// modulo bias.
func randomAlnum(r io.Reader, n int) (string, error) {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	out := make([]byte, 0, n)
	buf := make([]byte, n*2)
	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if b >= 62*4 { // 248: reject to keep the distribution uniform
				continue
			}
			out = append(out, alphabet[b%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}

// randomDigits returns n decimal digits from a CSPRNG without modulo bias.
func randomDigits(r io.Reader, n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, n*2)
	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if b >= 250 { // reject to keep the distribution uniform
				continue
			}
			out = append(out, '0'+b%10)
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}

// Micros converts t to Unix microseconds, the storage form of every timestamp.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// FromMicros converts Unix microseconds back to a UTC time.
func FromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }
