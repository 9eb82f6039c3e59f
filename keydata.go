package kms

import (
	"crypto/rand"
	"encoding/base64"

	"github.com/ringkms/kms/internal/wrap"
)

// The wrapped form of a ring's keys, keyData (docs/FORMAT.md section 2):
// its types, the string that binds it to its ring and key, and the making
// of a new key in that form.

// KeyData is a key wrapped for its ring's public key; docs/FORMAT.md
// describes it bit for bit.
type KeyData struct {
	Version   int          `json:"version"`
	Encrypted EncryptedKey `json:"encrypted"`
	// IV is the HPKE encapsulated key (standard base64); empty for RSA.
	IV string `json:"iv"`
}

// EncryptedKey holds the wrapped key.
type EncryptedKey struct {
	Key EncodedValue `json:"key"`
}

// EncodedValue is a wrapped value: Value is standard base64 of the
// ciphertext; Encoding names the wrapping scheme (hpke-xwing, hpke-x25519
// or rsa-oaep-sha256).
type EncodedValue struct {
	Value    string `json:"value"`
	Encoding string `json:"encoding"`
}

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
