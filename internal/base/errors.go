package base

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies an Error. The set is closed and only ever grows at the
// end; callers branch on it with errors.Is against the sentinels below, or
// with errors.As and Error.Kind.
type Kind uint8

const (
	KindInternal         Kind = iota // an unexpected failure; details go to the log, not the caller
	KindInvalid                      // the request is malformed or breaks a rule
	KindUnauthenticated              // no credential, or one that is wrong, expired, revoked or inactive
	KindPermissionDenied             // the credential lacks the flag the operation needs
	KindNotFound                     // the named resource does not exist
	KindConflict                     // the resource already exists, or is still in use
	KindLimit                        // a plan limit was reached
	KindUnprocessable                // the request is well-formed but failed verification
	KindTooLarge                     // the request exceeds a size limit
	KindRateLimited                  // too many attempts; try again later
	KindNoSpace                      // the storage is full (below its reserve); nothing was written
	KindUnavailable                  // the service cannot serve now (its storage is unreachable or in doubt); try again later
	KindDisabled                     // the key is disabled, or scheduled for destruction: it cannot be used until enabled again
	KindDestroyed                    // the key was destroyed: its key material is gone for good
	KindNone                         // no error at all: what ErrorKind(nil) returns
)

var kindNames = [...]string{
	KindInternal:         "internal",
	KindInvalid:          "invalid",
	KindUnauthenticated:  "unauthenticated",
	KindPermissionDenied: "permission_denied",
	KindNotFound:         "not_found",
	KindConflict:         "conflict",
	KindLimit:            "limit",
	KindUnprocessable:    "unprocessable",
	KindTooLarge:         "too_large",
	KindRateLimited:      "rate_limited",
	KindNoSpace:          "insufficient_storage",
	KindUnavailable:      "unavailable",
	KindDisabled:         "disabled",
	KindDestroyed:        "destroyed",
	KindNone:             "none",
}

// String returns the stable, lowercase code of the kind, as it appears in
// the "code" member of an HTTP error body.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Error is the one error type of ringkms. Message is safe to show to the
// caller; Err, when set, is the underlying cause and is for logs only.
type Error struct {
	Kind    Kind
	Message string
	Err     error

	// Fields, when set, gives a message for each request field at fault,
	// keyed by the field's JSON name (HTTP: the "errors" member).
	Fields map[string]string
	// State, when set, is the machine-readable state of a flow, such as
	// "expired" for an invitation (HTTP: the "state" member).
	State string
	// Details, when set, is structured detail safe to show the caller,
	// such as a PasswordCheck (HTTP: the "results" member).
	Details any
	// RetryAfter, when set, is when the caller may try again (a rate
	// limit: HTTP's Retry-After header, in whole seconds).
	RetryAfter time.Duration

	sentinel bool
}

// Error returns the message prefixed with "kms: ", and the cause of the
// kinds whose cause is the server's (internal, a full disk, an unreachable
// store): it goes to logs, never to callers, who get Message alone.
func (e *Error) Error() string {
	switch e.Kind {
	case KindInternal, KindNoSpace, KindUnavailable:
		if e.Err != nil {
			return "kms: " + e.Message + ": " + e.Err.Error()
		}
	}
	return "kms: " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's kind, so that
// errors.Is(err, kms.ErrNotFound) holds for every not-found error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.sentinel && t.Kind == e.Kind
}

// Sentinels, one per kind, for errors.Is.
var (
	ErrInternal         = &Error{Kind: KindInternal, Message: "internal error", sentinel: true}
	ErrInvalid          = &Error{Kind: KindInvalid, Message: "invalid request", sentinel: true}
	ErrUnauthenticated  = &Error{Kind: KindUnauthenticated, Message: "unauthenticated", sentinel: true}
	ErrPermissionDenied = &Error{Kind: KindPermissionDenied, Message: "permission denied", sentinel: true}
	ErrNotFound         = &Error{Kind: KindNotFound, Message: "not found", sentinel: true}
	ErrConflict         = &Error{Kind: KindConflict, Message: "conflict", sentinel: true}
	ErrLimit            = &Error{Kind: KindLimit, Message: "limit reached", sentinel: true}
	ErrUnprocessable    = &Error{Kind: KindUnprocessable, Message: "unprocessable", sentinel: true}
	ErrTooLarge         = &Error{Kind: KindTooLarge, Message: "too large", sentinel: true}
	ErrRateLimited      = &Error{Kind: KindRateLimited, Message: "too many attempts", sentinel: true}
	ErrNoSpace          = &Error{Kind: KindNoSpace, Message: "insufficient storage", sentinel: true}
	ErrUnavailable      = &Error{Kind: KindUnavailable, Message: "service unavailable", sentinel: true}
	ErrDisabled         = &Error{Kind: KindDisabled, Message: "key disabled", sentinel: true}
	ErrDestroyed        = &Error{Kind: KindDestroyed, Message: "key destroyed", sentinel: true}
)

// Errorf returns an Error of the given kind with a formatted message.
func Errorf(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// InternalError wraps an unexpected failure. Its message says what was
// being done; the cause stays in Err for the log.
func InternalError(doing string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Kind: KindInternal, Message: doing, Err: err}
}

// AsError returns the first *Error in err's chain, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// ErrorKind returns the kind of err: KindNone for nil, the Kind of the
// first *Error in its chain, or KindInternal for any other error.
func ErrorKind(err error) Kind {
	if err == nil {
		return KindNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// ErrorMessage returns the message of err that is safe to show to a caller:
// the Message of the first *Error in its chain, or "internal error".
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Kind != KindInternal {
		return e.Message
	}
	return "internal error"
}
