package kms

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// DefaultDestroyDelay is how long after a destroy call the key is
// destroyed when the call gives no delay.
const DefaultDestroyDelay = 24 * time.Hour

// DefaultMinDestroyDelay is the shortest delay a destroy call may give
// when Options.MinDestroyDelay is zero.
const DefaultMinDestroyDelay = time.Hour

// KeyStateInput changes the state of a key: State is "enabled" or
// "disabled". Rotate, when the key is its ring's active key, rotates the
// ring first so that the key can be disabled; that needs
// keyring.<name>.rotate as well.
type KeyStateInput struct {
	State  string `json:"state"`
	Rotate bool   `json:"rotate"`
}

// DestroyKeyInput schedules the destruction of a key. After is a Go
// duration ("72h"); empty means DefaultDestroyDelay. It may not be shorter
// than the Service's MinDestroyDelay. Rotate is as in KeyStateInput.
type DestroyKeyInput struct {
	After  string `json:"after"`
	Rotate bool   `json:"rotate"`
}

// keyUsable is the verdict on the record v of the key of ring r that an
// encrypt job hands out: nil if the key is usable, why not otherwise; or
// the error of a record that does not decode.
func keyUsable(v []byte, found bool, r *ringRecord) (jobErr, err error) {
	if !found {
		return errRingDeleted(), nil
	}
	var k keyRecord
	if err := json.Unmarshal(v, &k); err != nil {
		return nil, err
	}
	return k.usable(r), nil
}

// SetKeyState enables or disables a key of a /ks ring and returns it
// without its key data. It needs keyring.<name>.keys.
func (s *Service) SetKeyState(ctx context.Context, ref RingRef, keyID string, in KeyStateInput) (*Key, error) {
	return s.setKeyState(ctx, groupKS, ref, keyID, in)
}

// SetAsymKeyState is SetKeyState for a key of an /asym ring.
func (s *Service) SetAsymKeyState(ctx context.Context, ref RingRef, keyID string, in KeyStateInput) (*Key, error) {
	return s.setKeyState(ctx, groupAsym, ref, keyID, in)
}

// DestroyKey schedules the destruction of a key of a /ks ring, which
// leaves use at once, and returns it without its key data. It needs
// keyring.<name>.keys.
func (s *Service) DestroyKey(ctx context.Context, ref RingRef, keyID string, in DestroyKeyInput) (*Key, error) {
	return s.destroyKey(ctx, groupKS, ref, keyID, in)
}

// DestroyAsymKey is DestroyKey for a key of an /asym ring.
func (s *Service) DestroyAsymKey(ctx context.Context, ref RingRef, keyID string, in DestroyKeyInput) (*Key, error) {
	return s.destroyKey(ctx, groupAsym, ref, keyID, in)
}

// CancelDestroyKey cancels the scheduled destruction of a key of a /ks
// ring, which becomes disabled, and returns it. It needs
// keyring.<name>.keys.
func (s *Service) CancelDestroyKey(ctx context.Context, ref RingRef, keyID string) (*Key, error) {
	return s.cancelDestroy(ctx, groupKS, ref, keyID)
}

// CancelDestroyAsymKey is CancelDestroyKey for a key of an /asym ring.
func (s *Service) CancelDestroyAsymKey(ctx context.Context, ref RingRef, keyID string) (*Key, error) {
	return s.cancelDestroy(ctx, groupAsym, ref, keyID)
}

// keyAction names the activity of a key operation in group.
func keyAction(group, op string) string {
	if group == groupAsym {
		return "asym.key." + op
	}
	return "key." + op
}

// notDestroying refuses a change of a key that is destroyed, or
// scheduled for destruction (until the destruction is cancelled).
func notDestroying(r *ringRecord, k *keyRecord) error {
	switch k.state() {
	case KeyDestroyed:
		return errKeyDestroyed(r, k)
	case KeyDestroyScheduled:
		return Errorf(KindConflict, "key %s is already scheduled for destruction at %s: cancel the destruction first to change it", k.ID, k.DestroyAt.Format(time.RFC3339))
	}
	return nil
}

func (s *Service) setKeyState(ctx context.Context, group string, ref RingRef, keyID string, in KeyStateInput) (*Key, error) {
	want := strings.ToLower(in.State)
	if want != KeyEnabled && want != KeyDisabled {
		return nil, Errorf(KindInvalid, "state must be %q or %q (destruction has its own call)", KeyEnabled, KeyDisabled)
	}
	return s.changeKey(ctx, group, ref, keyID, keyAction(group, "state"), in.Rotate && want == KeyDisabled,
		func(r *ringRecord, k *keyRecord, _ time.Time) error {
			if err := notDestroying(r, k); err != nil {
				return err
			}
			if want == KeyDisabled {
				if err := notActive(r, k, "disabled"); err != nil {
					return err
				}
			}
			k.State = want
			return nil
		})
}

func (s *Service) destroyKey(ctx context.Context, group string, ref RingRef, keyID string, in DestroyKeyInput) (*Key, error) {
	after := DefaultDestroyDelay
	if in.After != "" {
		var err error
		if after, err = time.ParseDuration(in.After); err != nil {
			return nil, Errorf(KindInvalid, "after %q is not a duration: use a Go duration such as \"72h\"", in.After)
		}
	}
	if min := s.minDestroyDelay(); after < min {
		return nil, Errorf(KindInvalid, "after must be at least %s", min)
	}
	return s.changeKey(ctx, group, ref, keyID, keyAction(group, "destroy.schedule"), in.Rotate,
		func(r *ringRecord, k *keyRecord, now time.Time) error {
			if err := notDestroying(r, k); err != nil {
				return err
			}
			if err := notActive(r, k, "destroyed"); err != nil {
				return err
			}
			at := now.Add(after).Truncate(time.Millisecond)
			k.State, k.DestroyAt = KeyDestroyScheduled, &at
			return nil
		})
}

