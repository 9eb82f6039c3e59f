package httpedge

import (
	"context"
	"net/http"
)

// reqState is what the inner layers tell the request's log line. It lives
// in the request context, set up by Log.
type reqState struct {
	id         string
	rec        recorder // what the handler wrote, to the writer Log was given
	route      string   // matched route pattern
	secretPath bool
	principal  string // ID of the authenticated caller
	err        error  // the error answered, for the log
	code       string // its code
}

type stateKey struct{}

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateKey{}).(*reqState)
	return st
}

// RequestID is the ID of r, as its log line and its RequestIDHeader
// carry it ("" outside Log).
func RequestID(r *http.Request) string {
	if st := stateFrom(r.Context()); st != nil {
		return st.id
	}
	return ""
}

// NoteError keeps the error answered to r, and its code ("" for none),
// for its log line.
func NoteError(r *http.Request, err error, code string) {
	if st := stateFrom(r.Context()); st != nil {
		st.err, st.code = err, code
	}
}

// SetRoute names the route of r, for its log line and the request
// observer, in place of the pattern its router matched: a protocol whose
// one path serves many operations names the operation (from a set of
// its own, so that the names stay few).
func SetRoute(r *http.Request, route string) {
	if st := stateFrom(r.Context()); st != nil {
		st.route = route
	}
}

// rawWriter returns the writer the server handed to Log, so that
// http.MaxBytesReader can tell the server to close the connection.
func rawWriter(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if st := stateFrom(r.Context()); st != nil {
		return st.rec.ResponseWriter
	}
	return w
}

// recorder counts what a handler writes.
type recorder struct {
	http.ResponseWriter
	status      int
	size        int64
	wroteHeader bool
}

func (w *recorder) WriteHeader(status int) {
	if !w.wroteHeader && status >= 200 {
		w.status, w.wroteHeader = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.size += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
