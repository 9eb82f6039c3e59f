package kms

import (
	"errors"
	"strings"

	"github.com/ringkms/kms/internal/base"
)

// The error type, its kinds and sentinels are defined in internal/base,
// which the mechanisms under internal/ share with this package; these are
// the same types and values, under their public names.

// Kind classifies an Error. The set is closed and only ever grows at the
// end; callers branch on it with errors.Is against the sentinels below, or
// with errors.As and Error.Kind.
type Kind = base.Kind

// The kinds of Error.
const (
	KindInternal         = base.KindInternal         // an unexpected failure; details go to the log, not the caller
	KindInvalid          = base.KindInvalid          // the request is malformed or breaks a rule
	KindUnauthenticated  = base.KindUnauthenticated  // no credential, or one that is wrong, expired, revoked or inactive
	KindPermissionDenied = base.KindPermissionDenied // the credential lacks the flag the operation needs
	KindNotFound         = base.KindNotFound         // the named resource does not exist
	KindConflict         = base.KindConflict         // the resource already exists, or is still in use
	KindLimit            = base.KindLimit            // a plan limit was reached
	KindUnprocessable    = base.KindUnprocessable    // the request is well-formed but failed verification
	KindTooLarge         = base.KindTooLarge         // the request exceeds a size limit
	KindRateLimited      = base.KindRateLimited      // too many attempts; try again later
	KindNoSpace          = base.KindNoSpace          // the storage is full (below its reserve); nothing was written
	KindUnavailable      = base.KindUnavailable      // the service cannot serve now (its storage is unreachable or in doubt); try again later
	KindDisabled         = base.KindDisabled         // the key is disabled, or scheduled for destruction: it cannot be used until enabled again
	KindDestroyed        = base.KindDestroyed        // the key was destroyed: its key material is gone for good
	KindNone             = base.KindNone             // no error at all: what ErrorKind(nil) returns
)

// Error is the one error type of the service: a Kind, a message for the
// caller and the cause for the log (see base.Error for its fields).
type Error = base.Error

// Sentinels for errors.Is: an *Error matches the sentinel of its Kind.
var (
	ErrInternal         = base.ErrInternal
	ErrInvalid          = base.ErrInvalid
	ErrUnauthenticated  = base.ErrUnauthenticated
	ErrPermissionDenied = base.ErrPermissionDenied
	ErrNotFound         = base.ErrNotFound
	ErrConflict         = base.ErrConflict
	ErrLimit            = base.ErrLimit
	ErrUnprocessable    = base.ErrUnprocessable
	ErrTooLarge         = base.ErrTooLarge
	ErrRateLimited      = base.ErrRateLimited
	ErrNoSpace          = base.ErrNoSpace
	ErrUnavailable      = base.ErrUnavailable
	ErrDisabled         = base.ErrDisabled
	ErrDestroyed        = base.ErrDestroyed
)

// Errorf returns an Error of the given kind with a formatted message.
func Errorf(kind Kind, format string, args ...any) error { return base.Errorf(kind, format, args...) }

// AsError returns the first *Error in err's chain, or nil.
func AsError(err error) *Error { return base.AsError(err) }

// ErrorKind returns the kind of err: KindNone for nil, the Kind of the
// first *Error in its chain, or KindInternal for any other error.
func ErrorKind(err error) Kind { return base.ErrorKind(err) }

// ErrorMessage returns the message of err that is safe to show to a caller:
// the Message of the first *Error in its chain, or "internal error".
func ErrorMessage(err error) string { return base.ErrorMessage(err) }

// internalError wraps an unexpected failure (base.InternalError).
func internalError(doing string, err error) error { return base.InternalError(doing, err) }

// errNamedNotFound is the NotFound error of the what named name. It
// quotes no name shaped like a credential (LooksLikeSecret): a caller may
// have pasted one where a name goes, and errors reach logs.
func errNamedNotFound(what, name string) error {
	if _, last, _ := strings.Cut(name, "/"); LooksLikeSecret(name) || LooksLikeSecret(last) { // alias/NAME too
		return Errorf(KindNotFound, "%s not found (its name is not quoted: it is shaped like a credential)", what)
	}
	return Errorf(KindNotFound, "%s %q not found", what, name)
}

// ErrKeyUsage is the cause of the Invalid error of a held key asked to do
// what its type does not (encrypt with a signing key, sign with an HMAC
// key, an algorithm another type takes): errors.Is tells it from the
// other Invalid errors, as a protocol that answers it apart must.
var ErrKeyUsage = errors.New("the key's type does not do what was asked")

// unresolvedRing is the ring a record names for a ring that a caller
// named and that was not found: its name in lower case, or none when it
// is shaped like a credential (LooksLikeSecret), which the trail must not
// hold: no ring made since checkNewRingName has such a name, and the
// caller may have pasted a secret in its place. A ring found keeps its
// name in its records, whatever its shape.
func unresolvedRing(name string) string {
	if LooksLikeSecret(name) {
		return ""
	}
	return strings.ToLower(name)
}

// errBadLogin is the one answer to wrong credentials, whether the User
// exists or not.
var errBadLogin = Errorf(KindInvalid, "invalid username or password")

// errBadReset is the answer to a reset token that is unknown, used,
// replaced or expired.
var errBadReset = Errorf(KindInvalid, "invalid or expired reset token")