func (s *Service) cancelDestroy(ctx context.Context, group string, ref RingRef, keyID string) (*Key, error) {
	return s.changeKey(ctx, group, ref, keyID, keyAction(group, "destroy.cancel"), false,
		func(r *ringRecord, k *keyRecord, _ time.Time) error {
			switch k.state() {
			case KeyDestroyed:
				return errKeyDestroyed(r, k)
			case KeyDestroyScheduled:
				k.State, k.DestroyAt = KeyDisabled, nil
				return nil
			}
			return Errorf(KindConflict, "key %s is not scheduled for destruction", k.ID)
		})
}

// notActive refuses a change that would take the active key of r out of
// use.
func notActive(r *ringRecord, k *keyRecord, what string) error {
	if r.ActiveKey != k.ID {
		return nil
	}
	return Errorf(KindInvalid, "key %s is the active key of ring %s and cannot be %s: rotate the ring first, or pass \"rotate\": true", k.ID, r.Name, what)
}

// minDestroyDelay is the shortest delay a destroy call may give.
func (s *Service) minDestroyDelay() time.Duration {
	switch d := s.opts.MinDestroyDelay; {
	case d < 0:
		return 0
	case d == 0:
		return DefaultMinDestroyDelay
	default:
		return d
	}
}

// changeKey changes the key keyID of the ring ref names, in group, with
// apply, which sees the ring and the key as the store has them in the
// write's transaction (so that a rule such as "not the active key" holds
// across processes) and changes the key or returns why not. With rotate,
// a key that is its ring's active key is first replaced by a new one,
// which needs keyring.<name>.rotate too. The
// change, its index of destruction times and its activity record are one
// write; the caller of this process sees it at once, the others within
// the caches' bound (coherence.go).
func (s *Service) changeKey(ctx context.Context, group string, ref RingRef, keyID, action string, rotate bool,
	apply func(r *ringRecord, k *keyRecord, now time.Time) error) (*Key, error) {
	p, r, err := s.resolveRing(ctx, group, ref, action, OpKeys)
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(r.Name)
	if _, ok := parseID(keyID); !ok {
		return nil, s.recordFailure(p, action, lower, Errorf(KindNotFound, "key not found")) // no key has such an ID
	}
	mu, err := s.lockRing(r.ID)
	if err != nil {
		return nil, err
	}
	defer mu.Unlock()
	if rotate {
		if err := s.store.View(ctx, func(tx Txn) error {
			r, err = loadRing(tx, r.ID)
			return err
		}); err != nil {
			return nil, s.recordFailure(p, action, lower, internalError("read key ring", err))
		}
		if r.ActiveKey == keyID {
			rotateAction := "keyring.rotate"
			if group == groupAsym {
				rotateAction = "asym.keyring.rotate"
			}
			if _, err := s.authorize(ctx, rotateAction, lower, RingFlag(r.Name, OpRotate)); err != nil {
				return nil, err
			}
			if _, r, _, err = s.rotate(p, r, rotateAction, activeGuard(keyID), nil); err != nil {
				return nil, err
			}
		}
	}
	var next *keyRecord
	act := s.newActivity(p, action, lower, true, map[string]any{"ringId": r.ID, "keyId": keyID})
	err = s.submit(act, func(tx Txn) error {
		cur, err := loadRing(tx, r.ID)
		if err != nil {
			return err
		}
		if err := notPendingDeletion(cur); err != nil {
			return err // its deletion decides its versions' states
		}
		k, err := loadKey(tx, r.ID, keyID)
		if err != nil {
			return err
		}
		prev, prevAt := k.state(), k.DestroyAt
		if err := apply(cur, k, s.now().UTC()); err != nil {
			return err
		}
		act.Props["previousState"], act.Props["state"] = prev, k.state()
		if k.DestroyAt != nil {
			act.Props["destroyAt"] = k.DestroyAt.Format(time.RFC3339Nano)
		}
		if prevAt != nil && (k.DestroyAt == nil || !k.DestroyAt.Equal(*prevAt)) {
			if err := tx.Delete(dueKey(*prevAt, k.RingID, k.ID)); err != nil {
				return err
			}
		}
		if k.DestroyAt != nil {
			if err := tx.Set(dueKey(*k.DestroyAt, k.RingID, k.ID), []byte{}); err != nil {
				return err
			}
		}
		next = k
		return putKey(tx, k)
	}, func() { s.keys.Set(next.ID, next) })
	if err != nil {
		return nil, err
	}
	if next.DestroyAt != nil {
		s.destroyer.Wake()
	}
	return next.key(false), nil
}

// dueKey is the entry of keyDue of a key scheduled for destruction at at.
func dueKey(at time.Time, ringID, keyID string) []byte {
	return keyDue.Key(at.UnixMilli(), ringID, keyID)
}

// errRingDeleted answers a job whose ring another process deleted.
func errRingDeleted() error { return Errorf(KindNotFound, "key ring not found: it was deleted") }
