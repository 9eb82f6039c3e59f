package kms

import (
	"bytes"
	"context"
	"strings"
)

// DeleteKeyRing deletes a /ks ring and all its keys; hashes and headers
// issued for it stop resolving. A ring that an active API key's flags grant
// an operation on (keyring.<name>.<op> set to true) cannot be deleted
// (Conflict); the error names those keys of the Accounts the caller sees,
// and only says that others exist. It needs keyring.<name>.delete.
func (s *Service) DeleteKeyRing(ctx context.Context, ref RingRef) (*DeleteKeyRingResult, error) {
	p, r, err := s.resolveRing(ctx, groupKS, ref, "keyring.delete", OpDelete)
	if err != nil {
		return nil, err
	}
	if err := s.deleteRing(p, r, "keyring.delete", nil); err != nil {
		return nil, err
	}
	return &DeleteKeyRingResult{Name: r.Name, ID: r.ID}, nil
}

// deleteRing deletes the ring r, which p may delete, with its keys and
// their indexes (removeRing), recorded as action. allowed, when set, sees
// the ring as the transaction has it and returns why it may not be
// deleted (a transit key whose deletion is not allowed), nil when it may.
func (s *Service) deleteRing(p *Principal, r *ringRecord, action string, allowed func(cur *ringRecord) error) error {
	lower := strings.ToLower(r.Name)
	var gone *removedRing
	act := s.newActivity(p, action, lower, true, map[string]any{"ringId": r.ID})
	return s.submit(act, func(tx Txn) error {
		cur, err := loadRing(tx, r.ID)
		if err != nil {
			return err
		}
		if allowed != nil {
			if err := allowed(cur); err != nil {
				return err
			}
		}
		if err := ringInUse(tx, p, cur, lower); err != nil {
			return err
		}
		gone, err = removeRing(tx, cur)
		return err
	}, func() {
		s.forgetRing(gone)
		s.destroyer.Wake() // to erase the keys' records
	})
}

// removedRing is what removeRing deleted, for the caches: the ring, its
// lower-case name, the IDs of its keys and its aliases (lower-case).
type removedRing struct {
	id, lower       string
	keyIDs, aliases []string
}

// removeRing deletes, in tx, the ring cur as tx has it, with its keys,
// their versions and counts, its aliases, its name and its entries in the
// schedules of rotations and of a held key's deletion, notes its keys
// for erasure (noteErase), and counts one ring fewer.
func removeRing(tx Txn, cur *ringRecord) (*removedRing, error) {
	lower := strings.ToLower(cur.Name)
	gone := &removedRing{id: cur.ID, lower: lower}
	var dels [][]byte
	err := tx.Scan(ScanOptions{Prefix: join(pfxKey, []byte(cur.ID), sep), KeysOnly: true}, func(k, _ []byte) (bool, error) {
		dels = append(dels, bytes.Clone(k))
		gone.keyIDs = append(gone.keyIDs, string(k[len(pfxKey)+len(cur.ID)+1:]))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	err = tx.Scan(ScanOptions{Prefix: join(pfxKeyVersion, []byte(cur.ID), sep), KeysOnly: true}, func(k, _ []byte) (bool, error) {
		dels = append(dels, bytes.Clone(k))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	aliasPrefix := join(pfxHeldAliasRing, []byte(cur.ID), sep)
	err = tx.Scan(ScanOptions{Prefix: aliasPrefix, KeysOnly: true}, func(k, _ []byte) (bool, error) {
		alias := k[len(aliasPrefix):]
		dels = append(dels, bytes.Clone(k), join(pfxHeldAlias, alias))
		gone.aliases = append(gone.aliases, string(alias))
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range gone.keyIDs {
		dels = append(dels, join(pfxKeyCount, []byte(id)))
		// Deleted, the record still lies in the files of a store that
		// keeps earlier versions, until the destroyer's pass erases it.
		if err := noteErase(tx, cur.ID, id); err != nil {
			return nil, err
		}
	}
	if cur.RotateDue != 0 {
		dels = append(dels, rotateDueKey(cur.RotateDue, cur.ID, cur.ActiveKey))
	}
	if at := cur.held().DeletionDate; at != nil {
		dels = append(dels, heldDeleteDue.Key(at.UnixMilli(), cur.ID, ""))
	}
	dels = append(dels, join(pfxRing, []byte(cur.ID)), join(pfxRingName, []byte(lower)),
		join(pfxRingList, []byte(cur.Group), sep, []byte(lower)))
	for _, k := range dels {
		if err := tx.Delete(k); err != nil {
			return nil, err
		}
	}
	return gone, adjustCount(tx, countKeyRings, -1, 0, "key rings")
}

// forgetRing drops from the caches what removeRing deleted.
func (s *Service) forgetRing(gone *removedRing) {
	s.rings.Remove(gone.id)
	s.ringNames.Remove(gone.lower)
	for _, id := range gone.keyIDs {
		s.keys.Remove(id)
		s.heldKeys.Remove(id)
		s.counts.Forget(id)
	}
	for _, a := range gone.aliases {
		s.aliases.Remove(a)
	}
}

// ringInUse refuses the deletion of the ring cur (named lower) while an
// active API key's flags grant an operation on it: the error names those
// keys of the Accounts p sees, and only says that others exist.
func ringInUse(tx Txn, p *Principal, cur *ringRecord, lower string) error {
	var users []string
	others := false // active keys of Accounts the caller does not see
	err := tx.Scan(ScanOptions{Prefix: join(pfxAPIRing, []byte(lower), sep), KeysOnly: true}, func(k, _ []byte) (bool, error) {
		id := string(k[len(pfxAPIRing)+len(lower)+1:])
		ak, err := getAPIKey(tx, id)
		if isNotFound(err) {
			return true, nil
		} else if err != nil {
			return false, err
		}
		switch {
		case !ak.Active || !ak.inRingIndex(k):
		case !visibleTo(p, ak.AccountID):
			others = true
		case len(users) < 5:
			users = append(users, ak.KeyID)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	named := strings.Join(users, ", ")
	switch {
	case others && named != "":
		named += ", and keys of other accounts"
	case others:
		named = "of other accounts"
	}
	if named != "" {
		return Errorf(KindConflict, "key ring %q is named by the flags of active API keys (%s): deactivate them or change their flags first", cur.Name, named)
	}
	return nil
}
