package kms

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/schedule"
)

// Destruction. Each Service runs a destroyer (internal/pacer) whose
// passes (destroyDue) destroy the keys whose time has come, found through
// the schedule keyDue (by time: a pass reads the due entries and one
// more, never the whole key table). It wakes at the next time the index names, when this process
// schedules a destruction, and every destroyPoll, for destructions that
// other processes sharing the store scheduled. So a key is destroyed on
// time as long as one process runs, and the first pass after a start
// catches up with what fell due while none did.
//
// Each destruction is a journal job whose mutation reads the key again
// and destroys it only if it is still scheduled for that time, so that
// processes that race destroy it once: the others find it destroyed (or
// its destruction cancelled) and write nothing, not even a record. The
// job drops the key data, and notes the key under pfxKeyErase; once
// committed, a store that keeps earlier versions of values in its files
// (Eraser) erases them, and then the note goes. A note left by a crash is
// taken up by the next pass.
const (
	destroyPoll  = 30 * time.Second
	destroyRetry = 5 * time.Second // after a pass that failed
	destroyBatch = 64              // destructions per store read of the index
)

// systemPrincipal acts for the Service itself in the activity of what it
// does on its own: destructions at their time.
var systemPrincipal = &Principal{Kind: PrincipalAPIKey, ID: "system"}

// scanDue returns the entries of the schedule x that are due by now (unix
// milliseconds), at most limit of them, and when the first one not yet
// due is (zero: none).
func (s *Service) scanDue(ctx context.Context, x schedule.Index, limit int, now int64) (due [][]byte, next time.Time, err error) {
	err = s.store.View(ctx, func(tx Txn) error {
		due, next, err = x.Due(tx, limit, now)
		return err
	})
	return due, next, err
}

// destroyDue destroys the keys due by now, then deletes the held keys
// whose deletion is due (heldkeys_state.go), then erases what the store
// keeps of destroyed keys' material, and returns when the next scheduled
// destruction or deletion is due (zero: none is scheduled).
func (s *Service) destroyDue(ctx context.Context) (time.Time, error) {
	next, err := s.drainDue(ctx, keyDue, "destruction", s.destroyNow)
	if err != nil {
		return time.Time{}, err
	}
	held, err := s.drainDue(ctx, heldDeleteDue, "deletion", s.deleteHeldNow)
	if err != nil {
		return time.Time{}, err
	}
	if next.IsZero() || !held.IsZero() && held.Before(next) {
		next = held
	}
	return next, s.eraseDestroyed(ctx)
}

// drainDue runs do on each entry of x due by now, a batch at a time, and
// returns when the next entry is due (zero: none is scheduled).
func (s *Service) drainDue(ctx context.Context, x schedule.Index, what string, do func(due []byte) error) (time.Time, error) {
	for {
		due, next, err := s.scanDue(ctx, x, destroyBatch, s.now().UnixMilli())
		if err != nil {
			return time.Time{}, internalError("read keys due for "+what, err)
		}
		for _, k := range due {
			if err := do(k); err != nil {
				return time.Time{}, err
			}
		}
		if len(due) < destroyBatch {
			return next, nil
		}
	}
}

// destroyNow destroys the key that the index entry due names, if it is
// still scheduled for that time, and drops the entry.
func (s *Service) destroyNow(due []byte) error {
	at, ringID, keyID, ok := keyDue.Parse(due)
	if !ok {
		return s.dropDue(due)
	}
	ring := ""
	if r, err := s.ringByID(context.Background(), groupKS, ringID); err == nil {
		ring = strings.ToLower(r.Name)
	} else if r, err := s.ringByID(context.Background(), groupAsym, ringID); err == nil {
		ring = strings.ToLower(r.Name)
	}
	act := s.newActivity(systemPrincipal, "key.destroy", ring, true, map[string]any{"ringId": ringID, "keyId": keyID,
		"previousState": KeyDestroyScheduled, "state": KeyDestroyed})
	var next *keyRecord
	return s.dueJob(due, act, func(tx Txn) (bool, error) {
		// The record is the destruction's: a process that finds the key
		// destroyed by another (or its destruction cancelled) writes none.
		next = nil
		k, err := loadKey(tx, ringID, keyID)
		if isNotFound(err) {
			return false, nil // its ring was deleted
		} else if err != nil {
			return false, err
		}
		if k.state() != KeyDestroyScheduled || k.DestroyAt == nil || k.DestroyAt.UnixMilli() != at {
			return false, nil
		}
		now := s.now().UTC()
		k.State, k.DestroyAt, k.DestroyedAt, k.KeyData, k.Before = KeyDestroyed, nil, &now, KeyData{}, ""
		if err := noteErase(tx, k.RingID, k.ID); err != nil {
			return false, err
		}
		if r, err := loadRing(tx, ringID); err == nil && r.Group == groupAsym {
			act.Action = "asym.key.destroy"
		}
		next = k
		return true, putKey(tx, k)
	}, func() {
		if next != nil {
			s.keys.Set(next.ID, next)
			s.heldKeys.Remove(next.ID)
		}
	})
}

