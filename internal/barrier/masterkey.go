package barrier

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/seal"
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
		return MasterKey{}, base.Errorf(base.KindInvalid, "master key is not base64")
	}
	defer clear(raw)
	if len(raw) != MasterKeySize {
		return MasterKey{}, base.Errorf(base.KindInvalid, "master key is %d bytes, want %d", len(raw), MasterKeySize)
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

// Seal seals plaintext under a key derived from k (AES-256-GCM), bound
// to aad: the MasterKey as a RootKey.
func (k MasterKey) Seal(plaintext, aad []byte) ([]byte, error) {
	if k.IsZero() {
		return nil, base.Errorf(base.KindInvalid, "the master key is not set")
	}
	return seal.New(seal.Derive(k.b[:], "root-seal")).Seal(plaintext, aad), nil
}

// Open opens what Seal sealed with the same key and aad.
func (k MasterKey) Open(sealed, aad []byte) ([]byte, error) {
	if k.IsZero() {
		return nil, base.Errorf(base.KindInvalid, "the master key is not set")
	}
	return seal.New(seal.Derive(k.b[:], "root-seal")).Open(sealed, aad)
}

// plainKey returns the bytes of rk when it is a MasterKey.
func plainKey(rk RootKey) ([]byte, bool) {
	switch k := rk.(type) {
	case MasterKey:
		return k.b[:], k.set
	case *MasterKey:
		if k != nil {
			return k.b[:], k.set
		}
	}
	return nil, false
}

// NoKey reports whether rk is no key at all: nil, or a zero MasterKey.
func NoKey(rk RootKey) bool {
	switch k := rk.(type) {
	case nil:
		return true
	case MasterKey:
		return k.IsZero()
	case *MasterKey:
		return k == nil || k.IsZero()
	}
	return false
}
