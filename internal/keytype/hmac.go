package keytype

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
)

// HMACKeyInfo is the HKDF info string that derives the HMAC key of a key
// version whose type is not hmac (the package comment says how). It is
// part of the format: changing it changes every such key's HMACs.
const HMACKeyInfo = "ringkms held key hmac v1"

// derivedHMACKeySize is the size of a derived HMAC key, as Vault's
// random HMAC keys of non-hmac types.
const derivedHMACKeySize = 32

// hmacKey returns the HMAC key of a version of type t with material.
func hmacKey(t Type, material []byte) []byte {
	if t == HMAC {
		return material
	}
	k, err := hkdf.Key(sha256.New, material, nil, HMACKeyInfo, derivedHMACKeySize)
	if err != nil {
		panic("keytype: HKDF-SHA256 of 32 bytes failed: " + err.Error()) // only for an output over 255 blocks
	}
	return k
}

// HMAC returns the HMAC of input under the key version's HMAC key (the
// package comment says which), with hash (zero: DefaultHash). Every type
// computes HMACs. HashNone or an unknown hash is ErrParameter.
func (k *Key) HMAC(hash Hash, input []byte) ([]byte, error) {
	h, ch, err := hash.resolve()
	if err != nil {
		return nil, err
	}
	if h == HashNone {
		return nil, errorf(ErrParameter, "an HMAC needs a hash algorithm, not %s", HashNone)
	}
	m := hmac.New(ch.New, k.hmacKey)
	m.Write(input)
	return m.Sum(nil), nil
}

// VerifyHMAC reports, in constant time, whether mac is the HMAC of input
// under the key with hash. A wrong MAC is false with no error; only a
// bad hash is an error (ErrParameter).
func (k *Key) VerifyHMAC(hash Hash, input, mac []byte) (bool, error) {
	want, err := k.HMAC(hash, input)
	if err != nil {
		return false, err
	}
	return hmac.Equal(want, mac), nil
}
