package kms

import (
	"sync"
	"time"
)

// Throttling of failed logins. Failures are counted in memory, per User
// and per client address: after maxUserFailures failures for one User (or
// maxAddrFailures from one address) within loginWindow, further attempts
// are refused with a RateLimited error, without checking the password,
// until the lockout ends. The first lockout lasts loginWindow, and each
// further one twice the one before, up to maxLockout. A successful login
// clears the User's count (not the address's). The counts are lost on
// restart; they only have to make guessing slow.
//
// Password reset requests are throttled the same way, in throttles of
// their own, with every request counted as a failure: per email address
// (known or not) and per client address.
const (
	loginWindow     = 15 * time.Minute
	maxUserFailures = 5
	maxAddrFailures = 20
	maxLockout      = 24 * time.Hour

	// throttleCap bounds the entries of each throttle map. Idle entries are
	// swept at least once per loginWindow; when the map is full, entries that
	// are not locked out go first, and past that new keys are not tracked.
	throttleCap = 100_000
)

type throttle struct {
	max int

	mu      sync.Mutex
	entries map[string]*strikes
	swept   time.Time
}

// strikes are the failures counted for one key.
type strikes struct {
	failures int       // in the window that began at start
	start    time.Time // of the counting window
	pending  int       // attempts under way, not yet counted
	lockouts int       // lockouts so far; each one doubles the next
	until    time.Time // locked out until then
}

func newThrottle(max int) *throttle {
	return &throttle{max: max, entries: make(map[string]*strikes)}
}

// idle reports whether e no longer matters: nothing under way, no lockout,
// a finished window, and a day without lockout since the last.
func (e *strikes) idle(now time.Time) bool {
	return e.pending == 0 && !now.Before(e.until) && now.Sub(e.start) >= loginWindow &&
		(e.lockouts == 0 || now.Sub(e.until) >= maxLockout)
}

// begin starts an attempt for key. It refuses (false) while key is locked
// out, with the time when it may try again, and also when enough attempts
// are under way to reach the limit. An empty key is never throttled.
func (t *throttle) begin(key string, now time.Time) (time.Time, bool) {
	if key == "" {
		return time.Time{}, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	if e == nil {
		if !t.room(now) {
			return time.Time{}, true
		}
		e = &strikes{start: now}
		t.entries[key] = e
	}
	if now.Before(e.until) {
		return e.until, false
	}
	if now.Sub(e.start) >= loginWindow {
		e.failures, e.start = 0, now
	}
	if e.failures+e.pending >= t.max {
		return now.Add(time.Second), false
	}
	e.pending++
	return time.Time{}, true
}

// end finishes an attempt that begin allowed: a failure counts, and may
// start a lockout; a success clears the key when clearOnSuccess.
func (t *throttle) end(key string, now time.Time, failed, clearOnSuccess bool) {
	if key == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	if e == nil {
		return
	}
	if e.pending > 0 {
		e.pending--
	}
	if !failed {
		if clearOnSuccess {
			e.failures, e.lockouts, e.until = 0, 0, time.Time{}
			if e.pending == 0 {
				delete(t.entries, key)
			}
		}
		return
	}
	if now.Sub(e.start) >= loginWindow {
		e.failures, e.start = 0, now
	}
	e.failures++
	if e.failures >= t.max {
		d := maxLockout
		if e.lockouts < 10 {
			d = min(loginWindow<<e.lockouts, maxLockout)
		}
		e.lockouts++
		e.until = now.Add(d)
		e.failures, e.start = 0, now
	}
}

// cancel forgets an attempt that begin allowed, without counting it.
func (t *throttle) cancel(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[key]; e != nil && e.pending > 0 {
		e.pending--
	}
}

// clear forgets key.
func (t *throttle) clear(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[key]; e != nil && e.pending == 0 {
		delete(t.entries, key)
	}
}

// room sweeps the map when it is due or full, and reports whether a new
// entry fits. t.mu is held.
func (t *throttle) room(now time.Time) bool {
	if len(t.entries) < throttleCap && now.Sub(t.swept) < loginWindow {
		return true
	}
	t.swept = now
	for k, e := range t.entries {
		if e.idle(now) {
			delete(t.entries, k)
		}
	}
	if len(t.entries) >= throttleCap {
		for k, e := range t.entries {
			if e.pending == 0 && !now.Before(e.until) {
				delete(t.entries, k)
			}
		}
	}
	return len(t.entries) < throttleCap
}

// userState is the in-memory state of the Users' half of a Service: the
// cache of access-token sessions, the login and reset throttles, and the
// work of reset requests under way.
type userState struct {
	sessions    *cache[string, *sessionEntry] // digest of an access token -> session
	users       *throttle                     // "u/" + user ID, or "n/" + digest of an unknown login name
	addrs       *throttle                     // client address
	resetEmails *throttle                     // "e/" + digest of a lower-case email address
	resetAddrs  *throttle                     // client address
	background  workers                       // issueReset
}

// maxBackground bounds the reset requests whose work runs at once; past
// it, requests are answered but dropped.
const maxBackground = 64

func newUserState(size int) *userState {
	go dummyPasswordHash() // ready before the first failed login needs it
	return &userState{
		sessions:    newCache[string, *sessionEntry](size),
		users:       newThrottle(maxUserFailures),
		addrs:       newThrottle(maxAddrFailures),
		resetEmails: newThrottle(maxUserFailures),
		resetAddrs:  newThrottle(maxAddrFailures),
		background:  workers{slots: make(chan struct{}, maxBackground)},
	}
}

func (s *Service) userState() *userState { return s.users }

// beginBoth starts an attempt under the throttles a (for key ka) and b
// (for kb); when either refuses, it returns the time when the caller may
// try again.
func beginBoth(a *throttle, ka string, b *throttle, kb string, now time.Time) (time.Time, bool) {
	if t, ok := a.begin(ka, now); !ok {
		return t, false
	}
	if t, ok := b.begin(kb, now); !ok {
		a.cancel(ka)
		return t, false
	}
	return time.Time{}, true
}

// beginLogin starts a login attempt under both throttles; when either
// refuses, it returns the time when the caller may try again.
func (st *userState) beginLogin(userKey, addr string, now time.Time) (time.Time, bool) {
	return beginBoth(st.users, userKey, st.addrs, addr, now)
}

// beginReset starts a password reset request under both throttles.
func (st *userState) beginReset(emailKey, addr string, now time.Time) (time.Time, bool) {
	return beginBoth(st.resetEmails, emailKey, st.resetAddrs, addr, now)
}

// endReset counts a request that beginReset allowed.
func (st *userState) endReset(emailKey, addr string, now time.Time) {
	st.resetEmails.end(emailKey, now, true, false)
	st.resetAddrs.end(addr, now, true, false)
}

// workers runs functions on goroutines of their own, at most cap(slots)
// at once, and waits for them.
type workers struct {
	slots chan struct{}
	wg    sync.WaitGroup
}

// TryGo runs f on a goroutine, unless cap(slots) are busy: then it
// reports false.
func (w *workers) TryGo(f func()) bool {
	select {
	case w.slots <- struct{}{}:
	default:
		return false
	}
	w.wg.Add(1)
	go func() {
		defer func() {
			<-w.slots
			w.wg.Done()
		}()
		f()
	}()
	return true
}

// Wait waits for the functions under way.
func (w *workers) Wait() { w.wg.Wait() }

// endLogin finishes an attempt that beginLogin allowed.
func (st *userState) endLogin(userKey, addr string, now time.Time, failed bool) {
	st.users.end(userKey, now, failed, true)
	st.addrs.end(addr, now, failed, false)
}
