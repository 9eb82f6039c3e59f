package kms

import (
	"crypto/rand"
	"encoding/base64"

	"github.com/ringkms/kms/internal/wrap"
)

// The wrapped form of a ring's keys, keyData (docs/FORMAT.md section 2;
// its types are keyring.go's, beside the key record): the string that
// binds it to its ring and key, and the making of a new key in that form.

// keyInfo binds a wrapped key to its ring and its ID; it is the HPKE info
// string and the RSA-OAEP label.
func keyInfo(ringID, keyID string) []byte {
	return []byte("ringkms/keydata/v1/" + ringID + "/" + keyID)
}

// newKey makes an aes256 key and wraps it for pub. The plaintext key is
// cleared before newKey returns.
func (s *Service) newKey(ringID string, pub *wrap.PublicKey, props map[string]any) (*keyRecord, error) {
	now := s.now().UTC()
	k := &keyRecord{ID: newID(now), RingID: ringID, Type: AlgoAES256, Props: cloneMap(props), CreatedAt: now}
	var secret [32]byte
	rand.Read(secret[:])
	defer clear(secret[:])
	ct, enc, err := pub.Wrap(secret[:], keyInfo(ringID, k.ID))
	if err != nil {
		return nil, internalError("wrap key", err)
	}
	k.KeyData = KeyData{Version: formatVersion, IV: base64.StdEncoding.EncodeToString(enc),
		Encrypted: EncryptedKey{Key: EncodedValue{Value: base64.StdEncoding.EncodeToString(ct), Encoding: string(pub.Scheme())}}}
	return k, nil
}
