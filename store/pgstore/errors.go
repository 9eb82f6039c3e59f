package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ringkms/kms"
)

// Errors that carry no detail are allocated once.
var (
	errKeyNotFound  = kms.Errorf(kms.KindNotFound, "key not found")
	errEmptyKey     = kms.Errorf(kms.KindInvalid, "empty key")
	errReadOnly     = kms.Errorf(kms.KindInvalid, "write in a read-only transaction")
	errTxnEnded     = kms.Errorf(kms.KindInvalid, "transaction used after it ended")
	errKeyTooLarge  = kms.Errorf(kms.KindTooLarge, "key too large")
	errValTooLarge  = kms.Errorf(kms.KindTooLarge, "value too large")
	errStartOutside = kms.Errorf(kms.KindInvalid, "scan start does not begin with the scan prefix")
	errClosed       = kms.Errorf(kms.KindInternal, "store is closed")
	errConflict     = kms.Errorf(kms.KindConflict, "transaction conflict")
)

// readOnlyMessage is the message of every error that says the database
// does not take writes.
const readOnlyMessage = "service unavailable: the database is read-only (a standby, or a primary that was demoted); kmsd waits for a primary"

// isReadOnly reports whether err is what a server that takes no writes
// answers: a write in a read-only transaction (25006: on a hot standby,
// in recovery, or with default_transaction_read_only on, as a demoted
// primary may be left), or a hot standby's refusal of a SERIALIZABLE or
// read-write transaction (0A000, "cannot use serializable mode in a hot
// standby", "cannot set transaction read-write mode during recovery").
// The texts are PostgreSQL's in English; in another lc_messages, the
// refusal of the BEGIN of an Update is recognised by where it occurred
// (errStandbyBegin).
func isReadOnly(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case codeReadOnly:
		return true
	case codeNotSupported:
		var sb *standbyBegin
		return errors.As(err, &sb) || strings.Contains(pe.Message, "hot standby") ||
			strings.Contains(pe.Message, "during recovery")
	}
	return false
}

// standbyBegin is the error of a BEGIN ISOLATION LEVEL SERIALIZABLE that
// the server refused as unsupported (0A000): every server kmsd runs on
// supports it but a hot standby, whatever language its messages are in.
type standbyBegin struct{ err error }

func (e *standbyBegin) Error() string { return e.err.Error() }
func (e *standbyBegin) Unwrap() error { return e.err }

// beginFailed marks err, the error of the BEGIN of an Update, for
// isReadOnly when it is a 0A000.
func beginFailed(err error) error {
	if sqlState(err) == codeNotSupported {
		return &standbyBegin{err}
	}
	return err
}

// SQLSTATE codes the Store acts on.
const (
	codeSerialization  = "40001" // serialization_failure
	codeDeadlock       = "40P01" // deadlock_detected
	codeDiskFull       = "53100" // disk_full
	codeTooManyConns   = "53300" // too_many_connections
	codeUniqueKey      = "23505" // unique_violation
	codeUndefinedTable = "42P01" // undefined_table
	codeReadOnly       = "25006" // read_only_sql_transaction: a standby, or default_transaction_read_only
	codeNotSupported   = "0A000" // feature_not_supported: SERIALIZABLE, or read-write, on a standby
	codeAdminShutdown  = "57P01"
	codeCrashShutdown  = "57P02"
	codeCannotConnect  = "57P03"
	codeIdleInTxn      = "25P03" // idle_in_transaction_session_timeout: the server ended the session
	codeIdleSession    = "57P05" // idle_session_timeout: the server ended the session
	codeLockTimeout    = "55P03" // lock_not_available: lock_timeout
	codeQueryCanceled  = "57014" // query_canceled: statement_timeout
	classConnection    = "08"    // connection_exception
	classLimit         = "54"    // program_limit_exceeded (54000: a value or row too large)
)

// sqlState returns the SQLSTATE of the server's error in err's chain, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isConflict reports whether err is a serialization failure or a deadlock:
// the transaction was rolled back and may be run again.
func isConflict(err error) bool {
	c := sqlState(err)
	return c == codeSerialization || c == codeDeadlock
}

// isLostConnection reports whether err says the database could not be
// reached or the connection to it broke: refused, reset, closed, timed out,
// or the server shutting down or refusing connections.
func isLostConnection(err error) bool {
	if err == nil {
		return false
	}
	if c := sqlState(err); c != "" {
		return strings.HasPrefix(c, classConnection) || c == codeAdminShutdown || c == codeCrashShutdown ||
			c == codeCannotConnect || c == codeTooManyConns || c == codeIdleInTxn || c == codeIdleSession
	}
	var (
		netErr  net.Error
		connErr *pgconn.ConnectError
	)
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || // a round trip's own timeout, not the caller's
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// translate turns an error of pgx or of the database into a *kms.Error;
// doing says what failed. It returns ctx.Err() unchanged when ctx is done
// (pgx reports a canceled query as its own error), and nil for nil. The
// cause stays in Err, with the password of the Store's URL masked.
func (s *Store) translate(ctx context.Context, doing string, err error) error {
	if err == nil {
		return nil
	}
	if ctx != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	var ke *kms.Error
	if errors.As(err, &ke) {
		return err
	}
	cause := s.redact(err)
	code := sqlState(err)
	switch {
	case code == codeSerialization || code == codeDeadlock:
		return &kms.Error{Kind: kms.KindConflict, Message: "transaction conflict", Err: cause}
	case code == codeDiskFull:
		s.health.noSpace()
		return &kms.Error{Kind: kms.KindNoSpace, Message: "insufficient storage: the database's disk is full", Err: cause}
	case strings.HasPrefix(code, classLimit):
		return &kms.Error{Kind: kms.KindTooLarge, Message: doing + ": too large for the database", Err: cause}
	case isReadOnly(err):
		s.health.readOnly()
		return &kms.Error{Kind: kms.KindUnavailable, Message: readOnlyMessage, Err: cause}
	case code == codeLockTimeout:
		return &kms.Error{Kind: kms.KindUnavailable, Message: "service unavailable: the database is busy (a lock was not granted in time)", Err: cause}
	case code == codeQueryCanceled:
		return &kms.Error{Kind: kms.KindUnavailable, Message: "service unavailable: the database did not answer in time", Err: cause}
	case isLostConnection(err):
		s.health.lost()
		if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
			s.health.silence()
		}
		return &kms.Error{Kind: kms.KindUnavailable, Message: "service unavailable: the database cannot be reached", Err: cause}
	default:
		return &kms.Error{Kind: kms.KindInternal, Message: doing, Err: cause}
	}
}

// redact returns err with the password of the Store's URL masked in its
// text, should any layer have put it there. The chain stays as it was for
// errors.Is and errors.As.
func (s *Store) redact(err error) error {
	if s.password == "" || !strings.Contains(err.Error(), s.password) {
		return err
	}
	return &redacted{err: err, secrets: []string{s.password}}
}

// redacted is an error whose text has secrets masked.
type redacted struct {
	err     error
	secrets []string
}

func (r *redacted) Error() string {
	msg := r.err.Error()
	for _, s := range r.secrets {
		msg = strings.ReplaceAll(msg, s, "*****")
	}
	return msg
}

func (r *redacted) Unwrap() error { return r.err }
