package keytype

import "github.com/ringkms/kms/internal/vaultct"

// Encrypt seals plaintext under an AEAD key (aes256-gcm96,
// chacha20-poly1305) with a random 12-byte nonce, binding associatedData
// (nil or empty: none), and returns nonce | ciphertext | tag, as Vault
// frames both types. Another type is ErrWrongType.
func (k *Key) Encrypt(plaintext, associatedData []byte) ([]byte, error) {
	if k.aead == nil {
		return nil, errorf(ErrWrongType, "%s keys do not encrypt; the key types that do are %s, %s", k.spec.t, AES256GCM96, ChaCha20Poly1305)
	}
	return vaultct.SealAD(k.aead, plaintext, associatedData), nil
}

// Decrypt opens what Encrypt returned, under the same associated data.
// Another type is ErrWrongType; a blob too short to hold a nonce and a
// tag, or that fails authentication (altered, sealed by another key or
// with other associated data), is ErrInput, wrapping vaultct's
// ErrTooShort or ErrAuthFailed, whose wording is Vault's.
func (k *Key) Decrypt(blob, associatedData []byte) ([]byte, error) {
	if k.aead == nil {
		return nil, errorf(ErrWrongType, "%s keys do not decrypt; the key types that do are %s, %s", k.spec.t, AES256GCM96, ChaCha20Poly1305)
	}
	out, err := vaultct.OpenAD(k.aead, blob, associatedData)
	if err != nil {
		return nil, errorf(ErrInput, "%w", err)
	}
	return out, nil
}
