// Package seal derives purpose keys from the master key and seals the
// secrets the store holds with AES-256-GCM.
//
// A sealed value is: version (1 byte, 0x01) | nonce (12 bytes) |
// AES-256-GCM ciphertext and tag. The associated data is the identity of
// the record the value belongs to, so a sealed value moved to another record
// fails to open.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
)

const version1 = 0x01

// ErrOpen is returned when a sealed value does not open: it was altered,
// truncated, moved to another record, or sealed under another key.
var ErrOpen = errors.New("sealed value failed to open")

// Derive returns the 32-byte key for purpose, derived from master with
// HKDF-SHA256 and the info string "ringkms/v1/" + purpose.
func Derive(master []byte, purpose string) [32]byte {
	k, err := hkdf.Key(sha256.New, master, nil, "ringkms/v1/"+purpose, 32)
	if err != nil {
		panic("seal: hkdf: " + err.Error()) // only for impossible lengths
	}
	var out [32]byte
	copy(out[:], k)
	clear(k)
	return out
}

// Sealer seals and opens values under one AES-256-GCM key. It is safe for
// concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// New returns a Sealer for key.
func New(key [32]byte) *Sealer {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic("seal: " + err.Error())
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic("seal: " + err.Error())
	}
	return &Sealer{aead: aead}
}

// Seal encrypts plaintext bound to aad.
func (s *Sealer) Seal(plaintext, aad []byte) []byte {
	out := make([]byte, 1+12, 1+12+len(plaintext)+s.aead.Overhead())
	out[0] = version1
	rand.Read(out[1:13])
	return s.aead.Seal(out, out[1:13], plaintext, aad)
}

// Open decrypts a value made by Seal with the same aad.
func (s *Sealer) Open(sealed, aad []byte) ([]byte, error) {
	if len(sealed) < 1+12+s.aead.Overhead() || sealed[0] != version1 {
		return nil, ErrOpen
	}
	pt, err := s.aead.Open(nil, sealed[1:13], sealed[13:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
