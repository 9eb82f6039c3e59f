package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/ringkms/kms"
)

// kindStatus is the one table from kms error kinds to HTTP statuses. A kind
// missing here (a kind added to kms later) is a 500.
var kindStatus = map[kms.Kind]int{
	kms.KindInvalid:          http.StatusBadRequest,
	kms.KindUnauthenticated:  http.StatusUnauthorized,
	kms.KindPermissionDenied: http.StatusForbidden,
	kms.KindNotFound:         http.StatusNotFound,
	kms.KindConflict:         http.StatusBadRequest, // an existing name, a ring still in use
	kms.KindLimit:            http.StatusForbidden,  // a plan limit reached
	kms.KindUnprocessable:    http.StatusUnprocessableEntity,
	kms.KindTooLarge:         http.StatusRequestEntityTooLarge,
	kms.KindRateLimited:      http.StatusTooManyRequests,
	kms.KindNoSpace:          http.StatusInsufficientStorage,
	kms.KindUnavailable:      http.StatusServiceUnavailable,
	kms.KindDisabled:         http.StatusForbidden, // a disabled key or one scheduled for destruction (docs/API.md)
	kms.KindDestroyed:        http.StatusGone,
	kms.KindInternal:         http.StatusInternalServerError,
}

// errorBody is the body of every error answer. Errors, State and Results
// carry the documented exceptions (docs/API.md): per-field errors of user
// creation, the state of an invitation, the results of a password check.
type errorBody struct {
	Message string            `json:"message"`
	Code    string            `json:"code"`
	Errors  map[string]string `json:"errors,omitempty"`
	State   string            `json:"state,omitempty"`
	Results any               `json:"results,omitempty"`
}

// httpError is an outcome that exists only in HTTP, with no kms kind: a
// method not allowed on a route, a service that cannot serve. Err, when
// set, goes to the log.
type httpError struct {
	status  int
	code    string
	message string
	err     error
}

func (e *httpError) Error() string {
	if e.err != nil {
		return e.message + ": " + e.err.Error()
	}
	return e.message
}

func (e *httpError) Unwrap() error { return e.err }

// statusOf returns the status and the code of err.
func statusOf(err error) (int, string) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status, he.code
	}
	kind := kms.ErrorKind(err)
	status, ok := kindStatus[kind]
	if !ok {
		return http.StatusInternalServerError, kms.KindInternal.String()
	}
	return status, kind.String()
}

// messageOf returns the message of err that is safe to show the caller.
// A 500 is always "internal error": its detail goes to the log only. The
// other 5xx (a full disk, a service in doubt) say what is wrong in words
// written for the caller; their detail goes to the log too.
func messageOf(err error, status int) string {
	var he *httpError
	if errors.As(err, &he) {
		return he.message
	}
	if status == http.StatusInternalServerError {
		return "internal error"
	}
	return kms.ErrorMessage(err)
}

// writeError is the one error writer: {"message": ..., "code": ...} with
// the status of the error's kind. The error itself goes to the request's
// log line, with the request ID.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusOf(err)
	noteError(r, err, code)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ringkms"`)
	}
	if e := kms.AsError(err); e != nil && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	body := errorBody{Message: messageOf(err, status), Code: code}
	if e := kms.AsError(err); e != nil && status < 500 {
		body.Errors, body.State, body.Results = e.Fields, e.State, e.Details
	}
	a.writeJSON(w, r, status, body)
}

// jsonAppender is an answer that encodes itself without reflection, as
// json.Marshal would (the answers of encrypt and decrypt).
type jsonAppender interface {
	AppendJSON([]byte) ([]byte, error)
}

// writeJSON is the one JSON writer of every answer.
func (a *api) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	c, cached := v.(cacheable)
	if cached {
		v = c.body
	}
	var b []byte
	var err error
	if ap, ok := v.(jsonAppender); ok {
		buf := getBuf()
		defer putBuf(buf)
		if b, err = ap.AppendJSON(buf.AvailableBuffer()); err == nil {
			buf.Write(b) // in place; a first answer that outgrew buf grows it
			b = buf.Bytes()
		}
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		cached = false
		// Only a programming error gets here (an unencodable type).
		err = fmt.Errorf("encode answer: %w", err)
		noteError(r, err, kms.KindInternal.String())
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Message: "internal error", Code: kms.KindInternal.String()})
	}
	// Answers carry key material and are per caller: no cache keeps them.
	// The values share one array (each its own slice, so that
	// appending to one cannot touch another); the names are canonical.
	// The Content-Length, set last, shares the array too.
	v4 := []string{"application/json; charset=utf-8", "nosniff", "no-store", ""}
	h := w.Header()
	h["Content-Type"] = v4[0:1:1]
	h["X-Content-Type-Options"] = v4[1:2:2]
	h["Cache-Control"] = v4[2:3:3]
	if cached && c.notModified(h, r, b) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	b = append(b, '\n')
	v4[3] = strconv.Itoa(len(b))
	h["Content-Length"] = v4[3:4:4]
	w.WriteHeader(status)
	w.Write(b) // the server copies it, or writes it, before returning
}

// notFound answers a path that no route serves. The path it echoes is
// redacted (redactPath): it may be a near miss of a route that names a
// key by its secret.
func (a *api) notFound(w http.ResponseWriter, r *http.Request) {
	a.writeError(w, r, kms.Errorf(kms.KindNotFound, "no endpoint %s %s", r.Method, redactPath(r.URL.Path)))
}

// methodNotAllowed answers a path served by routes of other methods.
// httprouter has set the Allow header, with OPTIONS in it even though
// OPTIONS is not answered; it is taken out.
func (a *api) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range strings.Split(w.Header().Get("Allow"), ",") {
		if m = strings.TrimSpace(m); m != "" && m != http.MethodOptions {
			allow = append(allow, m)
		}
	}
	list := strings.Join(allow, ", ")
	w.Header().Set("Allow", list)
	a.writeError(w, r, &httpError{
		status:  http.StatusMethodNotAllowed,
		code:    "method_not_allowed",
		message: fmt.Sprintf("method %s is not allowed on this endpoint; allowed: %s", r.Method, list),
	})
}

// panicked answers a handler that panicked: a 500 in the same shape, and
// the panic with its stack to the log.
func (a *api) panicked(w http.ResponseWriter, r *http.Request, v any) {
	if v == http.ErrAbortHandler {
		panic(v) // net/http's way to abort a response; it logs nothing
	}
	err := fmt.Errorf("panic: %v\n%s", v, debug.Stack())
	if st := stateFrom(r.Context()); st != nil && st.rec.wroteHeader {
		noteError(r, err, kms.KindInternal.String())
		return // too late for an error answer
	}
	a.writeError(w, r, err)
}
