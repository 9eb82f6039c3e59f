package kms

import (
	"crypto/rand"
	"encoding/base64"

	"github.com/ringkms/kms/internal/splitkey"
)

// Split knowledge. On a ring created with dataKeys "ring" (by name only,
// and every ring stored with no dataKeys, made before the choice existed),
// the key that Encrypt
// hands out, wrapped, is the data key itself: whoever holds the ring's
// private key and may encrypt can open every call's data, with no decrypt
// call and so no record of the read. On a ring created with dataKeys
// "split" (the default of every new /ks ring), a call's data key is derived from the ring's key and a share
// of the call's own (internal/splitkey, docs/FORMAT.md section 2.1). The
// service derives the share from the call's hash with a secret of the
// ring's, made at its creation and kept sealed like an /asym ring's
// private key, and gives it out only in the answer of that call's
// encrypt and of an authorised decrypt of its hash and header; the
// service never holds the ring's key unwrapped. Neither side alone can
// compute a data key, so every read of data sealed on a split ring is a
// decrypt, authorised and recorded. No record, log line or stored value
// holds a share: the store holds only the sealed secret.

// checkDataKeys returns the dataKeys of a new ring: "split" when none was
// asked for, so that a new ring's data is read only through a recorded
// decrypt unless its maker chose otherwise by name.
func checkDataKeys(v string) (string, error) {
	switch v {
	case "", DataKeysSplit:
		return DataKeysSplit, nil
	case DataKeysRing:
		return DataKeysRing, nil
	}
	return "", Errorf(KindInvalid, "dataKeys %q is not supported: use %q or %q", v, DataKeysRing, DataKeysSplit)
}

// ringShareAAD binds a ring's sealed share secret to the ring.
func ringShareAAD(ringID string) []byte { return []byte("ring/share/" + ringID) }

// setDataKeys sets the dataKeys of a new /ks ring (none for an /asym
// ring: dataKeys is empty) and gives a split ring its share secret, which
// sealRing seals.
func (s *Service) setDataKeys(r *ringRecord, dataKeys string) {
	r.DataKeys = dataKeys
	if dataKeys != DataKeysSplit {
		return
	}
	r.newShare = make([]byte, splitkey.Size)
	rand.Read(r.newShare)
}

// sealRing seals, for tx's write of the new ring r, its secrets: the
// private key of an /asym ring (private, nil for none) and the share
// secret of a split ring.
func (s *Service) sealRing(tx Txn, r *ringRecord, private []byte) error {
	var err error
	if private != nil {
		if r.SealedPrivate, err = s.barrier.SealIn(tx, private, ringPrivateAAD(r.ID)); err != nil {
			return err
		}
	}
	if r.newShare != nil {
		if r.SealedShare, err = s.barrier.SealIn(tx, r.newShare, ringShareAAD(r.ID)); err != nil {
			return err
		}
	}
	return nil
}

// keyShare returns the share of the call whose hash is hash (raw bytes)
// on a split ring, standard base64, and "" on any other.
func (s *Service) keyShare(r *ringRecord, hash []byte) (string, error) {
	if r.DataKeys != DataKeysSplit {
		return "", nil
	}
	sec := r.share.Load()
	if sec == nil {
		raw, err := s.barrier.Open(r.SealedShare, ringShareAAD(r.ID))
		if err != nil {
			return "", internalError("open the share secret of key ring "+r.ID, err)
		}
		sec, err = splitkey.New(raw)
		clear(raw)
		if err != nil {
			return "", internalError("open the share secret of key ring "+r.ID, err)
		}
		r.share.Store(sec)
	}
	share := sec.Share(hash)
	var text [44]byte // the base64 of 32 bytes
	base64.StdEncoding.Encode(text[:], share[:])
	clear(share[:])
	out := string(text[:])
	clear(text[:])
	return out, nil
}

// DataKey returns the data key of an encrypt call from the ring's key
// (32 bytes: the keyData of the answer's Key unwrapped, as
// PrivateKey.Unwrap does) and the answer's KeyShare, as docs/FORMAT.md
// section 2.1 derives it. Without a KeyShare (a ring whose dataKeys is
// "ring") the ring's key is the data key, and DataKey returns a copy of
// it. The caller should clear the result after use.
func DataKey(ringKey []byte, keyShare string) ([]byte, error) {
	if len(ringKey) != splitkey.Size {
		return nil, Errorf(KindInvalid, "a ring's key has 32 bytes, not %d", len(ringKey))
	}
	if keyShare == "" {
		return append([]byte(nil), ringKey...), nil
	}
	share, err := base64.StdEncoding.DecodeString(keyShare)
	if err != nil || len(share) != splitkey.Size {
		return nil, Errorf(KindInvalid, "keyShare is not standard base64 of 32 bytes")
	}
	defer clear(share)
	return splitkey.DataKey(ringKey, share)
}
