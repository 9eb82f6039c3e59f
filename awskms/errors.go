package awskms

import (
	"errors"
	"net/http"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
	"github.com/ringkms/kms/internal/sigv4"
)

// awsError is an answer in AWS's error shape.
type awsError struct {
	status  int
	typ     string // __type: the exception's name
	message string
}

func (e *awsError) Error() string { return e.typ + ": " + e.message }

func fail(typ, message string) *awsError {
	return &awsError{status: http.StatusBadRequest, typ: typ, message: message}
}

// exception is err as AWS answers it: a sigv4 refusal by its kind, an
// error of the service by its kind.
func exception(err error) *awsError {
	var ae *awsError
	if errors.As(err, &ae) {
		return ae
	}
	var se *sigv4.Error
	if errors.As(err, &se) {
		return fail(string(se.Kind), se.Message)
	}
	kind, state := kms.ErrorKind(err), ""
	if e := kms.AsError(err); e != nil {
		state = e.State
	}
	typ, ok := exceptions[kind]
	switch {
	case !ok:
		return &awsError{status: http.StatusInternalServerError, typ: "KMSInternalException", message: "internal error"}
	case kind == kms.KindNoSpace:
		return &awsError{status: http.StatusInternalServerError, typ: typ, message: kms.ErrorMessage(err)}
	case kind == kms.KindUnavailable:
		return &awsError{status: http.StatusServiceUnavailable, typ: typ, message: kms.ErrorMessage(err)}
	case errors.Is(err, kms.ErrKeyUsage):
		// A key asked for what its type does not do, or an algorithm
		// another type takes.
		return fail("InvalidKeyUsageException", kms.ErrorMessage(err))
	case kind == kms.KindDisabled && state == kms.HeldKeyPendingDeletion, kind == kms.KindConflict && state != "":
		// A use of a key pending deletion, or a change its state does
		// not allow.
		return fail("KMSInvalidStateException", kms.ErrorMessage(err))
	case kind == kms.KindUnauthenticated:
		return fail(typ, "The security token included in the request is invalid. "+kms.ErrorMessage(err))
	}
	return fail(typ, kms.ErrorMessage(err))
}

// exceptions are AWS's exceptions for the kinds of the service's errors.
var exceptions = map[kms.Kind]string{
	kms.KindInvalid: "ValidationException", kms.KindTooLarge: "ValidationException",
	kms.KindUnauthenticated: "UnrecognizedClientException", kms.KindPermissionDenied: "AccessDeniedException",
	kms.KindNotFound: "NotFoundException", kms.KindConflict: "AlreadyExistsException",
	kms.KindLimit: "LimitExceededException", kms.KindUnprocessable: "InvalidCiphertextException",
	kms.KindRateLimited: "ThrottlingException", kms.KindDisabled: "DisabledException",
	kms.KindDestroyed: "KMSInvalidStateException", kms.KindNoSpace: "KMSInternalException",
	kms.KindUnavailable: "DependencyTimeoutException",
}

// writeError answers err in AWS's shape, noted for the request's log line.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := exception(err)
	httpedge.NoteError(r, err, ae.typ)
	httpedge.SetRetryAfter(w.Header(), err)
	answers.Write(w, r, ae.status, map[string]string{"__type": ae.typ, "message": ae.message})
}
