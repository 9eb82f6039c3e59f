// Package vaultct makes and reads the ciphertexts of HashiCorp Vault's
// transit engine for its aes256-gcm96 keys, so that what the service
// seals opens with Vault's clients' expectations, and the other way round:
//
//	vault:v<N>:<base64 of nonce | ciphertext | tag>
//
// N is the key version in decimal (1, 2, ...); the base64 is standard,
// padded; the nonce is 12 random bytes and the tag 16, AES-256-GCM's, with
// no associated data. A key exported from Vault opens these, and the
// service opens what Vault sealed with the same key. SealAD and OpenAD
// frame the same way with associated data, and for ChaCha20-Poly1305
// (Vault's chacha20-poly1305 keys), whose nonce is 12 bytes too.
//
// The package knows nothing of key rings or versions as the service keeps
// them: it frames bytes and parses text. Its errors carry the wording of
// Vault's, which its clients show to people.
package vaultct

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// Prefix starts every ciphertext, before the version's digits.
const Prefix = "vault:v"

// KeySize is the size of an aes256-gcm96 key.
const KeySize = 32

// NonceSize and TagSize are AES-GCM's, as Vault uses it.
const (
	NonceSize = 12
	TagSize   = 16
)

// Errors of Parse and Open, worded as Vault words them.
var (
	ErrNoPrefix   = errors.New("invalid ciphertext: no prefix")
	ErrFields     = errors.New("invalid ciphertext: wrong number of fields")
	ErrVersion    = errors.New("invalid ciphertext: version number could not be decoded")
	ErrBase64     = errors.New("invalid ciphertext: could not decode base64")
	ErrTooShort   = errors.New("invalid ciphertext: too short")
	ErrAuthFailed = errors.New("cipher: message authentication failed")
)

// NewAEAD returns AES-256-GCM with a 12-byte nonce under key, which must
// be KeySize bytes.
func NewAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, errors.New("vaultct: an aes256-gcm96 key has 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts plaintext under aead with a random nonce and no
// associated data, and returns nonce | ciphertext | tag.
func Seal(aead cipher.AEAD, plaintext []byte) []byte {
	return SealAD(aead, plaintext, nil)
}

// Open decrypts what Seal returned.
func Open(aead cipher.AEAD, blob []byte) ([]byte, error) {
	return OpenAD(aead, blob, nil)
}

// SealAD encrypts plaintext under aead with a random nonce, binding
// associatedData (Vault's associated_data), and returns
// nonce | ciphertext | tag. Vault frames its chacha20-poly1305
// ciphertexts the same way, so aead may be AES-256-GCM or
// ChaCha20-Poly1305: any AEAD with a NonceSize nonce (another panics).
func SealAD(aead cipher.AEAD, plaintext, associatedData []byte) []byte {
	if aead.NonceSize() != NonceSize {
		panic("vaultct: the AEAD's nonce is not 12 bytes")
	}
	out := make([]byte, NonceSize, NonceSize+len(plaintext)+aead.Overhead())
	rand.Read(out) // never fails (crypto/rand)
	return aead.Seal(out, out, plaintext, associatedData)
}

// OpenAD decrypts what SealAD returned under the same associated data. A
// blob shorter than a nonce and a tag is ErrTooShort; one that fails
// authentication (altered, sealed under another key or with other
// associated data) is ErrAuthFailed.
func OpenAD(aead cipher.AEAD, blob, associatedData []byte) ([]byte, error) {
	if aead.NonceSize() != NonceSize {
		panic("vaultct: the AEAD's nonce is not 12 bytes")
	}
	if len(blob) < NonceSize+aead.Overhead() {
		return nil, ErrTooShort
	}
	out, err := aead.Open(nil, blob[:NonceSize], blob[NonceSize:], associatedData)
	if err != nil {
		return nil, ErrAuthFailed
	}
	return out, nil
}

// Format returns the text of a ciphertext of key version v.
func Format(v int, blob []byte) string { return FormatWith(base64.StdEncoding, v, blob) }

// FormatWith is Format with the bytes in enc: Vault writes signatures
// marshaled as JWS in base64url without padding (base64.RawURLEncoding),
// and everything else (ciphertexts, signatures, HMACs) in standard
// base64.
func FormatWith(enc *base64.Encoding, v int, blob []byte) string {
	b := make([]byte, 0, len(Prefix)+21+enc.EncodedLen(len(blob)))
	b = append(b, Prefix...)
	b = strconv.AppendInt(b, int64(v), 10)
	b = append(b, ':')
	return string(enc.AppendEncode(b, blob))
}

// maxVersion bounds the version a ciphertext may name: far above any
// ring's rotations, and small enough for every int.
const maxVersion = 1<<31 - 1

// Parse splits the text of a ciphertext into its key version and its
// bytes (nonce | ciphertext | tag). Version 0, which Vault wrote before
// its versions started at 1, reads as 1, as Vault reads it.
func Parse(s string) (version int, blob []byte, err error) { return ParseWith(base64.StdEncoding, s) }

// ParseWith is Parse of a text whose bytes are in enc (FormatWith).
func ParseWith(enc *base64.Encoding, s string) (version int, blob []byte, err error) {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return 0, nil, ErrNoPrefix
	}
	digits, text, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, nil, ErrFields
	}
	if digits == "" || len(digits) > 10 {
		return 0, nil, ErrVersion
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, nil, ErrVersion
		}
	}
	v, err := strconv.Atoi(digits)
	if err != nil || v > maxVersion {
		return 0, nil, ErrVersion
	}
	if v == 0 {
		v = 1
	}
	blob, err = enc.DecodeString(text)
	if err != nil {
		return 0, nil, ErrBase64
	}
	return v, blob, nil
}
