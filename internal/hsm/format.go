package hsm

import (
	"bytes"
	"crypto/ed25519"
)

// The sealed format: version (1 byte, 0x01) | IV (12 bytes) | AES-256-GCM
// ciphertext and 16-byte tag. The aad is the GCM additional data, as the
// caller gives it.
const (
	sealVersion  = 0x01
	ivSize       = 12
	tagSize      = 16
	SealOverhead = 1 + ivSize + tagSize // what Seal adds to the plaintext's length
)

// CKA_EC_PARAMS for edwards25519: the DER of the OID 1.3.101.112
// (RFC 8410's id-Ed25519), which PKCS#11 3.0 names, and the DER
// PrintableString "edwards25519" that some tools write (OpenSC's
// pkcs11-tool among them).
var (
	ed25519OID       = []byte{0x06, 0x03, 0x2b, 0x65, 0x70}
	ed25519Printable = append([]byte{0x13, 0x0c}, "edwards25519"...)
)

// isEd25519Params reports whether p, a CKA_EC_PARAMS, names edwards25519.
func isEd25519Params(p []byte) bool {
	return bytes.Equal(p, ed25519OID) || bytes.Equal(p, ed25519Printable)
}

// parseEd25519Point decodes a CKA_EC_POINT of an Ed25519 public key: the
// DER OCTET STRING of the 32-byte key that PKCS#11 3.0 specifies, or the
// 32 bytes themselves, which some tokens keep.
func parseEd25519Point(p []byte) (ed25519.PublicKey, bool) {
	switch {
	case len(p) == ed25519.PublicKeySize:
		return bytes.Clone(p), true
	case len(p) == 2+ed25519.PublicKeySize && p[0] == 0x04 && p[1] == ed25519.PublicKeySize:
		return bytes.Clone(p[2:]), true
	}
	return nil, false
}