// dueJob submits the work of the due entry due in one transaction that
// drops the entry and runs do, which says whether it acted: only then is
// rec written (another process may have done the work first, or it was
// called off meanwhile). after runs once the transaction is durable.
func (s *Service) dueJob(due []byte, rec *Activity, do func(tx Txn) (bool, error), after func()) error {
	jb := &activityJob{After: after}
	jb.Mutate = func(tx Txn) error {
		jb.Rec = nil
		if err := tx.Delete(due); err != nil {
			return err
		}
		acted, err := do(tx)
		if acted {
			jb.Rec = rec
		}
		return err
	}
	return s.journal.Submit(jb)
}

// dropDue drops the due entry due, which names nothing to do.
func (s *Service) dropDue(due []byte) error {
	return s.submit(nil, func(tx Txn) error { return tx.Delete(due) }, nil)
}

// eraseDestroyed has the store erase the earlier versions of the records
// of destroyed keys (those noted under pfxKeyErase), then drops the notes.
func (s *Service) eraseDestroyed(ctx context.Context) error {
	var notes, keys [][]byte
	err := s.store.View(ctx, func(tx Txn) error {
		return tx.Scan(ScanOptions{Prefix: pfxKeyErase, KeysOnly: true}, func(k, _ []byte) (bool, error) {
			notes = append(notes, bytes.Clone(k))
			keys = append(keys, join(pfxKey, k[len(pfxKeyErase):]))
			return true, nil
		})
	})
	if err != nil || len(notes) == 0 {
		return err
	}
	if e, ok := s.store.(Eraser); ok {
		if err := e.Erase(ctx, keys); err != nil {
			return internalError("erase destroyed key material", err)
		}
	}
	return s.submit(nil, func(tx Txn) error {
		for _, k := range notes {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	}, nil)
}

// deleteHeldNow deletes the held key that the index entry due names, if
// it is still pending deletion at that date, and drops the entry: a
// version not destroyed yet is noted for erasure with the others
// (destroy.go), and the key's ring, versions, aliases and indexes go, in
// one write recorded as transit.key.delete by the Service. Processes that
// race delete it once: the others find it gone and write nothing.
func (s *Service) deleteHeldNow(due []byte) error {
	at, ringID, _, ok := heldDeleteDue.Parse(due)
	if !ok {
		return s.dropDue(due)
	}
	act := s.newActivity(systemPrincipal, transitDeleteAction, "", true, map[string]any{"ringId": ringID, "reason": "deletionDate",
		"deletionDate": time.UnixMilli(at).UTC().Format(time.RFC3339Nano)})
	var gone *removedRing
	return s.dueJob(due, act, func(tx Txn) (bool, error) {
		gone = nil
		cur, err := loadRing(tx, ringID)
		if isNotFound(err) {
			return false, nil // deleted meanwhile
		} else if err != nil {
			return false, err
		}
		if t := cur.held(); t.State != HeldKeyPendingDeletion || t.DeletionDate == nil || t.DeletionDate.UnixMilli() != at {
			return false, nil // cancelled, or scheduled again
		}
		keys, err := versionsOf(tx, cur.ID)
		if err != nil {
			return false, err
		}
		left := []string{} // removeRing notes them for erasure
		for _, k := range keys {
			if k.state() != KeyDestroyed {
				left = append(left, k.ID)
			}
		}
		act.Ring, act.Props["destroyedKeyIds"] = strings.ToLower(cur.Name), left
		gone, err = removeRing(tx, cur)
		return err == nil, err
	}, func() {
		if gone != nil {
			s.forgetRing(gone)
		}
	})
}

// versionsOf returns the keys of the ring ringID as tx has them.
func versionsOf(tx Txn, ringID string) ([]*keyRecord, error) {
	var keys []*keyRecord
	err := eachKey(tx, ringID, func(k *keyRecord) error {
		keys = append(keys, k)
		return nil
	})
	return keys, err
}
