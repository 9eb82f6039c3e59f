// Package splitkey derives the data keys of split-knowledge rings
// (docs/FORMAT.md section 2.1). A call's data key needs two secrets held
// by two parties: the ring's key, which only the holders of the ring's
// private key can unwrap, and the call's share, which the service derives
// from the call's hash with a secret of the ring's that it never hands
// out:
//
//	share   = HMAC-SHA256(secret, "ringkms split share v1" || 0x00 || hash)
//	dataKey = HKDF-SHA256(IKM = ring key, salt = share, info = "ringkms split data key v1", L = 32)
//
// hash is the call's hash as raw bytes (65 for a version 1 hash), not its
// base64url text.
package splitkey

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"

	"github.com/ringkms/kms/internal/hmackey"
)

// Size is the size of a ring's share secret, of a share, of a ring key
// and of a data key.
const Size = 32

// The labels of the two derivations.
const (
	shareLabel   = "ringkms split share v1\x00"
	dataKeyLabel = "ringkms split data key v1"
)

var shareLabelBytes = []byte(shareLabel)

// ErrSize is returned for a secret, ring key or share that is not Size
// bytes.
var ErrSize = errors.New("splitkey: a share secret, ring key and share are 32 bytes each")

// Secret derives the shares of one ring. It is safe for concurrent use.
type Secret struct {
	mac *hmackey.Key
}

// New returns the Secret of the 32 bytes secret, which the caller may
// clear afterwards.
func New(secret []byte) (*Secret, error) {
	if len(secret) != Size {
		return nil, ErrSize
	}
	var k [Size]byte
	copy(k[:], secret)
	defer clear(k[:])
	return &Secret{mac: hmackey.New(k)}, nil
}

// Share returns the share of the call whose hash, as raw bytes, is hash.
func (s *Secret) Share(hash []byte) [Size]byte {
	var out [Size]byte
	s.mac.Sum(out[:0], shareLabelBytes, hash)
	return out
}

// DataKey returns the data key of a call from the ring's key (32 bytes,
// its keyData unwrapped) and the call's share. The caller should clear
// it after use.
func DataKey(ringKey, share []byte) ([]byte, error) {
	if len(ringKey) != Size || len(share) != Size {
		return nil, ErrSize
	}
	return hkdf.Key(sha256.New, ringKey, share, dataKeyLabel, Size)
}
