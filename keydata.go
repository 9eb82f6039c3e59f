package kms

import (
	"encoding/base64"

	"github.com/ringkms/kms/internal/keytype"
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

// newKey makes a key of r's type (keySpec: an aes256 key, but for a held
// key of another type) and wraps it for pub; an asymmetric key's record
// keeps its public key. The plaintext key is cleared before newKey
// returns.
func (s *Service) newKey(r *ringRecord, pub *wrap.PublicKey) (*keyRecord, error) {
	spec, err := r.keySpec()
	if err != nil {
		return nil, internalError("key type of ring "+r.ID, err)
	}
	now := s.now().UTC()
	k := &keyRecord{ID: newID(now), RingID: r.ID, Type: recordType(spec.Type()), Props: cloneMap(r.KeyProps), CreatedAt: now}
	secret, err := keytype.Generate(spec)
	if err != nil {
		return nil, internalError("generate key", err)
	}
	defer clear(secret)
	if spec.Type().Asymmetric() {
		key, err := keytype.Load(spec, secret)
		if err != nil {
			return nil, internalError("load new key", err)
		}
		pk, err := key.PublicKey()
		if err != nil {
			return nil, internalError("public key of new key", err)
		}
		k.PublicKey = pk.Key
	}
	ct, enc, err := pub.Wrap(secret, keyInfo(r.ID, k.ID))
	if err != nil {
		return nil, internalError("wrap key", err)
	}
	k.KeyData = KeyData{Version: formatVersion, IV: base64.StdEncoding.EncodeToString(enc),
		Encrypted: EncryptedKey{Key: EncodedValue{Value: base64.StdEncoding.EncodeToString(ct), Encoding: string(pub.Scheme())}}}
	return k, nil
}
