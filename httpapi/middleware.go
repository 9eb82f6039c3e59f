package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/reqlog"
)

// RequestIDHeader is the response header that carries the request ID,
// which every log line of the request carries too.
const RequestIDHeader = "X-Request-Id"

// reqState is what the inner layers tell the request log line. It lives in
// the request context, set up by logRequests.
type reqState struct {
	rec        recorder            // what the handler wrote
	raw        http.ResponseWriter // the writer logRequests was given
	route      string              // matched route pattern
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

// noteError keeps the error answered to r for its log line.
func noteError(r *http.Request, err error, code string) {
	if st := stateFrom(r.Context()); st != nil {
		st.err, st.code = err, code
	}
}

// rawWriter returns the writer the server handed to logRequests, so that
// http.MaxBytesReader can tell the server to close the connection.
func rawWriter(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if st := stateFrom(r.Context()); st != nil && st.raw != nil {
		return st.raw
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

// newRequestID returns a new request ID (reqlog.NewID).
func newRequestID() string { return reqlog.NewID() }

// logRequests gives every request an ID (the X-Request-Id response header
// and the req_id field of its log line) and logs one line when the request
// is done (reqlog.Write): method, path, status, size, duration and
// principal ID; for a 5xx, the full error, at level warn for a 503 (an
// outage ridden out) and error for the others. Neither headers
// nor bodies are logged; the path is logged redacted (redactPath), and not
// at all for a route marked secretPath, which is logged by its pattern
// only. Nothing else logs during a request, so no per-request logger is
// made.
func (a *api) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := newRequestID()
		w.Header()[RequestIDHeader] = []string{id} // canonical already
		st := &reqState{rec: recorder{ResponseWriter: w, status: http.StatusOK}, raw: w}
		rec := &st.rec
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
		if a.requests != nil {
			a.requests.ObserveRequest(r.Method, st.route, rec.status, time.Since(start))
		}
		l := reqlog.Line{ID: id, Method: r.Method, Route: st.route, Status: rec.status, Size: rec.size,
			Start: start, Principal: st.principal, Code: st.code, Err: st.err}
		if !st.secretPath {
			l.Path = redactPath(r.URL.Path)
		}
		reqlog.Write(&a.log, l)
	})
}

// redactPath returns path with what may be a secret in it hidden
// (reqlog.RedactPath, with kms.LooksLikeSecret).
func redactPath(path string) string { return reqlog.RedactPath(path, kms.LooksLikeSecret) }

// requireBearer is the bearer middleware (docs/API.md), which serve runs
// for every route that is not public: the request must carry exactly one
// "Authorization: Bearer <secret>" header whose secret the Service
// accepts; otherwise the answer is 401. It returns the caller's Principal,
// which serve puts in the request context for the Service.
func (a *api) requireBearer(r *http.Request) (*kms.Principal, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return nil, kms.Errorf(kms.KindUnauthenticated, "missing credential: send Authorization: Bearer <API key>")
	case 1:
	default:
		return nil, kms.Errorf(kms.KindUnauthenticated, "send one Authorization header, not %d", len(values))
	}
	secret, ok := bearerToken(values[0])
	if !ok {
		return nil, kms.Errorf(kms.KindUnauthenticated, "malformed Authorization header: use Bearer <API key>")
	}
	return a.svc.Authenticate(r.Context(), secret)
}

// bearerToken returns the token of an Authorization header value of the
// form "Bearer <token>": the scheme compared case-insensitively (RFC 7235),
// then exactly one space and a non-empty token.
func bearerToken(value string) (string, bool) {
	const scheme = "Bearer"
	if len(value) < len(scheme)+2 || !strings.EqualFold(value[:len(scheme)], scheme) || value[len(scheme)] != ' ' {
		return "", false
	}
	token := value[len(scheme)+1:]
	if token[0] == ' ' || token[0] == '\t' {
		return "", false
	}
	return token, true
}
