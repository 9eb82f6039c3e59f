package kms

import (
	"encoding/binary"
	"time"
)

// What a key was used for, for the answer to a leak: how often it was
// handed out and opened (KeyUsage), and every hash issued under it
// (ListKeyHashes). Both are indexes of the activity trail, kept by the
// journal with the trail's other indexes (activity_index.go): the usage counts
// from the successful encrypt and decrypt records naming the key (prop
// keyId), the hashes from the postings of term act/h/ key ID 0, whose
// encrypt records carry the hash (prop hash). So they commit in the same
// transaction as the indexed head, and a restart that indexes records
// again counts them again from exactly where the head was. The record of a
// validation counts for neither, whatever it reports (mayUseKey).

// KeyUsage counts the calls that used a key. Encrypt calls are those that
// handed the key out; decrypt calls those that returned it after their
// checks passed. Refused and failed calls are not counted (the activity
// trail has them). The times are of the first and the last counted call;
// nil while there was none.
type KeyUsage struct {
	KeyID        string     `json:"keyId"`
	EncryptCount uint64     `json:"encryptCount"`
	DecryptCount uint64     `json:"decryptCount"`
	FirstUsedAt  *time.Time `json:"firstUsedAt"`
	LastUsedAt   *time.Time `json:"lastUsedAt"`
}

// KeyHash is one hash issued under a key: when, to which API key (or
// User), and for which Asset, if the call created or updated one.
type KeyHash struct {
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"createdAt"`
	APIKeyID  string    `json:"apikeyId"`
	AccountID string    `json:"accountId"`
	AssetID   string    `json:"assetId,omitempty"`
	// Seq is the encrypt call's activity record.
	Seq uint64 `json:"seq"`
}

// keyUsage is a key's usage as stored: the counts, the first and last
// times (epoch ms), and the seq of the last record counted.
type keyUsage struct {
	enc, dec    uint64
	first, last int64
	seq         uint64
}

const usageLen = 40

func (u *keyUsage) encode() []byte {
	b := make([]byte, 0, usageLen)
	b = binary.BigEndian.AppendUint64(b, u.enc)
	b = binary.BigEndian.AppendUint64(b, u.dec)
	b = binary.BigEndian.AppendUint64(b, uint64(u.first))
	b = binary.BigEndian.AppendUint64(b, uint64(u.last))
	return binary.BigEndian.AppendUint64(b, u.seq)
}

func decodeUsage(v []byte) (keyUsage, error) {
	if len(v) != usageLen {
		return keyUsage{}, Errorf(KindInternal, "key usage record has %d bytes, want %d", len(v), usageLen)
	}
	return keyUsage{
		enc:   binary.BigEndian.Uint64(v),
		dec:   binary.BigEndian.Uint64(v[8:]),
		first: int64(binary.BigEndian.Uint64(v[16:])),
		last:  int64(binary.BigEndian.Uint64(v[24:])),
		seq:   binary.BigEndian.Uint64(v[32:]),
	}, nil
}

// add counts into u the uses of v that come after u.seq.
func (u *keyUsage) add(v *keyUsage) {
	if v.seq <= u.seq {
		return // counted already
	}
	if u.enc+u.dec == 0 || v.first < u.first {
		u.first = v.first
	}
	u.enc += v.enc
	u.dec += v.dec
	u.last = max(u.last, v.last)
	u.seq = v.seq
}

// loadUsage reads the usage of key keyID; the zero keyUsage when it has
// none.
func loadUsage(tx Txn, keyID string) (keyUsage, error) {
	v, err := tx.Get(join(pfxKeyUsage, []byte(keyID)))
	if isNotFound(err) {
		return keyUsage{}, nil
	}
	if err != nil {
		return keyUsage{}, err
	}
	return decodeUsage(v)
}

func (u keyUsage) public(keyID string) *KeyUsage {
	out := &KeyUsage{KeyID: keyID, EncryptCount: u.enc, DecryptCount: u.dec}
	if u.enc+u.dec > 0 {
		first, last := time.UnixMilli(u.first).UTC(), time.UnixMilli(u.last).UTC()
		out.FirstUsedAt, out.LastUsedAt = &first, &last
	}
	return out
}

// keyUse is one use of a key that a record counts: an encrypt (hash:
// one of /ks, whose record carries a hash, listed by ListKeyHashes) or a
// decrypt.
type keyUse struct {
	keyID   string
	encrypt bool
	hash    bool
}

// keyUses returns the uses of keys that record a counts, n of them: a
// successful encrypt or decrypt names its key in prop keyId; a transit
// call's record the same (a data key is an encrypt), and a rewrap's two:
// the decrypt of fromKeyId and the encrypt of keyId.
func keyUses(a *Activity) (uses [2]keyUse, n int) {
	if !mayUseKey(a) {
		return uses, 0
	}
	if r, _ := a.Props["result"].(string); r != "ok" {
		return uses, 0
	}
	add := func(prop string, encrypt, hash bool) {
		if id, _ := a.Props[prop].(string); id != "" {
			uses[n] = keyUse{keyID: id, encrypt: encrypt, hash: hash}
			n++
		}
	}
	switch a.Action {
	case OpEncrypt:
		add("keyId", true, true)
	case OpDecrypt, transitDecryptAction, heldVerifyAction:
		add("keyId", false, false)
	case transitEncryptAction, transitDataKeyAction, heldSignAction, heldHMACAction:
		add("keyId", true, false)
	case transitRewrapAction:
		add("fromKeyId", false, false)
		add("keyId", true, false)
	}
	return uses, n
}

// mayUseKey reports whether record a is of a call that may have used a
// key: an encrypt or a decrypt (of /ks or of transit), made by the
// service. The record of a validation (POST /auth/validate) never is,
// whatever action and props its caller reported: the service records it
// as action validate. Those that earlier versions recorded under the
// action reported are told by prop via "validate", which the service
// sets on the record of every validation and of no other call, so that a
// trail indexed again does not count them either. The props of such a
// record are claims (keyId, hash, assetId...): counting them would let a
// caller holding apikeys.validate alone forge the use of any key, and
// list among its hashes one that was never issued.
func mayUseKey(a *Activity) bool {
	switch a.Action {
	case OpEncrypt, OpDecrypt, transitEncryptAction, transitDecryptAction, transitRewrapAction, transitDataKeyAction,
		heldSignAction, heldVerifyAction, heldHMACAction:
	default:
		return false
	}
	via, _ := a.Props["via"].(string)
	return via != validateAction
}
