// Package throttle counts failed logins and password reset requests, and
// refuses attempts past their limits.
//
// Failures are counted per User and per
// client address: after maxUserFailures failures for one User (or
// maxAddrFailures from one address) within loginWindow, further attempts
// are refused with a RateLimited error, without checking the password,
// until the lockout ends. The first lockout lasts loginWindow, and each
// further one twice the one before, up to maxLockout. A successful login
// clears the User's count (not the address's).
//
// Password reset requests are throttled the same way, in throttles of
// their own, with every request counted as a failure: per email address
// (known or not) and per client address.
//
// The counts (failures in the window, its start, lockouts, the end of the
// lockout) are in the Store, under a prefix of their own, so every node over one
// store counts into the same ones, and they survive restarts. An attempt
// reads its two counts in one View before the password is checked: the
// one store read that the throttles add to a successful login. A failure
// updates them in one durable Update, a read-modify-write that the backend
// retries on a serialisation conflict, so failures counted by two nodes at
// once both count. A success deletes the User's count only when the
// attempt saw one (a failure another node counts meanwhile stays, as if it
// came after the success). These writes are not activity records and do
// not go through the journal. The times are each node's clock: nodes whose
// clocks disagree shift windows and lockouts by the difference.
//
// A count's store key is its throttle's kind and a MAC of the key it
// counts under (a User ID, the digest of an unknown login name or of an
// email address, a client address), under a key derived from the master
// key. So the store, which is untrusted, holds no login name (often a
// password typed into the wrong field), email or client address in clear,
// and a reader of it cannot test guesses of them against the keys as it
// could against plain digests; and every key has the same short length.
//
// Each process keeps in memory only what is its own, per key: the attempts
// under way (pending), which stop one process from racing many guesses at
// once past the limit before any is counted (other nodes' attempts under
// way are not seen: each node may check up to what remains of the limit at
// once), and the failures that the store did not take when they were
// counted. A failure that cannot be counted does not change the attempt's
// answer (it has failed already) and lets nobody in: it is logged, counts
// against the limit in this process for the rest of its window, and is
// added to the store's count with the next failure of that key that the
// store takes.
//
// Idle counts (no lockout, the window over, and a day without lockout
// since the last) are deleted by a sweep of the prefix that each process
// runs at most once per loginWindow, in the background, after a failure.
// The store has no cap on counts, as it spends no memory on them: it holds
// the keys that failed within about two windows or were locked out within
// about two days, and the client address throttles bound how fast one
// address adds keys. The in-memory cap remains for what a process keeps:
// at most throttleCap keys per throttle; past that a new key's attempts
// under way are not tracked in memory (the store still counts them).
package throttle

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/hmackey"
	"github.com/ringkms/kms/internal/workers"
)

const (
	loginWindow     = 15 * time.Minute
	maxUserFailures = 5
	maxAddrFailures = 20
	maxLockout      = 24 * time.Hour

	// throttleCap bounds the keys each throttle keeps in memory.
	throttleCap = 100_000

	// sweepBatch bounds the idle counts that one transaction of a sweep
	// deletes.
	sweepBatch = 1000
)

// A throttle counts the failures of one kind of key.
type throttle struct {
	kind string // names the throttle in its store keys
	max  int

	mu    sync.Mutex
	local map[string]*localStrikes
}

// localStrikes is what one process alone knows of a key.
type localStrikes struct {
	pending int       // attempts under way, not yet counted
	unsaved int       // failures that the store did not take
	start   time.Time // of the window of the unsaved failures
}

// strikes are the failures counted for one key, as the store holds them
// (JSON, under storeKey).
type strikes struct {
	Failures int       `json:"failures"`           // in the window that began at Start
	Start    time.Time `json:"start"`              // of the counting window
	Lockouts int       `json:"lockouts,omitempty"` // lockouts so far; each one doubles the next
	Until    time.Time `json:"until,omitzero"`     // locked out until then
}

func newThrottle(kind string, max int) *throttle {
	return &throttle{kind: kind, max: max, local: make(map[string]*localStrikes)}
}

// current returns the failures of s that count at now.
func (s *strikes) current(now time.Time) int {
	if now.Sub(s.Start) >= loginWindow {
		return 0
	}
	return s.Failures
}

