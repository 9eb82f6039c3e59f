package kms

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The state of a held key as a whole. Besides the states of its
// versions (keystate.go), which go on as they are, a held key is
//
//	enabled <-> disabled                 DisableHeldKey, EnableHeldKey
//	enabled, disabled -> pending-deletion ScheduleHeldKeyDeletion
//	pending-deletion -> disabled          CancelHeldKeyDeletion, before the date
//	pending-deletion -> (deleted)         at the date, by the Service
//
// A key that is not enabled is used by no call (heldRing refuses every
// use: Disabled, recorded as a refusal, as the use of a disabled version
// is), is rotated by none (rotate refuses it; its rotation by period is
// not scheduled while it is not enabled, and is scheduled again, from its
// latest version's creation, when it is enabled: an overdue key rotates
// at once), and still answers reads (GetHeldKey says its State).
//
// Scheduling a deletion schedules the destruction of each version not
// destroyed yet at the deletion date, through the destroyer's schedule
// (destroy.go), remembering each version's state (keyRecord.Before); a
// version whose own destruction comes earlier keeps it, one whose own
// destruction comes later gives it up. At the date the destroyer destroys
// the versions, and then deletes the key (deleteHeldNow): its ring, its
// versions' records, its aliases; from then on the key is not found, and
// its name may be given to a new key. Until the date, the deletion can be
// cancelled: the versions get their states back, and the key is left
// disabled, so that using it again is a decision of its own (and a record
// of its own). While a deletion is pending, nothing of the key changes
// but by cancelling it (Conflict): not the states of its versions, its
// settings or tags, and no alias is made or moved to it (those it has
// may be deleted or moved away). The deletion needs keyring.<name>.delete and
// ignores the key's deletion_allowed, which is for transit's immediate
// DELETE: a deletion with a window is another, slower operation, which
// the window makes undoable.

// The windows of a held key's deletion (ScheduleHeldKeyDeletion): a
// window of zero is DefaultHeldDeletionWindow; a window is at least the
// Service's shortest delay of a destruction (Options.MinDestroyDelay) and
// at most MaxHeldDeletionWindow. A protocol narrows them to its own rule.
const (
	DefaultHeldDeletionWindow = 30 * 24 * time.Hour
	MaxHeldDeletionWindow     = 365 * 24 * time.Hour
)

// DisableHeldKey disables the held key name (or the key an alias names)
// as a whole: no call uses it until EnableHeldKey (see above); its
// versions keep their states. A disabled key stays so. It needs
// keyring.<name>.keys, as the states of its versions do, and is recorded
// as transit.key.disable.
func (s *Service) DisableHeldKey(ctx context.Context, name string) (*HeldKey, error) {
	return s.setHeldState(ctx, name, transitDisableAction, OpKeys, func(tx Txn, cur *ringRecord, t *heldSettings, _ *Activity) ([]*keyRecord, error) {
		t.State = HeldKeyDisabled
		return nil, notPendingDeletion(cur)
	})
}

// EnableHeldKey enables the held key name (or the key an alias names)
// again: its versions serve as their states say. An enabled key stays
// so; a key pending deletion is Conflict (cancel the deletion first). It
// needs keyring.<name>.keys and is recorded as transit.key.enable.
func (s *Service) EnableHeldKey(ctx context.Context, name string) (*HeldKey, error) {
	return s.setHeldState(ctx, name, transitEnableAction, OpKeys, func(tx Txn, cur *ringRecord, t *heldSettings, _ *Activity) ([]*keyRecord, error) {
		t.State = ""
		return nil, notPendingDeletion(cur)
	})
}

// ScheduleHeldKeyDeletion schedules the deletion of the held key name (or
// the key an alias names) window from now (zero: DefaultHeldDeletionWindow;
// see the bounds there), and describes the key, whose DeletionDate says
// when. The key is unusable at once (pending-deletion), and deleted for
// good at that date (see above), whatever its deletion_allowed says. It
// needs keyring.<name>.delete and is recorded as
// transit.key.delete.schedule, with the date; the deletion at the date
// as transit.key.delete, by the Service.
func (s *Service) ScheduleHeldKeyDeletion(ctx context.Context, name string, window time.Duration) (*HeldKey, error) {
	if window == 0 {
		window = DefaultHeldDeletionWindow
	}
	if min := s.minDestroyDelay(); window < min || window > MaxHeldDeletionWindow {
		return nil, Errorf(KindInvalid, "the window of a deletion must be from %s to %s, not %s", min, MaxHeldDeletionWindow, window)
	}
	key, err := s.setHeldState(ctx, name, transitDeleteScheduleAction, OpDelete, func(tx Txn, cur *ringRecord, t *heldSettings, act *Activity) ([]*keyRecord, error) {
		if err := notPendingDeletion(cur); err != nil {
			return nil, err
		}
		at := s.now().UTC().Add(window).Truncate(time.Millisecond)
		t.State, t.DeletionDate = HeldKeyPendingDeletion, &at
		act.Props["deletionDate"] = at.Format(time.RFC3339Nano)
		if err := tx.Set(heldDeleteDue.Key(at.UnixMilli(), cur.ID, ""), []byte{}); err != nil {
			return nil, err
		}
		return scheduleVersions(tx, cur, at)
	})
	if err != nil {
		return nil, err
	}
	s.destroyer.Wake()
	return key, nil
}

