package httpedge

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/ringkms/kms/internal/base"
)

// StatusError is an outcome that exists only in HTTP, with no kind of the
// domain: a method not allowed on a route, a path not served, a service
// that cannot serve. Code is the protocol's code for it, when it has
// codes; Err, when set, goes to the log.
type StatusError struct {
	Status  int
	Code    string
	Message string
	Err     error
}

func (e *StatusError) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *StatusError) Unwrap() error { return e.Err }

// AsStatusError returns the first *StatusError in err's chain, or nil.
func AsStatusError(err error) *StatusError {
	var se *StatusError
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// Message returns the message of err, answered with status, that is safe
// to show the caller: a StatusError's; for a 500, always "internal error"
// (its detail goes to the log only); else the domain's message, which the
// other 5xx (a full disk, a service in doubt) write for the caller too.
func Message(err error, status int) string {
	if se := AsStatusError(err); se != nil {
		return se.Message
	}
	if status == http.StatusInternalServerError {
		return "internal error"
	}
	return base.ErrorMessage(err)
}

// SetRetryAfter sets the Retry-After header of an answer to err when err
// says when to try again (a rate limit's refusal), in whole seconds,
// rounded up.
func SetRetryAfter(h http.Header, err error) {
	if e := base.AsError(err); e != nil && e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
}

// CheckLength refuses, before it is read, a body whose Content-Length
// is past the cap (MaxBodyBytes): an error of kind TooLarge.
func (e *Edge[P]) CheckLength(r *http.Request) error {
	if r.ContentLength > e.cfg.MaxBodyBytes {
		return base.Errorf(base.KindTooLarge, "request body is larger than %d bytes", e.cfg.MaxBodyBytes)
	}
	return nil
}

// ReadBody reads a request's body into buf. A body past the cap the
// pipeline put on it is an error of kind TooLarge, any other failure to
// read it one of kind Invalid.
func ReadBody(buf *bytes.Buffer, body io.Reader) error {
	if _, err := buf.ReadFrom(body); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return base.Errorf(base.KindTooLarge, "request body is larger than %d bytes", tooLarge.Limit)
		}
		return base.Errorf(base.KindInvalid, "cannot read the request body: %v", err)
	}
	return nil
}
