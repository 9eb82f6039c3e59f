package kms

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
)

// MasterKeySize is the size of the master key in bytes.
const MasterKeySize = 32

// MasterKey is the root of trust: a 256-bit key from which every purpose key
// of the service is derived. It never reaches the store or a log: String,
// GoString and MarshalText redact it. The zero value is not a valid key.
type MasterKey struct {
	b   [MasterKeySize]byte
	set bool
}

// ParseMasterKey decodes a master key from standard or URL-safe base64
// (padded or not) of exactly 32 bytes. Surrounding white space is ignored.
func ParseMasterKey(text string) (MasterKey, error) {
	text = strings.TrimSpace(text)
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err = enc.DecodeString(text); err == nil {
			break
		}
	}
	if err != nil {
		return MasterKey{}, Errorf(KindInvalid, "master key is not base64")
	}
	defer clear(raw)
	if len(raw) != MasterKeySize {
		return MasterKey{}, Errorf(KindInvalid, "master key is %d bytes, want %d", len(raw), MasterKeySize)
	}
	var k MasterKey
	copy(k.b[:], raw)
	k.set = true
	return k, nil
}

// GenerateMasterKey returns a new random master key.
func GenerateMasterKey() MasterKey {
	var k MasterKey
	rand.Read(k.b[:])
	k.set = true
	return k
}

// IsZero reports whether k is the zero value (no key).
func (k MasterKey) IsZero() bool { return !k.set }

// Equal reports whether k and o are the same key, in constant time.
func (k MasterKey) Equal(o MasterKey) bool {
	return k.set == o.set && subtle.ConstantTimeCompare(k.b[:], o.b[:]) == 1
}

// Base64 returns the key in standard base64, for writing a key file. Handle
// the result as the secret it is.
func (k MasterKey) Base64() string { return base64.StdEncoding.EncodeToString(k.b[:]) }

// String redacts the key.
func (k MasterKey) String() string { return "kms.MasterKey(redacted)" }

// GoString redacts the key.
func (k MasterKey) GoString() string { return k.String() }

// Format redacts the key for every verb.
func (k MasterKey) Format(f fmt.State, _ rune) { fmt.Fprint(f, k.String()) }

// MarshalText redacts the key.
func (k MasterKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// secretPrefixes start the secrets the service issues.
var secretPrefixes = []string{apiKeyPrefix, accessTokenPrefix, inviteTokenPrefix, resetTokenPrefix}

// LooksLikeSecret reports whether s could be a credential the service
// accepts or hands out, so that whoever shows s (a log line, an error
// answer) redacts it: it starts like a secret the service issues (API
// keys, access, invitation and reset tokens), or it is as long as a
// bootstrap API key may be (which has no fixed form) without being an ID.
func LooksLikeSecret(s string) bool {
	for _, prefix := range secretPrefixes {
		if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
			return true
		}
	}
	if len(s) < minSecretLen {
		return false
	}
	_, isID := parseID(s)
	return !isID
}

func newSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func secretDigest(secret string) string {
	var buf [128]byte // room for the secrets the service issues, which []byte(secret) would allocate
	return digestHex(sha256.Sum256(append(buf[:0], secret...)))
}
