package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
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

// statusOf returns the status and the code of err: an
// httpedge.StatusError's own, else its kind's (kindStatus).
func statusOf(err error) (int, string) {
	if se := httpedge.AsStatusError(err); se != nil {
		return se.Status, se.Code
	}
	kind := kms.ErrorKind(err)
	status, ok := kindStatus[kind]
	if !ok {
		return http.StatusInternalServerError, kms.KindInternal.String()
	}
	return status, kind.String()
}

// writeError is the one error writer: {"message": ..., "code": ...} with
// the status of the error's kind. The error itself goes to the request's
// log line, with the request ID.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusOf(err)
	httpedge.NoteError(r, err, code)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ringkms"`)
	}
	httpedge.SetRetryAfter(w.Header(), err)
	body := errorBody{Message: httpedge.Message(err, status), Code: code}
	if e := kms.AsError(err); e != nil && status < 500 {
		body.Errors, body.State, body.Results = e.Fields, e.State, e.Details
	}
	answers.Write(w, r, status, body)
}

// answers is the one JSON writer of every answer. An answer that cannot
// be encoded is a 500 of the one error shape.
var answers = &httpedge.JSONWriter{
	ContentType:  "application/json; charset=utf-8",
	Internal:     errorBody{Message: "internal error", Code: kms.KindInternal.String()},
	InternalCode: kms.KindInternal.String(),
}

// notFound answers a path that no route serves. The path it echoes is
// redacted (httpedge's RedactPath): it may be a near miss of a route that names a
// key by its secret.
func (a *api) notFound(w http.ResponseWriter, r *http.Request) {
	a.writeError(w, r, kms.Errorf(kms.KindNotFound, "no endpoint %s %s", r.Method, a.edge.RedactPath(r.URL.Path)))
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
	a.writeError(w, r, &httpedge.StatusError{
		Status:  http.StatusMethodNotAllowed,
		Code:    "method_not_allowed",
		Message: fmt.Sprintf("method %s is not allowed on this endpoint; allowed: %s", r.Method, list),
	})
}
