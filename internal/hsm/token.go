//go:build cgo

package hsm

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/miekg/pkcs11"
)

// Token is a logged-in connection to one token: a few sessions, shared
// by the keys found on it. It is safe for concurrent use: each operation
// takes a session of its own from the pool, waiting when all are busy.
type Token struct {
	mod   *module
	slot  uint
	label string // the token's label, for messages
	info  pkcs11.TokenInfo
	pool  chan pkcs11.SessionHandle
	n     int // sessions in all, in the pool or in use
	done  chan struct{}
	once  sync.Once
	err   error // what Close answered
}

// maxSessions bounds the pool, of one session per core (at least two).
// Signing is the one operation called under load; SoftHSM2 signs on the
// caller's thread, and BenchmarkEd25519Sign/parallel on 2 cores showed
// no gain from 8 sessions over 2. A token's own limit (ulMaxSessionCount)
// lowers the count further.
const maxSessions = 8

// Open loads the module the URI names, finds the one token its token
// attributes select, opens sessions on it and logs in as the user with
// pin. Close undoes all of it.
//
// Tokens of one module share the process's one initialisation of it,
// and tokens of one slot share its login: a second Open of the same token
// is checked against the PIN the first one logged in with.
func Open(u URI, pin string) (*Token, error) {
	if u.ModulePath == "" {
		return nil, invalid("the URI names no module-path")
	}
	if pin == "" {
		return nil, errorf(ReasonNoPIN, nil, "no PIN for the token %s", u.tokenDesc())
	}
	modules.Lock()
	defer modules.Unlock()
	mod, err := loadModule(u.ModulePath)
	if err != nil {
		return nil, err
	}
	t, err := mod.open(u, pin)
	if err != nil {
		mod.release()
		return nil, err
	}
	return t, nil
}

func (m *module) open(u URI, pin string) (*Token, error) {
	slot, info, err := m.findToken(u)
	if err != nil {
		return nil, err
	}
	n := min(maxSessions, max(2, runtime.GOMAXPROCS(0)))
	if info.MaxSessionCount != pkcs11.CK_EFFECTIVELY_INFINITE && info.MaxSessionCount != pkcs11.CK_UNAVAILABLE_INFORMATION {
		n = max(1, min(n, int(info.MaxSessionCount)))
	}
	t := &Token{mod: m, slot: slot, label: info.Label, info: info, pool: make(chan pkcs11.SessionHandle, n), done: make(chan struct{})}
	for range n {
		sh, err := m.ctx.OpenSession(slot, pkcs11.CKF_SERIAL_SESSION|pkcs11.CKF_RW_SESSION)
		if err != nil {
			t.closeSessions()
			return nil, t.fail(err, "open a session on token %q", t.label)
		}
		t.pool <- sh
		t.n++
	}
	if err := m.login(t, pin); err != nil {
		t.closeSessions()
		return nil, err
	}
	return t, nil
}

// holds fails with ErrInvalid when u names another token than t's (or
// another module): a key's URI is looked up in the token it names.
func (t *Token) holds(u URI) error {
	if (u.ModulePath != "" && u.ModulePath != t.mod.path) || !matches(u.Token, t.info.Label) || !matches(u.Manufacturer, t.info.ManufacturerID) ||
		!matches(u.Serial, t.info.SerialNumber) || !matches(u.Model, t.info.Model) || (u.SlotID != nil && *u.SlotID != t.slot) {
		return invalid("the URI names the token %s on module %s, not token %q on %s, which this Token has open", u.tokenDesc(), u.ModulePath, t.label, t.mod.path)
	}
	return nil
}

// String names the token, for logs.
func (t *Token) String() string { return fmt.Sprintf("pkcs11 token %q", t.label) }