// count adds n failures at now, and starts a lockout when they reach max.
func (s *strikes) count(n, max int, now time.Time) {
	if now.Sub(s.Start) >= loginWindow {
		s.Failures, s.Start = 0, now
	}
	s.Failures += n
	if s.Failures >= max {
		d := maxLockout
		if s.Lockouts < 10 {
			d = min(loginWindow<<s.Lockouts, maxLockout)
		}
		s.Lockouts++
		s.Until = now.Add(d)
		s.Failures, s.Start = 0, now
	}
}

// idle reports whether s no longer matters: no lockout, a finished
// window, and a day without lockout since the last.
func (s *strikes) idle(now time.Time) bool {
	return !now.Before(s.Until) && now.Sub(s.Start) >= loginWindow &&
		(s.Lockouts == 0 || now.Sub(s.Until) >= maxLockout)
}

// idleCount reports whether the stored count v is idle at now; a value
// that does not decode is, as it counts nothing.
func idleCount(v []byte, now time.Time) bool {
	var s strikes
	return json.Unmarshal(v, &s) != nil || s.idle(now)
}

// getStrikes reads the count under key into s, and reports whether there
// was one.
func getStrikes(tx base.Txn, key []byte, s *strikes) (bool, error) {
	v, err := tx.Get(key)
	if errors.Is(err, base.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := json.Unmarshal(v, s); err != nil {
		return false, base.Errorf(base.KindInternal, "a throttle count is corrupt: %v", err)
	}
	return true, nil
}

// counted returns the unsaved failures of e that count at now.
func (e *localStrikes) counted(now time.Time) int {
	if now.Sub(e.start) >= loginWindow {
		return 0
	}
	return e.unsaved
}

// reserve starts an attempt for key, whose count in the store is s. It
// refuses (false) while key is locked out, with the time when it may try
// again, and also when the failures counted and the attempts under way
// reach the limit. tracked reports whether t keeps the attempt in memory.
func (t *throttle) reserve(key string, s *strikes, now time.Time) (until time.Time, ok, tracked bool) {
	if now.Before(s.Until) {
		return s.Until, false, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.local[key]
	if e == nil {
		if len(t.local) >= throttleCap {
			return time.Time{}, true, false
		}
		e = &localStrikes{}
		t.local[key] = e
	}
	if s.current(now)+e.counted(now)+e.pending >= t.max {
		t.drop(key, e, now)
		return now.Add(time.Second), false, false
	}
	e.pending++
	return time.Time{}, true, true
}

// release forgets an attempt that reserve allowed, without counting it.
func (t *throttle) release(key string, tracked bool, now time.Time) {
	if !tracked {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.local[key]; e != nil {
		e.pending = max(e.pending-1, 0)
		t.drop(key, e, now)
	}
}

// take ends an attempt that reserve allowed and returns the unsaved
// failures of key, which the caller counts (or clears) with it.
func (t *throttle) take(key string, tracked bool, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.local[key]
	if e == nil {
		return 0
	}
	if tracked {
		e.pending = max(e.pending-1, 0)
	}
	n := e.counted(now)
	e.unsaved = 0
	t.drop(key, e, now)
	return n
}

// keep holds n failures of key that the store did not take, unless t is
// full.
func (t *throttle) keep(key string, n int, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.local[key]
	if e == nil {
		if len(t.local) >= throttleCap {
			return
		}
		e = &localStrikes{}
		t.local[key] = e
	}
	if e.counted(now) == 0 {
		e.unsaved, e.start = 0, now
	}
	e.unsaved += n
}

// drop forgets key when nothing of it is left. t.mu is held.
func (t *throttle) drop(key string, e *localStrikes, now time.Time) {
	if e.pending == 0 && e.counted(now) == 0 {
		delete(t.local, key)
	}
}

// sweepLocal forgets the keys with nothing left.
func (t *throttle) sweepLocal(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.local {
		t.drop(k, e, now)
	}
}

// Set is the throttles of a Service: of logins, per User and per client
// address, and of password reset requests, per email address and per
// client address. It is safe for concurrent use.
type Set struct {
	users       *throttle // "u/" + user ID, or "n/" + digest of an unknown login name
	addrs       *throttle // client address
	resetEmails *throttle // "e/" + digest of a lower-case email address
	resetAddrs  *throttle // client address

	store   base.Store
	prefix  []byte              // of the counts' keys in the store
	mac     *hmackey.Key        // of the keys the throttles count under
	logErr  func(error, string) // for what fails behind an answer
	sweepMu sync.Mutex          // guards swept
	swept   time.Time           // when the last sweep began
	sweeper *workers.Pool       // the sweep of idle counts, one at a time
}

// New returns the throttles over st, whose counts are kept under prefix
// and keyed with a MAC under key. logErr logs what fails behind an
// answer (a count the store did not take, a sweep).
func New(st base.Store, prefix []byte, key [32]byte, logErr func(error, string)) *Set {
	return &Set{
		users:       newThrottle("login-user", maxUserFailures),
		addrs:       newThrottle("login-addr", maxAddrFailures),
		resetEmails: newThrottle("reset-email", maxUserFailures),
		resetAddrs:  newThrottle("reset-addr", maxAddrFailures),
		store:       st,
		prefix:      prefix,
		mac:         hmackey.New(key),
		logErr:      logErr,
		sweeper:     workers.New(1),
	}
}

// Wait waits for the sweep of idle counts under way, if any.
func (st *Set) Wait() { st.sweeper.Wait() }

// storeKey returns the key of the count of key in t: the prefix, t's
// kind, "/", and 16 bytes of the MAC of key, in hex.
func (st *Set) storeKey(t *throttle, key string) []byte {
	var sum [32]byte
	mac := st.mac.Sum(sum[:0], []byte(key))
	k := make([]byte, 0, len(st.prefix)+len(t.kind)+1+32)
	k = append(append(append(k, st.prefix...), t.kind...), '/')
	return hex.AppendEncode(k, mac[:16])
}

// Attempt is a login or a password reset request that its throttles
// allowed. End or Cancel it, once.
type Attempt struct {
	st     *Set
	clears bool // a success clears the count of the first key (logins)
	slots  [2]slot
}

// slot is one throttle of an attempt and the key it counts under.
type slot struct {
	t       *throttle
	key     string // "" for none: never throttled
	skey    []byte // the key of its count in the store
	stored  bool   // the store held a count when the attempt began
	tracked bool   // t keeps the attempt in memory
}

// BeginLogin starts a login attempt under the throttles of the User and
// of the client address; see begin.
func (st *Set) BeginLogin(ctx context.Context, userKey, addr string, now time.Time) (*Attempt, time.Time, error) {
	return st.begin(ctx, &Attempt{st: st, clears: true, slots: [2]slot{{t: st.users, key: userKey}, {t: st.addrs, key: addr}}}, now)
}

// BeginReset starts a password reset request under the throttles of the
// email address and of the client address; see begin.
func (st *Set) BeginReset(ctx context.Context, emailKey, addr string, now time.Time) (*Attempt, time.Time, error) {
	return st.begin(ctx, &Attempt{st: st, slots: [2]slot{{t: st.resetEmails, key: emailKey}, {t: st.resetAddrs, key: addr}}}, now)
}

// begin reads the counts of a's keys in one View and starts a under its
// throttles. When one refuses, it returns a nil attempt and the time when
// the caller may try again. A store that cannot be read is an error: the
// attempt does not go on without its counts.
func (st *Set) begin(ctx context.Context, a *Attempt, now time.Time) (*Attempt, time.Time, error) {
	var got [2]strikes
	for i := range a.slots {
		if sl := &a.slots[i]; sl.key != "" {
			sl.skey = st.storeKey(sl.t, sl.key)
		}
	}
	err := st.store.View(ctx, func(tx base.Txn) error {
		for i := range a.slots {
			sl := &a.slots[i]
			if sl.key == "" {
				continue
			}
			var err error
			if sl.stored, err = getStrikes(tx, sl.skey, &got[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, base.InternalError("read throttle counts", err)
	}
	for i := range a.slots {
		sl := &a.slots[i]
		if sl.key == "" {
			continue
		}
		until, ok, tracked := sl.t.reserve(sl.key, &got[i], now)
		if !ok {
			for j := range i {
				a.slots[j].t.release(a.slots[j].key, a.slots[j].tracked, now)
			}
			return nil, until, nil
		}
		sl.tracked = tracked
	}
	return a, time.Time{}, nil
}

// Cancel forgets a without counting it.
func (a *Attempt) Cancel(now time.Time) {
	for _, sl := range a.slots {
		if sl.key != "" {
			sl.t.release(sl.key, sl.tracked, now)
		}
	}
}

// End finishes a at now: a failure counts under both keys (in the store,
// with the failures that the store did not take before); a success of a
// login clears the User's count. Store errors are logged and do not
// change the attempt's answer; see the comment at the top of the package.
func (a *Attempt) End(ctx context.Context, now time.Time, failed bool) {
	st := a.st
	ctx = context.WithoutCancel(ctx) // a client that goes away is counted all the same
	var n [2]int
	for i, sl := range a.slots {
		switch {
		case sl.key == "":
		case failed:
			n[i] = 1 + sl.t.take(sl.key, sl.tracked, now)
		case a.clears && i == 0:
			sl.t.take(sl.key, sl.tracked, now)
		default:
			sl.t.release(sl.key, sl.tracked, now)
		}
	}
	if !failed {
		if sl := a.slots[0]; a.clears && sl.stored {
			if err := st.store.Update(ctx, func(tx base.Txn) error { return tx.Delete(sl.skey) }); err != nil {
				st.logErr(err, "throttle "+sl.t.kind+": clear a count")
			}
		}
		return
	}
	err := st.store.Writable(ctx)
	if err == nil {
		err = st.store.Update(ctx, func(tx base.Txn) error {
			for i, sl := range a.slots {
				if sl.key == "" {
					continue
				}
				var s strikes
				if _, err := getStrikes(tx, sl.skey, &s); err != nil {
					return err
				}
				s.count(n[i], sl.t.max, now)
				v, err := json.Marshal(&s)
				if err != nil {
					return err
				}
				if err := tx.Set(sl.skey, v); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		st.logErr(err, "throttle "+a.slots[0].t.kind+": count a failure")
		for i, sl := range a.slots {
			if sl.key != "" {
				sl.t.keep(sl.key, n[i], now)
			}
		}
	}
	st.maybeSweep(now)
}

// ClearUser forgets the login failures of the User with ID id.
func (st *Set) ClearUser(ctx context.Context, id string, now time.Time) {
	key := "u/" + id
	st.users.take(key, false, now)
	skey := st.storeKey(st.users, key)
	if err := st.store.Update(context.WithoutCancel(ctx), func(tx base.Txn) error { return tx.Delete(skey) }); err != nil {
		st.logErr(err, "throttle "+st.users.kind+": clear a count")
	}
}

// maybeSweep starts a sweep of idle counts in the background, unless one
// began within loginWindow.
func (st *Set) maybeSweep(now time.Time) {
	st.sweepMu.Lock()
	due := now.Sub(st.swept) >= loginWindow
	if due {
		st.swept = now
	}
	st.sweepMu.Unlock()
	if !due {
		return
	}
	for _, t := range []*throttle{st.users, st.addrs, st.resetEmails, st.resetAddrs} {
		t.sweepLocal(now)
	}
	st.sweeper.TryGo(func() {
		if err := st.sweep(context.Background(), now); err != nil {
			st.logErr(err, "throttle: sweep idle counts")
		}
	})
}

// sweep deletes the counts in the store that are idle at now, at most
// sweepBatch per transaction, each checked again before it is deleted (a
// node may have counted a failure since the scan).
func (st *Set) sweep(ctx context.Context, now time.Time) error {
	start := st.prefix
	for start != nil {
		var idle [][]byte
		var next []byte
		err := st.store.View(ctx, func(tx base.Txn) error {
			idle, next = idle[:0], nil
			return tx.Scan(base.ScanOptions{Prefix: st.prefix, Start: start}, func(k, v []byte) (bool, error) {
				if idleCount(v, now) {
					idle = append(idle, bytes.Clone(k))
					if len(idle) == sweepBatch {
						next = append(bytes.Clone(k), 0)
						return false, nil
					}
				}
				return true, nil
			})
		})
		if err != nil {
			return err
		}
		if len(idle) > 0 {
			err = st.store.Update(ctx, func(tx base.Txn) error {
				for _, k := range idle {
					v, err := tx.Get(k)
					if errors.Is(err, base.ErrNotFound) {
						continue
					} else if err != nil {
						return err
					}
					if idleCount(v, now) {
						if err := tx.Delete(k); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		start = next
	}
	return nil
}
