package kms

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strconv"
)

// Key versions. Every key of a ring has a version, 1, 2, ... in the order
// the ring made them, kept in its record (keyRecord.Version), with the
// ring's newest (ringRecord.LatestVersion) and an index from version to
// key (pfxKeyVersion), by which a transit ciphertext (vault:v<N>:...)
// finds the key that opens it. A ring's first key gets version 1 as the
// ring is made; each rotation gives the new key the next one in the
// rotation's transaction (rotateTx), so two keys of a ring never share
// one, whichever processes make them.
//
// A ring made before versions existed has none until numberKeys gives
// them, in creation order (a key's ID begins with its creation time:
// internal/ids): in the transaction of its next rotation, at the first
// call that needs them (ensureVersions), or at the first pass of the
// rotation sweep after a start (numberRings), whichever comes first. Each
// reads the ring in its transaction and numbers nothing on a ring that has
// versions already, so processes that race number it once.

// keyVersionKey is the index entry of version v of the ring ringID.
func keyVersionKey(ringID string, v int) []byte {
	return binary.BigEndian.AppendUint32(join(pfxKeyVersion, []byte(ringID), sep), uint32(v))
}

// putKeyVersion writes the index entry of k's version.
func putKeyVersion(tx Txn, k *keyRecord) error {
	return tx.Set(keyVersionKey(k.RingID, k.Version), []byte(k.ID))
}

// numberKeys gives the keys of cur, a ring without versions as tx has it,
// the versions 1, 2, ... in creation order, writes them and their index,
// sets cur.LatestVersion and returns the keys written. The caller writes
// cur.
func numberKeys(tx Txn, cur *ringRecord) ([]*keyRecord, error) {
	var keys []*keyRecord
	err := eachKey(tx, cur.ID, func(k *keyRecord) error {
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		k.Version = i + 1
		if err := putKey(tx, k); err != nil {
			return nil, err
		}
		if err := putKeyVersion(tx, k); err != nil {
			return nil, err
		}
	}
	cur.LatestVersion = len(keys)
	return keys, nil
}

// eachKey calls fn with each key of the ring ringID as tx has it, in
// creation order (a key's ID begins with its creation time).
func eachKey(tx Txn, ringID string, fn func(k *keyRecord) error) error {
	return tx.Scan(ScanOptions{Prefix: join(pfxKey, []byte(ringID), sep)}, func(_, v []byte) (bool, error) {
		var k keyRecord
		if err := json.Unmarshal(v, &k); err != nil {
			return false, err
		}
		return true, fn(&k)
	})
}

// ensureVersions returns r with versions: r itself when it has them, or
// the ring as numbering it (numberRing) left it.
func (s *Service) ensureVersions(r *ringRecord) (*ringRecord, error) {
	if r.LatestVersion != 0 {
		return r, nil
	}
	next, err := s.numberRing(r.ID)
	if err != nil {
		return nil, err
	}
	if next.Group != r.Group {
		return nil, Errorf(KindNotFound, "key ring not found")
	}
	return next, nil
}

// numberRing numbers the keys of the ring id unless it has versions
// already, with no record (nothing a caller asked for changes), and
// returns the ring as the store then has it.
func (s *Service) numberRing(id string) (*ringRecord, error) {
	var next *ringRecord
	var numbered []*keyRecord
	err := s.submit(nil, func(tx Txn) error {
		cur, err := loadRing(tx, id)
		if err != nil {
			return err
		}
		numbered = nil
		if cur.LatestVersion == 0 {
			if numbered, err = numberKeys(tx, cur); err != nil {
				return err
			}
			if err := putRing(tx, cur); err != nil {
				return err
			}
		}
		next = cur
		return nil
	}, func() {
		s.rings.Set(next.ID, next)
		for _, k := range numbered {
			s.keys.Set(k.ID, k)
		}
	})
	if err != nil {
		return nil, internalErrorUnlessKind("number the keys of a ring", err)
	}
	return next, nil
}

// numberRings numbers the keys of every ring made before versions
// existed, once after a start: it reads the rings (one pass over their
// records, keeping only the IDs of those without versions), then numbers
// each. A ring made meanwhile has versions from its start.
func (s *Service) numberRings(ctx context.Context) error {
	if s.numbered.Load() {
		return nil
	}
	var ids []string
	err := s.store.View(ctx, func(tx Txn) error {
		ids = ids[:0]
		return tx.Scan(ScanOptions{Prefix: pfxRing}, func(k, v []byte) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			var r struct {
				LatestVersion int `json:"latestVersion"`
			}
			if err := json.Unmarshal(v, &r); err != nil {
				return false, err
			}
			if r.LatestVersion == 0 {
				ids = append(ids, string(k[len(pfxRing):]))
			}
			return true, nil
		})
	})
	if err != nil {
		return internalError("read the rings to number their keys", err)
	}
	for _, id := range ids {
		if _, err := s.numberRing(id); err != nil && !isNotFound(err) {
			return err
		}
	}
	s.numbered.Store(true)
	return nil
}

// keyByVersion returns the key of version v of r, a ring with versions:
// NotFound when it has none such.
func (s *Service) keyByVersion(ctx context.Context, r *ringRecord, v int) (*keyRecord, error) {
	if v < 1 || v > r.LatestVersion {
		return nil, Errorf(KindNotFound, "key ring %s has no key version %d", r.Name, v)
	}
	id, err := s.keyVersions.Load(r.ID+"/"+strconv.Itoa(v), func() (string, error) {
		var id string
		err := s.store.View(ctx, func(tx Txn) error {
			b, err := tx.Get(keyVersionKey(r.ID, v))
			if isNotFound(err) {
				return Errorf(KindNotFound, "key ring %s has no key version %d", r.Name, v)
			}
			id = string(b)
			return err
		})
		return id, internalErrorUnlessKind("read a key version", err)
	})
	if err != nil {
		return nil, err
	}
	return s.keyByID(ctx, r.ID, id)
}

// internalErrorUnlessKind is internalError for an error that is not
// already one of the service's, and nil for nil.
func internalErrorUnlessKind(doing string, err error) error {
	if err == nil {
		return nil
	}
	return internalError(doing, err)
}