// Close logs out (when no other Token of the process is logged in to the
// same token), closes the sessions and finalizes the module (when no
// other Token uses it). Operations in flight finish first; later ones
// fail with ErrClosed. Calling Close again does nothing.
func (t *Token) Close() error {
	t.once.Do(func() {
		close(t.done)
		modules.Lock()
		defer modules.Unlock()
		m := t.mod
		lg := m.logins[t.slot]
		lg.refs--
		var sessions []pkcs11.SessionHandle
		for range t.n {
			sessions = append(sessions, <-t.pool)
		}
		var errs []error
		if lg.refs == 0 {
			delete(m.logins, t.slot)
			if err := m.ctx.Logout(sessions[0]); err != nil && !isCode(err, pkcs11.CKR_USER_NOT_LOGGED_IN) {
				errs = append(errs, t.fail(err, "log out of token %q", t.label))
			}
		}
		for _, sh := range sessions {
			if err := m.ctx.CloseSession(sh); err != nil {
				errs = append(errs, t.fail(err, "close a session on token %q", t.label))
			}
		}
		if err := m.release(); err != nil {
			errs = append(errs, err)
		}
		t.err = errors.Join(errs...)
	})
	return t.err
}

// closeSessions closes the sessions of a Token that failed to open.
func (t *Token) closeSessions() {
	for range t.n {
		t.mod.ctx.CloseSession(<-t.pool)
	}
	t.n = 0
}

// do runs f on a session of its own. A session on which f failed is
// replaced, when a new one opens, so that one that the token dropped (or
// left inside an unfinished operation) does not come back to the pool.
func (t *Token) do(f func(pkcs11.SessionHandle) error) error {
	var sh pkcs11.SessionHandle
	select {
	case sh = <-t.pool:
	case <-t.done:
		return errorf(ReasonClosed, nil, "token %q is closed", t.label)
	}
	err := f(sh)
	var p11 pkcs11.Error
	if err != nil && errors.As(err, &p11) && !dataError(p11) {
		// Open the new session first: the login lasts while any
		// session of the process on the token is open.
		if fresh, oerr := t.mod.ctx.OpenSession(t.slot, pkcs11.CKF_SERIAL_SESSION|pkcs11.CKF_RW_SESSION); oerr == nil {
			t.mod.ctx.CloseSession(sh)
			sh = fresh
		}
	}
	t.pool <- sh
	return err
}

// dataError reports whether e is the token's verdict on the data (a
// value that does not open), after which the session is as good as new.
func dataError(e pkcs11.Error) bool {
	switch e {
	case pkcs11.CKR_ENCRYPTED_DATA_INVALID, pkcs11.CKR_ENCRYPTED_DATA_LEN_RANGE, pkcs11.CKR_DATA_LEN_RANGE:
		return true
	}
	return false
}

// fail returns err, the token's answer to what the format describes, as
// an Error of ReasonDevice; an err that is an Error already (ErrClosed,
// say) is returned as it is.
func (t *Token) fail(err error, format string, args ...any) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	msg := fmt.Sprintf(format, args...)
	var p11 pkcs11.Error
	if !errors.As(err, &p11) {
		return errorf(ReasonDevice, err, "%s", msg)
	}
	switch p11 {
	case pkcs11.CKR_DEVICE_REMOVED, pkcs11.CKR_TOKEN_NOT_PRESENT:
		return errorf(ReasonDevice, err, "%s: the token is gone", msg)
	case pkcs11.CKR_USER_NOT_LOGGED_IN:
		return errorf(ReasonDevice, err, "%s: the token logged the process out; reopen it", msg)
	}
	return errorf(ReasonDevice, err, "%s", msg)
}

func isCode(err error, code uint) bool {
	var p11 pkcs11.Error
	return errors.As(err, &p11) && uint(p11) == code
}

// modules holds the loaded modules by path. A module is initialised once
// per process (a second C_Initialize fails, and C_Finalize ends every
// session on it), so the Tokens of one module share it.
var modules struct {
	sync.Mutex
	m map[string]*module
}

// module is one loaded PKCS#11 library. Its fields are guarded by
// modules' lock.
type module struct {
	path     string
	ctx      *pkcs11.Ctx
	refs     int
	finalize bool // this package initialised it, so it finalizes it
	logins   map[uint]*login
}

// login is the login of the process to the token in one slot, shared by
// the Tokens open on it.
type login struct {
	refs int
	pin  [sha256.Size]byte // a digest of the PIN it logged in with, to check a second Open against
}

