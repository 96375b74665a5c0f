package sqlstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	sb "github.com/switchboard/switchboard"
)

// The pairing key. Pairing codes are stored as their HMAC keyed with it
// (sb.HashPairingCode), so that a copy of the database tells no live code.
// Every node that pairs devices on one database needs the same key, and the
// key is best kept away from the database:
//
//   - Options.PairingSecret (serve --pairing-secret), when set: the key is
//     derived from it. Give every node the same.
//   - Otherwise, on SQLite: a file beside the database, PATH.pairing-key (32
//     random bytes in hex, mode 0600), made when the database is first
//     opened. A backup of the database alone does not hold it.
//   - Otherwise, on PostgreSQL: a row of server_secrets, made by the first
//     node that needs it, read by the others. A copy of the database holds
//     it then; --pairing-secret keeps it out.
//
// A key that changes (a new secret, a lost file) voids only the codes live
// at that moment: they last sb.PairingTTL, and a new one is one request.

// MinPairingSecret is the shortest Options.PairingSecret accepted.
const MinPairingSecret = 32

// Where the pairing key comes from (PairingKeySource).
const (
	PairingKeySecret   = "secret"
	PairingKeyFile     = "file"
	PairingKeyDatabase = "database"
)

// pairingKeyName is the key's row in server_secrets.
const pairingKeyName = "pairing_key"

// loadPairingKey sets db's pairing key from secret, its file or its row.
func (db *DB) loadPairingKey(ctx context.Context, secret string) error {
	switch {
	case secret != "":
		if len(secret) < MinPairingSecret {
			return fmt.Errorf("the pairing secret must be at least %d characters (it is %d): make one with `openssl rand -hex 32`", MinPairingSecret, len(secret))
		}
		sum := sha256.Sum256([]byte("switchboard pairing key\x00" + secret))
		db.pairingKey, db.pairingKeySource = sum[:], PairingKeySecret
		return nil
	case db.dialect == SQLite:
		key, err := pairingKeyFile(db.dsn + ".pairing-key")
		db.pairingKey, db.pairingKeySource = key, PairingKeyFile
		return err
	}
	fresh, err := newPairingKey()
	if err != nil {
		return err
	}
	if _, err := db.exec(ctx, `INSERT INTO server_secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
		pairingKeyName, fresh, time.Now().UnixMicro()); err != nil {
		return fmt.Errorf("pairing key: %w", err)
	}
	var value string
	if err := db.queryRow(ctx, `SELECT value FROM server_secrets WHERE name = ?`, pairingKeyName).Scan(&value); err != nil {
		return fmt.Errorf("pairing key: %w", err)
	}
	key, err := hex.DecodeString(value)
	if err != nil || len(key) < 32 {
		return errors.New("pairing key: the row of server_secrets is not 32 bytes in hex")
	}
	db.pairingKey, db.pairingKeySource = key, PairingKeyDatabase
	return nil
}

func newPairingKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// pairingKeyFile reads the key in the file at path, making the file (mode
// 0600) when there is none; a file open to others is closed down to 0600.
func pairingKeyFile(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		fresh, err := newPairingKey()
		if err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) { // another process made it meanwhile
			return pairingKeyFile(path)
		}
		if err != nil {
			return nil, fmt.Errorf("pairing key: %w", err)
		}
		_, err = f.WriteString(fresh + "\n")
		if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("pairing key: %w", err)
		}
		raw = []byte(fresh)
	} else if err != nil {
		return nil, fmt.Errorf("pairing key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("pairing key %s is open to other users and could not be made private: %w", path, err)
		}
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(key) < 32 {
		return nil, fmt.Errorf("pairing key %s: not 32 bytes in hex (delete it to make a new one; live pairing codes stop working)", path)
	}
	return key, nil
}

// PairingKeySource says where the pairing key came from: PairingKeySecret,
// PairingKeyFile or PairingKeyDatabase.
func (db *DB) PairingKeySource() string { return db.pairingKeySource }

// pairingHash is the stored form of a pairing code.
func (db *DB) pairingHash(code string) string { return sb.HashPairingCode(db.pairingKey, code) }
