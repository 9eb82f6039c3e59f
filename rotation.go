package kms

import (
	"context"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/journal"
)

// Rotation. A ring gets a new active key when a caller rotates it
// (Rotate, RotateAsym, a key change with "rotate": true, transit's
// rotate), when its active key has served maxEncryptCount encrypt calls
// or, a held key's, the bound on its encryptions (encryptLimit,
// reserveEncrypt), and when its active key has been active for the
// ring's rotationPeriod (algos.aes256.rotationPeriod): each Service runs
// a sweep (internal/pacer) whose passes (rotateDue) rotate the rings whose
// time has come, found through the schedule rotateDue (by time: a pass
// reads the due entries and one more, never the whole ring table), and an
// encrypt call that finds the ring's time come before the sweep did
// rotates it first (rotateOverdue), so no encrypt hands out a key past
// its period.
//
// Every rotation commits through rotateTx: the new key gets the ring's
// next version and the ring's entry in the index moves to the new key.
// A rotation that replaces a particular key (by period, by count, or to
// take the active key out of use) carries a guard, which its mutation
// checks on the ring as the transaction reads it: the ring's active key
// must still be the one it replaces (and, by period, still be due). So
// of the processes that race to rotate a ring for one cause, one rotates
// and records it, and the others find the ring rotated and write
// nothing, not even a record: on PostgreSQL the journal's commits are
// serialised by the append lock, and a transaction commits only if what
// it read is current (store/pgstore); on Badger one process writes.
//
// The sweep wakes at the next time the index names, when this process
// schedules a rotation, and every rotatePoll, for the schedules of other
// processes; its first pass after a start also numbers the keys of rings
// made before versions existed (keyversion.go). Rotations by period are
// the service's own: recorded under systemPrincipal, as destructions are.

const (
	// MinRotationPeriod is the shortest rotationPeriod a ring may have.
	MinRotationPeriod = time.Hour

	rotatePoll  = 30 * time.Second
	rotateRetry = 5 * time.Second // after a pass that failed
	rotateBatch = 64              // rotations per store read of the index
)

// CheckRotationPeriod checks a rotationPeriod as a configuration gives it
// (a Go duration such as "720h"; empty or a zero duration for none) and
// returns it as it is kept: "" for none, else the duration without
// trailing zero units ("720h", "1h30m").
func CheckRotationPeriod(period string) (string, error) {
	if period == "" {
		return "", nil
	}
	d, err := time.ParseDuration(period)
	if err != nil {
		return "", Errorf(KindInvalid, "algos.aes256.rotationPeriod %q is not a duration: use a Go duration such as \"720h\", or \"0\" for none", period)
	}
	if d == 0 {
		return "", nil
	}
	if d < MinRotationPeriod {
		return "", Errorf(KindInvalid, "algos.aes256.rotationPeriod %q is shorter than %s: use at least %s, or \"0\" for none", period, MinRotationPeriod, MinRotationPeriod)
	}
	return formatPeriod(d), nil
}