func loadModule(path string) (*module, error) {
	if m := modules.m[path]; m != nil {
		m.refs++
		return m, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, errorf(ReasonModule, err, "cannot load PKCS#11 module")
	}
	ctx := pkcs11.New(path)
	if ctx == nil {
		return nil, errorf(ReasonModule, nil, "cannot load PKCS#11 module %s: not a PKCS#11 library, or a library it needs is missing", path)
	}
	m := &module{path: path, ctx: ctx, refs: 1, finalize: true, logins: map[uint]*login{}}
	if err := ctx.Initialize(); err != nil {
		if !isCode(err, pkcs11.CKR_CRYPTOKI_ALREADY_INITIALIZED) {
			ctx.Destroy()
			return nil, errorf(ReasonModule, err, "initialise PKCS#11 module %s", path)
		}
		m.finalize = false // someone else in the process did, and will finalize it
	}
	if modules.m == nil {
		modules.m = map[string]*module{}
	}
	modules.m[path] = m
	return m, nil
}

// release drops a reference to m, finalizing and unloading it with the
// last one.
func (m *module) release() error {
	m.refs--
	if m.refs > 0 {
		return nil
	}
	delete(modules.m, m.path)
	var err error
	if m.finalize {
		if ferr := m.ctx.Finalize(); ferr != nil {
			err = errorf(ReasonDevice, ferr, "finalize PKCS#11 module %s", m.path)
		}
	}
	m.ctx.Destroy()
	return err
}

// findToken returns the slot of the one initialised token that u's token,
// slot and library attributes select.
func (m *module) findToken(u URI) (uint, pkcs11.TokenInfo, error) {
	if u.LibraryManufacturer != "" || u.LibraryDescription != "" || u.LibraryVersion != "" {
		info, err := m.ctx.GetInfo()
		if err != nil {
			return 0, pkcs11.TokenInfo{}, errorf(ReasonModule, err, "read the information of module %s", m.path)
		}
		v := strconv.Itoa(int(info.LibraryVersion.Major)) + "." + strconv.Itoa(int(info.LibraryVersion.Minor))
		if !matches(u.LibraryManufacturer, info.ManufacturerID) || !matches(u.LibraryDescription, info.LibraryDescription) ||
			(u.LibraryVersion != "" && u.LibraryVersion != v && u.LibraryVersion+".0" != v) {
			return 0, pkcs11.TokenInfo{}, errorf(ReasonNoToken, nil, "module %s is %q by %q, version %s: not the library the URI's library-* attributes name",
				m.path, trim(info.LibraryDescription), trim(info.ManufacturerID), v)
		}
	}
	slots, err := m.ctx.GetSlotList(true)
	if err != nil {
		return 0, pkcs11.TokenInfo{}, errorf(ReasonModule, err, "list the slots of module %s", m.path)
	}
	var (
		found  []uint
		infos  []pkcs11.TokenInfo
		labels []string
	)
	for _, slot := range slots {
		ti, err := m.ctx.GetTokenInfo(slot)
		if err != nil || ti.Flags&pkcs11.CKF_TOKEN_INITIALIZED == 0 {
			continue
		}
		ti.Label, ti.ManufacturerID, ti.Model, ti.SerialNumber = trim(ti.Label), trim(ti.ManufacturerID), trim(ti.Model), trim(ti.SerialNumber)
		labels = append(labels, strconv.Quote(ti.Label))
		if !matches(u.Token, ti.Label) || !matches(u.Manufacturer, ti.ManufacturerID) ||
			!matches(u.Model, ti.Model) || !matches(u.Serial, ti.SerialNumber) ||
			(u.SlotID != nil && *u.SlotID != slot) {
			continue
		}
		if u.SlotDescription != "" || u.SlotManufacturer != "" {
			si, err := m.ctx.GetSlotInfo(slot)
			if err != nil || !matches(u.SlotDescription, trim(si.SlotDescription)) || !matches(u.SlotManufacturer, trim(si.ManufacturerID)) {
				continue
			}
		}
		found = append(found, slot)
		infos = append(infos, ti)
	}
	switch len(found) {
	case 1:
		return found[0], infos[0], nil
	case 0:
		present := "none"
		if len(labels) > 0 {
			present = strings.Join(labels, ", ")
		}
		return 0, pkcs11.TokenInfo{}, errorf(ReasonNoToken, nil, "no token matches %s on module %s (initialised tokens: %s)", u.tokenDesc(), m.path, present)
	}
	return 0, pkcs11.TokenInfo{}, errorf(ReasonNoToken, nil, "%d tokens on module %s match %s: add serial or slot-id to the URI", len(found), m.path, u.tokenDesc())
}

