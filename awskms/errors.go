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
	msg := kms.ErrorMessage(err)
	switch kms.ErrorKind(err) {
	case kms.KindInvalid:
		return fail("ValidationException", msg)
	case kms.KindTooLarge:
		return fail("ValidationException", msg)
	case kms.KindUnauthenticated:
		return fail("UnrecognizedClientException", "The security token included in the request is invalid. "+msg)
	case kms.KindPermissionDenied:
		return fail("AccessDeniedException", msg)
	case kms.KindNotFound:
		return fail("NotFoundException", msg)
	case kms.KindConflict:
		return fail("AlreadyExistsException", msg)
	case kms.KindLimit:
		return fail("LimitExceededException", msg)
	case kms.KindUnprocessable:
		return fail("InvalidCiphertextException", msg)
	case kms.KindRateLimited:
		return fail("ThrottlingException", msg)
	case kms.KindDisabled:
		return fail("DisabledException", msg)
	case kms.KindDestroyed:
		return fail("KMSInvalidStateException", msg)
	case kms.KindNoSpace:
		return &awsError{status: http.StatusInternalServerError, typ: "KMSInternalException", message: msg}
	case kms.KindUnavailable:
		return &awsError{status: http.StatusServiceUnavailable, typ: "DependencyTimeoutException", message: msg}
	}
	return &awsError{status: http.StatusInternalServerError, typ: "KMSInternalException", message: "internal error"}
}

// writeError answers err in AWS's shape, noted for the request's log line.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := exception(err)
	httpedge.NoteError(r, err, ae.typ)
	httpedge.SetRetryAfter(w.Header(), err)
	writeJSON(w, r, ae.status, map[string]string{"__type": ae.typ, "message": ae.message})
}
