package hsm

import (
	"fmt"
	"strconv"
)

// Reason classifies an Error. The set is closed and only ever grows at
// the end; callers branch on it with errors.Is against the sentinels
// below, or with errors.As and Error.Reason.
type Reason uint8

const (
	ReasonDevice       Reason = iota // the token failed in a way none of the others names
	ReasonInvalid                    // a malformed URI or argument
	ReasonNoPIN                      // no PIN: neither pin-source nor the environment gives one, or its file cannot be read
	ReasonNoSupport                  // this build has no PKCS#11 support (built without cgo)
	ReasonModule                     // the module (the PKCS#11 library) cannot be loaded or initialised
	ReasonNoToken                    // no token matches the URI, or more than one does
	ReasonPINIncorrect               // the token refused the PIN
	ReasonPINLocked                  // the token's PIN is locked or expired: only its administrator can help
	ReasonNoObject                   // no key matches the URI
	ReasonAmbiguous                  // more than one key matches the URI
	ReasonExists                     // a key to be generated is already there
	ReasonKeyType                    // the key is of another type or size than the use needs
	ReasonKeyPolicy                  // the key's attributes allow too much (extractable, not sensitive) or too little (no encrypt, no sign)
	ReasonOpen                       // a sealed value does not open: altered, truncated, another aad or another key
	ReasonClosed                     // the Token was closed
)

var reasonNames = [...]string{
	ReasonDevice:       "device",
	ReasonInvalid:      "invalid",
	ReasonNoPIN:        "no_pin",
	ReasonNoSupport:    "no_support",
	ReasonModule:       "module",
	ReasonNoToken:      "no_token",
	ReasonPINIncorrect: "pin_incorrect",
	ReasonPINLocked:    "pin_locked",
	ReasonNoObject:     "no_object",
	ReasonAmbiguous:    "ambiguous",
	ReasonExists:       "exists",
	ReasonKeyType:      "key_type",
	ReasonKeyPolicy:    "key_policy",
	ReasonOpen:         "open",
	ReasonClosed:       "closed",
}

// String returns the stable, lowercase name of the reason.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Error is the error type of the package. Msg says what is wrong in
// words an operator can act on; Err, when set, is the token's own answer
// (a pkcs11.Error, an *os.PathError). Neither ever holds a PIN or key
// material.
type Error struct {
	Reason Reason
	Msg    string
	Err    error

	sentinel bool
}

// Error returns the message prefixed with "hsm: ", followed by the cause.
func (e *Error) Error() string {
	if e.Err != nil {
		return "hsm: " + e.Msg + ": " + e.Err.Error()
	}
	return "hsm: " + e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's reason, so that
// errors.Is(err, hsm.ErrPINIncorrect) holds for every wrong-PIN error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.sentinel && t.Reason == e.Reason
}

// Sentinels, one per reason, for errors.Is.
var (
	ErrDevice       = &Error{Reason: ReasonDevice, Msg: "token failure", sentinel: true}
	ErrInvalid      = &Error{Reason: ReasonInvalid, Msg: "invalid PKCS#11 URI or argument", sentinel: true}
	ErrNoPIN        = &Error{Reason: ReasonNoPIN, Msg: "no PIN", sentinel: true}
	ErrNoSupport    = &Error{Reason: ReasonNoSupport, Msg: noSupportMsg, sentinel: true}
	ErrModule       = &Error{Reason: ReasonModule, Msg: "PKCS#11 module not loadable", sentinel: true}
	ErrNoToken      = &Error{Reason: ReasonNoToken, Msg: "no such token", sentinel: true}
	ErrPINIncorrect = &Error{Reason: ReasonPINIncorrect, Msg: "wrong PIN", sentinel: true}
	ErrPINLocked    = &Error{Reason: ReasonPINLocked, Msg: "PIN locked", sentinel: true}
	ErrNoObject     = &Error{Reason: ReasonNoObject, Msg: "no such key", sentinel: true}
	ErrAmbiguous    = &Error{Reason: ReasonAmbiguous, Msg: "more than one key matches", sentinel: true}
	ErrExists       = &Error{Reason: ReasonExists, Msg: "key already exists", sentinel: true}
	ErrKeyType      = &Error{Reason: ReasonKeyType, Msg: "wrong key type or size", sentinel: true}
	ErrKeyPolicy    = &Error{Reason: ReasonKeyPolicy, Msg: "key attributes refused", sentinel: true}
	ErrOpen         = &Error{Reason: ReasonOpen, Msg: "sealed value failed to open", sentinel: true}
	ErrClosed       = &Error{Reason: ReasonClosed, Msg: "token closed", sentinel: true}
)

// noSupportMsg is what every constructor of a build without cgo answers.
const noSupportMsg = "this build of ringkms has no PKCS#11 support (built with CGO_ENABLED=0); build with cgo to use a PKCS#11 token"

// errorf returns an Error of reason r with a formatted message and the
// cause (nil for none).
func errorf(r Reason, cause error, format string, args ...any) *Error {
	return &Error{Reason: r, Msg: fmt.Sprintf(format, args...), Err: cause}
}
