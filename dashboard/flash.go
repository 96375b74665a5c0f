package dashboard

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// FlashStore keeps what a form's answer shows once after its redirect.
type FlashStore interface {
	PutDashboardFlash(ctx context.Context, id, sessionHash, sealed string, now time.Time) error
	TakeDashboardFlash(ctx context.Context, id, sessionHash string, now time.Time) (string, error)
}

// flash is what a page shows once after a form was sent: every form
// answers with a redirect to a page (POST, redirect, GET), so reloading
// that page never sends the form again, and what the form made that is
// shown only once (a new key's text, a webhook's new secret, a pairing
// code, an import's report) rides on the redirect as a flash. It is kept
// in the database, sealed with a key made from the session id, which only
// the browser holds, so that the database cannot read it; the page takes it
// once (flash=ID in the redirect), within ten minutes.
type flash struct {
	Notice  string        `json:"notice,omitempty"`
	Key     *createdKey   `json:"key,omitempty"`
	Secret  *shownSecret  `json:"secret,omitempty"`
	Pairing *flashPairing `json:"pairing,omitempty"`
	Report  *importReport `json:"report,omitempty"`
}

// createdKey is a key just created, with its text.
type createdKey struct {
	ID, Name, Environment, Text string
}

// shownSecret is a webhook signing secret the dashboard made.
type shownSecret struct {
	WebhookID, URL, Secret string
	// Rotated is set when it replaced the webhook's secret.
	Rotated bool
}

// flashPairing is a pairing code just made for a phone.
type flashPairing struct {
	PhoneID   string
	Code      string
	ExpiresAt time.Time
}

// flashKey is the key that seals a session's flashes.
func flashKey(sessionID string) []byte {
	m := hmac.New(sha256.New, []byte(sessionID))
	m.Write([]byte("switchboard dashboard flash"))
	return m.Sum(nil)
}

func flashAEAD(sessionID string) (cipher.AEAD, error) {
	block, err := aes.NewCipher(flashKey(sessionID))
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// seal encrypts f for the session; the flash's id is authenticated with it.
func seal(sessionID, id string, f *flash) (string, error) {
	plain, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	aead, err := flashAEAD(sessionID)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return base64.RawStdEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(id))), nil
}

func unseal(sessionID, id, sealed string) (*flash, error) {
	raw, err := base64.RawStdEncoding.DecodeString(sealed)
	if err != nil {
		return nil, err
	}
	aead, err := flashAEAD(sessionID)
	if err != nil {
		return nil, err
	}
	if len(raw) < aead.NonceSize() {
		return nil, errors.New("sealed flash too short")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(id))
	if err != nil {
		return nil, err
	}
	var f flash
	return &f, json.Unmarshal(plain, &f)
}

// redirect answers a form that did what it asked with a redirect to path
// (a page of the visit's environment), carrying f when it is not nil.
func (h *Handler) redirect(w http.ResponseWriter, r *http.Request, v *visit, path string, f *flash) error {
	if f != nil {
		id := sb.NewID()
		sealed, err := seal(v.sid, id, f)
		if err != nil {
			return err
		}
		if err := h.cfg.Store.PutDashboardFlash(r.Context(), id, v.session.IDHash, sealed, h.cfg.Now().UTC()); err != nil {
			return err
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + url.Values{"flash": {id}}.Encode()
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
	return nil
}

// takeFlash returns the flash a page's address names, once; nil when there
// is none, or it was taken, expired or is another session's.
func (h *Handler) takeFlash(r *http.Request, v *visit) (*flash, error) {
	id := r.URL.Query().Get("flash")
	if id == "" || !sb.ValidID(id) {
		return nil, nil
	}
	sealed, err := h.cfg.Store.TakeDashboardFlash(r.Context(), id, v.session.IDHash, h.cfg.Now().UTC())
	if sb.ErrorCode(err) == sb.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := unseal(v.sid, id, sealed)
	if err != nil {
		return nil, nil // not this session's to read
	}
	return f, nil
}