// formatPeriod writes d as time.Duration.String does, without trailing
// zero minutes and seconds.
func formatPeriod(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// period returns the rotationPeriod of c; zero for none.
func (c AlgoConfig) period() time.Duration {
	if c.RotationPeriod == "" {
		return 0
	}
	d, err := time.ParseDuration(c.RotationPeriod)
	if err != nil {
		return 0
	}
	return d
}

// rotateDueKey is the entry of rotateDue of the active key keyID of the
// ring ringID, whose period ends at at (unix ms).
func rotateDueKey(at int64, ringID, keyID string) []byte {
	return rotateDue.Key(at, ringID, keyID)
}

// scheduleRotation sets cur's entry in the index of rotations by period,
// as tx has cur: its active key, made at from, is due when cur's
// rotationPeriod has passed since; none without a period, nor for a held
// key that is not enabled (heldkeys_state.go). It drops the entry cur
// had, which named prevKey (the active key it had). The caller writes
// cur.
func scheduleRotation(tx Txn, cur *ringRecord, prevKey string, from time.Time) error {
	if cur.RotateDue != 0 {
		if err := tx.Delete(rotateDueKey(cur.RotateDue, cur.ID, prevKey)); err != nil {
			return err
		}
		cur.RotateDue = 0
	}
	d := cur.Algos.AES256.period()
	if d <= 0 || cur.heldState() != HeldKeyEnabled {
		return nil
	}
	cur.RotateDue = from.Add(d).UnixMilli()
	return tx.Set(rotateDueKey(cur.RotateDue, cur.ID, cur.ActiveKey), []byte{})
}

// reschedule sets cur's entry in the index of rotations after a change of
// its rotationPeriod, from its active key's creation, as tx has them.
func reschedule(tx Txn, cur *ringRecord) error {
	k, err := loadKey(tx, cur.ID, cur.ActiveKey)
	if err != nil {
		return err
	}
	return scheduleRotation(tx, cur, cur.ActiveKey, k.CreatedAt)
}

// Rotate gives a /ks ring a new active key and returns it. It needs
// keyring.<name>.rotate.
func (s *Service) Rotate(ctx context.Context, in RotateInput) (*Key, error) {
	k, _, err := s.rotateCmd(ctx, groupKS, in, "keyring.rotate")
	if err != nil {
		return nil, err
	}
	return k.key(true), nil
}

func (s *Service) rotateCmd(ctx context.Context, group string, in RotateInput, action string) (*keyRecord, *ringRecord, error) {
	if in.RingName == "" {
		return nil, nil, Errorf(KindInvalid, "ringname is required")
	}
	p, r, err := s.resolveRing(ctx, group, RingRef{Name: in.RingName}, action, OpRotate)
	if err != nil {
		return nil, nil, err
	}
	if err := checkAlgo(in.Algo); err != nil {
		return nil, nil, s.recordFailure(p, action, strings.ToLower(r.Name), err)
	}
	mu, err := s.lockRing(r.ID)
	if err != nil {
		return nil, nil, err
	}
	defer mu.Unlock()
	k, next, _, err := s.rotate(p, r, action, nil, nil)
	return k, next, err
}

// lockRing takes the lock of the ring with ID id, which the writes of a
// ring that must not interleave take in turn (rotations, changes of a
// key's state, the counting of a ring with a maxEncryptCount), and
// returns it for the caller to Unlock. Its holder may wait for the
// journal; a caller that finds it held gives up, with the journal's error,
// once the journal's writer counts as stalled (journal.Lock), as a write
// queued behind the stalled batch is answered.
func (s *Service) lockRing(id string) (*journal.Lock, error) {
	mu, ok := s.ringLocks.Load(id)
	if !ok {
		mu, _ = s.ringLocks.LoadOrStore(id, journal.NewLock())
	}
	l := mu.(*journal.Lock)
	if err := s.journal.Lock(l); err != nil {
		return nil, err
	}
	return l, nil
}

// lockRingAfresh takes the lock of r's ring (lockRing) and reads the ring
// again under it, since another call may have rotated it meanwhile. The
// caller Unlocks the lock when the error is nil.
func (s *Service) lockRingAfresh(ctx context.Context, r *ringRecord) (*ringRecord, *journal.Lock, error) {
	mu, err := s.lockRing(r.ID)
	if err != nil {
		return nil, nil, err
	}
	fresh, err := s.ringByID(ctx, r.Group, r.ID)
	if err != nil {
		mu.Unlock()
		return nil, nil, err
	}
	return fresh, mu, nil
}

// rotate makes a new key for r and makes it the active key, recorded as
// action by p, with props (the ring, the keys and the new version are
// added). A rotation with a guard rotates only if the guard holds on the
// ring as the rotation's transaction reads it; when it does not (another
// process rotated the ring first), rotate writes nothing, no record
// either, and returns the ring as the transaction read it, rotated false.
// A held key that is not enabled (heldkeys_state.go) is not rotated: a
// rotation with a guard writes nothing, one without is refused
// (Disabled, recorded). The caller holds the ring's lock.
func (s *Service) rotate(p *Principal, r *ringRecord, action string, guard func(cur *ringRecord) bool,
	props map[string]any) (k *keyRecord, next *ringRecord, rotated bool, err error) {
	k, err = s.newKey(r, r.pub)
	if err != nil {
		return nil, nil, false, err
	}
	if props == nil {
		props = make(map[string]any, 5)
	}
	props["ringId"], props["keyId"] = r.ID, k.ID
	act := s.newActivity(p, action, strings.ToLower(r.Name), true, props)
	var numbered []*keyRecord
	jb := &activityJob{}
	jb.Mutate = func(tx Txn) error {
		jb.Rec, next, numbered = act, nil, nil
		cur, err := loadRing(tx, r.ID)
		if err != nil {
			if guard != nil {
				jb.Rec = nil // no rotation was asked for: nothing to record
			}
			return err
		}
		if guard != nil && (!guard(cur) || cur.heldUsable() != nil) {
			jb.Rec, next = nil, cur
			return nil
		}
		if err := cur.heldUsable(); err != nil {
			return err // a held key disabled or pending deletion is rotated by no caller
		}
		act.Props["previousKeyId"] = cur.ActiveKey
		if numbered, err = rotateTx(tx, cur, k); err != nil {
			return err
		}
		act.Props["version"] = k.Version
		next = cur
		return nil
	}
	jb.After = func() {
		s.rings.Set(next.ID, next)
		for _, nk := range numbered {
			s.keys.Set(nk.ID, nk)
		}
		if jb.Rec != nil {
			s.keys.Set(k.ID, k)
		}
	}
	if err := s.journal.Submit(jb); err != nil {
		return nil, nil, false, err
	}
	if jb.Rec == nil {
		return nil, next, false, nil
	}
	if next.RotateDue != 0 {
		s.rotator.Wake()
	}
	return k, next, true, nil
}

// rotateTx makes k, a new key of the ring cur as tx has it, cur's active
// key: k gets cur's next version (the keys of a ring made before versions
// are numbered first, and returned), cur's entry in the index of
// rotations by period moves to k, and both are written.
func rotateTx(tx Txn, cur *ringRecord, k *keyRecord) ([]*keyRecord, error) {
	var numbered []*keyRecord
	if cur.LatestVersion == 0 {
		var err error
		if numbered, err = numberKeys(tx, cur); err != nil {
			return nil, err
		}
	}
	k.Version = cur.LatestVersion + 1
	if err := putKeyVersion(tx, k); err != nil {
		return nil, err
	}
	prev := cur.ActiveKey
	cur.ActiveKey, cur.LatestVersion, cur.UpdatedAt = k.ID, k.Version, k.CreatedAt
	if err := scheduleRotation(tx, cur, prev, k.CreatedAt); err != nil {
		return nil, err
	}
	if err := putRing(tx, cur); err != nil {
		return nil, err
	}
	return numbered, putKey(tx, k)
}

// activeGuard is the guard of a rotation that replaces the active key
// keyID: it is still the ring's active key.
func activeGuard(keyID string) func(cur *ringRecord) bool {
	return func(cur *ringRecord) bool { return cur.ActiveKey == keyID }
}

// periodAction is the action of a rotation by period of a ring of group.
func periodAction(group string) string {
	action := "keyring.rotate.period"
	if group == groupAsym {
		action = "asym.keyring.rotate.period"
	}
	return action
}

// dueGuard is the guard of a rotation by period of the active key keyID:
// it is still the ring's active key, and due by nowMs.
func dueGuard(keyID string, nowMs int64) func(cur *ringRecord) bool {
	return func(cur *ringRecord) bool {
		return cur.ActiveKey == keyID && cur.RotateDue != 0 && cur.RotateDue <= nowMs
	}
}

// periodProps are the props of the record of a rotation of r by period.
func periodProps(r *ringRecord, trigger string) map[string]any {
	return map[string]any{"reason": "rotationPeriod", "rotationPeriod": r.Algos.AES256.RotationPeriod,
		"dueAt": time.UnixMilli(r.RotateDue).UTC().Format(time.RFC3339Nano), "trigger": trigger}
}

// rotateOverdue rotates r, whose active key is past its rotationPeriod,
// for an encrypt call that found it so before the sweep did, and returns
// the ring with its new active key; or the ring as it is, when another
// call or process rotated it first.
func (s *Service) rotateOverdue(ctx context.Context, r *ringRecord) (*ringRecord, error) {
	r, mu, err := s.lockRingAfresh(ctx, r)
	if err != nil {
		return nil, err
	}
	defer mu.Unlock()
	now := s.now().UnixMilli()
	if r.RotateDue == 0 || now < r.RotateDue {
		return r, nil
	}
	_, next, _, err := s.rotate(systemPrincipal, r, periodAction(r.Group), dueGuard(r.ActiveKey, now), periodProps(r, "encrypt"))
	if err != nil {
		return nil, err
	}
	if next.Group != r.Group {
		return nil, Errorf(KindNotFound, "key ring not found")
	}
	return next, nil
}

// rotateDue is a pass of the sweep: it rotates the rings whose active key
// is due by now, and returns when the next is due (zero: none is
// scheduled). Its first pass after a start numbers the keys of the rings
// made before versions.
func (s *Service) rotateDue(ctx context.Context) (time.Time, error) {
	if err := s.numberRings(ctx); err != nil {
		return time.Time{}, err
	}
	for {
		now := s.now().UnixMilli()
		due, next, err := s.scanDue(ctx, rotateDue, rotateBatch, now)
		if err != nil {
			return time.Time{}, internalError("read rings due for rotation", err)
		}
		// A ring that fails to rotate does not hold up the others: the
		// pass goes on, and fails (to be tried again) after them.
		var failed error
		for _, k := range due {
			if err := s.rotateScheduled(ctx, k, now); err != nil && failed == nil {
				failed = err
			}
		}
		if failed != nil {
			return time.Time{}, failed
		}
		if len(due) < rotateBatch {
			return next, nil
		}
	}
}

// rotateScheduled rotates the ring that the index entry due names, if its
// active key is still the one the entry names and due by now; an entry
// that names what the ring no longer has is dropped.
func (s *Service) rotateScheduled(ctx context.Context, due []byte, now int64) error {
	at, ringID, keyID, ok := rotateDue.Parse(due)
	if !ok {
		return s.dropDue(due)
	}
	r, err := viewOne(ctx, s.store, func(tx Txn) (*ringRecord, error) { return loadRing(tx, ringID) })
	switch {
	case isNotFound(err):
		return s.dropDue(due)
	case err != nil:
		return internalError("read a ring due for rotation", err)
	case r.ActiveKey != keyID || r.RotateDue != at:
		return s.dropDue(due) // rotated or rescheduled: its entry is another
	}
	mu, err := s.lockRing(r.ID)
	if err != nil {
		return err
	}
	defer mu.Unlock()
	_, _, _, err = s.rotate(systemPrincipal, r, periodAction(r.Group), dueGuard(keyID, now), periodProps(r, "sweep"))
	if isNotFound(err) {
		return nil // deleted meanwhile, with its entry
	}
	return err
}