func matches(want, have string) bool { return want == "" || want == have }

// trim drops the padding of a PKCS#11 text field.
func trim(s string) string { return strings.TrimRight(s, " \x00") }

// login logs the process in to t's token, or checks pin against the PIN
// of the login another Token of the process holds.
func (m *module) login(t *Token, pin string) error {
	digest := sha256.Sum256([]byte(pin))
	if lg := m.logins[t.slot]; lg != nil {
		if subtle.ConstantTimeCompare(lg.pin[:], digest[:]) != 1 {
			return errorf(ReasonPINIncorrect, nil, "token %q is already open in this process with another PIN", t.label)
		}
		lg.refs++
		return nil
	}
	ti, err := m.ctx.GetTokenInfo(t.slot)
	if err == nil && ti.Flags&pkcs11.CKF_USER_PIN_LOCKED != 0 {
		return errorf(ReasonPINLocked, nil, "the user PIN of token %q is locked: its security officer must unlock it", t.label)
	}
	sh := <-t.pool
	err = m.ctx.Login(sh, pkcs11.CKU_USER, pin)
	t.pool <- sh
	if err != nil && !isCode(err, pkcs11.CKR_USER_ALREADY_LOGGED_IN) {
		return loginError(err, t.label, m.ctx, t.slot)
	}
	m.logins[t.slot] = &login{refs: 1, pin: digest}
	return nil
}

// loginError says why the token refused the login, and how many tries
// the PIN has left when the token tells.
func loginError(err error, label string, ctx *pkcs11.Ctx, slot uint) error {
	var p11 pkcs11.Error
	errors.As(err, &p11)
	r, msg := classifyLogin(p11, label)
	if r == ReasonPINIncorrect && ctx != nil {
		if ti, ierr := ctx.GetTokenInfo(slot); ierr == nil {
			switch {
			case ti.Flags&pkcs11.CKF_USER_PIN_LOCKED != 0:
				r, msg = ReasonPINLocked, msg+"; the PIN is now locked: its security officer must unlock it"
			case ti.Flags&pkcs11.CKF_USER_PIN_FINAL_TRY != 0:
				msg += "; one more wrong PIN locks it"
			case ti.Flags&pkcs11.CKF_USER_PIN_COUNT_LOW != 0:
				msg += "; few tries are left before the PIN locks"
			}
		}
	}
	return errorf(r, err, "%s", msg)
}

// classifyLogin maps the token's answer to C_Login to a reason and a
// message.
func classifyLogin(code pkcs11.Error, label string) (Reason, string) {
	switch code {
	case pkcs11.CKR_PIN_INCORRECT, pkcs11.CKR_PIN_INVALID, pkcs11.CKR_PIN_LEN_RANGE:
		return ReasonPINIncorrect, fmt.Sprintf("wrong PIN for token %q", label)
	case pkcs11.CKR_PIN_LOCKED:
		return ReasonPINLocked, fmt.Sprintf("the user PIN of token %q is locked: its security officer must unlock it", label)
	case pkcs11.CKR_PIN_EXPIRED:
		return ReasonPINLocked, fmt.Sprintf("the user PIN of token %q has expired: set a new one with the token's tools", label)
	case pkcs11.CKR_USER_PIN_NOT_INITIALIZED:
		return ReasonPINLocked, fmt.Sprintf("token %q has no user PIN yet: its security officer must set one", label)
	}
	return ReasonDevice, fmt.Sprintf("log in to token %q", label)
}