// CancelHeldKeyDeletion cancels the pending deletion of the held key name
// (or the key an alias names), before its date: its versions get back the
// states they had, and the key is left disabled (EnableHeldKey uses it
// again). A key not pending deletion, or whose date has come, is
// Conflict. It needs keyring.<name>.delete and is recorded as
// transit.key.delete.cancel.
func (s *Service) CancelHeldKeyDeletion(ctx context.Context, name string) (*HeldKey, error) {
	return s.setHeldState(ctx, name, transitDeleteCancelAction, OpDelete, func(tx Txn, cur *ringRecord, t *heldSettings, _ *Activity) ([]*keyRecord, error) {
		switch {
		case t.State != HeldKeyPendingDeletion:
			return nil, &Error{Kind: KindConflict, State: cur.heldState(), Message: fmt.Sprintf("key %s is not pending deletion", cur.Name)}
		case t.DeletionDate == nil:
			return nil, Errorf(KindInternal, "key %s is pending deletion with no date", cur.Name)
		case !s.now().Before(*t.DeletionDate):
			return nil, &Error{Kind: KindConflict, State: HeldKeyPendingDeletion, Message: fmt.Sprintf("the deletion date of key %s has come: it is being deleted", cur.Name)}
		}
		if err := tx.Delete(heldDeleteDue.Key(t.DeletionDate.UnixMilli(), cur.ID, "")); err != nil {
			return nil, err
		}
		t.State, t.DeletionDate = HeldKeyDisabled, nil
		return restoreVersions(tx, cur)
	})
}

// setHeldState changes the held key name with change, which gets the
// key's ring and its settings (t, written back after it) as the write's
// transaction reads them and returns the versions it changed, and
// describes the key. The record, action, carries the states before and
// after; the schedule of the key's rotation by period follows its state.
func (s *Service) setHeldState(ctx context.Context, name, action, op string,
	change func(tx Txn, cur *ringRecord, t *heldSettings, act *Activity) ([]*keyRecord, error)) (*HeldKey, error) {
	p, r, err := s.resolveHeld(ctx, name, action, op)
	if err != nil {
		return nil, err
	}
	act := s.newActivity(p, action, strings.ToLower(r.Name), true, map[string]any{"ringId": r.ID})
	var keys []*keyRecord
	next, err := s.changeRing(act, r.ID, func(tx Txn, cur *ringRecord) error {
		prev := cur.heldState()
		t := cur.held()
		var err error
		if keys, err = change(tx, cur, &t, act); err != nil {
			return err
		}
		cur.Held = &t
		act.Props["previousState"], act.Props["state"] = prev, cur.heldState()
		return reschedule(tx, cur)
	})
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		s.keys.Set(k.ID, k)
	}
	return s.describeHeld(ctx, next, false)
}

// scheduleVersions schedules the destruction of the versions of cur as tx
// has them at at, the deletion date of their key, and notes the state
// each had (Before): a destroyed version and one whose own destruction
// comes first are left as they are; one whose own destruction comes
// later gives it up (cancelling the key's deletion leaves it disabled).
// It returns the versions it changed.
func scheduleVersions(tx Txn, cur *ringRecord, at time.Time) ([]*keyRecord, error) {
	keys, err := versionsOf(tx, cur.ID)
	if err != nil {
		return nil, err
	}
	var changed []*keyRecord
	for _, k := range keys {
		switch st := k.state(); {
		case st == KeyDestroyed:
			continue
		case st == KeyDestroyScheduled && k.DestroyAt != nil && !k.DestroyAt.After(at):
			continue
		case st == KeyDestroyScheduled:
			k.Before = KeyDisabled
			if k.DestroyAt != nil {
				if err := tx.Delete(dueKey(*k.DestroyAt, k.RingID, k.ID)); err != nil {
					return nil, err
				}
			}
		default:
			k.Before = st
		}
		k.State, k.DestroyAt = KeyDestroyScheduled, &at
		if err := tx.Set(dueKey(at, k.RingID, k.ID), []byte{}); err != nil {
			return nil, err
		}
		if err := putKey(tx, k); err != nil {
			return nil, err
		}
		changed = append(changed, k)
	}
	return changed, nil
}

// restoreVersions gives the versions of cur that its deletion scheduled
// for destruction (scheduleVersions) back the states they had, and
// returns them.
func restoreVersions(tx Txn, cur *ringRecord) ([]*keyRecord, error) {
	keys, err := versionsOf(tx, cur.ID)
	if err != nil {
		return nil, err
	}
	var changed []*keyRecord
	for _, k := range keys {
		if k.Before == "" || k.state() != KeyDestroyScheduled {
			continue
		}
		if k.DestroyAt != nil {
			if err := tx.Delete(dueKey(*k.DestroyAt, k.RingID, k.ID)); err != nil {
				return nil, err
			}
		}
		k.State, k.DestroyAt, k.Before = k.Before, nil, ""
		if err := putKey(tx, k); err != nil {
			return nil, err
		}
		changed = append(changed, k)
	}
	return changed, nil
}
