package kms

import (
	"encoding/base64"
	"fmt"

	"github.com/ringkms/kms/internal/wrap"
)

// PrivateKey is a ring's private key as its holder keeps it, ready to
// open the keyData of the ring's keys: what the envelope package and any
// caller of Encrypt or Decrypt need to get from a Key to its 32 bytes.
// The service never holds it. It is safe for concurrent use.
type PrivateKey struct {
	o *wrap.Opener
}

// PrivateKeyText is a ring's private key as text: the PrivateKey string
// of CreateKeyRingResult as it is, or the bytes of a file that holds it.
type PrivateKeyText interface{ ~string | ~[]byte }

// ParsePrivateKey parses a ring's private key in any form of
// docs/FORMAT.md section 1: standard base64 of the 32 bytes the service
// returned at the ring's creation (X-Wing seed or X25519 private key, as
// CreateKeyRingResult.PrivateKey holds it), or a PEM block holding the
// X25519 or RSA private key of a caller-supplied public key ("PRIVATE
// KEY", PKCS #8, or "RSA PRIVATE KEY", PKCS #1). Surrounding white space,
// a file's last newline, say, is ignored. The error never quotes the
// key.
func ParsePrivateKey[T PrivateKeyText](text T) (*PrivateKey, error) {
	b := append([]byte(nil), text...) // a copy of its own, cleared after
	defer clear(b)
	o, err := wrap.ParseOpener(b)
	if err != nil {
		return nil, Errorf(KindInvalid, "%v", err)
	}
	return &PrivateKey{o: o}, nil
}

// Unwrap opens the keyData of k, a key of the ring ringID, and returns its
// 32 bytes, which the caller should clear after use. It fails when k
// carries no keyData, when the keyData was made for another ring, key or
// private key, or when it was altered.
func (pk *PrivateKey) Unwrap(ringID string, k *Key) ([]byte, error) {
	if k == nil || k.KeyData == nil {
		return nil, Errorf(KindInvalid, "the key carries no keyData")
	}
	kd := k.KeyData
	if kd.Version != 1 {
		return nil, Errorf(KindInvalid, "keyData version %d: this library reads version 1", kd.Version)
	}
	scheme := wrap.Scheme(kd.Encrypted.Key.Encoding)
	ct, err := base64.StdEncoding.DecodeString(kd.Encrypted.Key.Value)
	if err != nil {
		return nil, Errorf(KindInvalid, "keyData.encrypted.key.value is not standard base64")
	}
	var enc []byte
	if scheme != wrap.RSAOAEP {
		if enc, err = base64.StdEncoding.DecodeString(kd.IV); err != nil {
			return nil, Errorf(KindInvalid, "keyData.iv is not standard base64")
		}
	}
	key, err := pk.o.Unwrap(scheme, ct, enc, keyInfo(ringID, k.ID))
	if err != nil {
		return nil, &Error{Kind: KindUnprocessable, Message: fmt.Sprintf("key %s does not open with this private key for ring %s", k.ID, ringID), Err: err}
	}
	if len(key) != 32 {
		clear(key)
		return nil, Errorf(KindUnprocessable, "key %s opens to %d bytes, not 32", k.ID, len(key))
	}
	return key, nil
}

// UnwrapKey opens the keyData of k, a key of the ring ringID (as Encrypt,
// Decrypt, GetKey and Rotate return them), with the ring's private key in
// any form ParsePrivateKey reads, for every wrapping scheme of
// docs/FORMAT.md section 1. It returns the 32 key bytes; the caller should
// clear them after use. To open many keys, parse the private key once
// with ParsePrivateKey.
func UnwrapKey[T PrivateKeyText](privateKey T, ringID string, k *Key) ([]byte, error) {
	pk, err := ParsePrivateKey(privateKey)
	if err != nil {
		return nil, err
	}
	return pk.Unwrap(ringID, k)
}
