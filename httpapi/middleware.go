package httpapi

import (
	"context"
	"encoding/base32"
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/ringkms/kms"
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

// idEncoding is base32hex (RFC 4648 section 7) in lower case, unpadded.
var idEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// newRequestID returns a random request ID of 20 characters. The ID
// names a request in the logs and is no secret: it comes from the
// runtime's generator (ChaCha8, seeded by the system), which costs no
// system call, unlike crypto/rand.
func newRequestID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	var id [20]byte
	idEncoding.Encode(id[:], b[:])
	return string(id[:])
}

// logRequests gives every request an ID (the X-Request-Id response header
// and the req_id field of its log line) and logs one line when the request
// is done: method, path, status, size, duration and principal ID; for a
// 5xx, the full error at level error. Neither headers nor bodies are
// logged; the path is logged redacted (redactPath), and not at all for a
// route marked secretPath, which is logged by its pattern only. Nothing
// else logs during a request, so no per-request logger is made.
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

		ev := a.log.Info()
		if rec.status >= 500 {
			ev = a.log.Error()
		}
		if !ev.Enabled() {
			return
		}
		ev = ev.Str("req_id", id).Str("method", r.Method)
		if st.route != "" {
			ev = ev.Str("route", st.route)
		}
		if !st.secretPath {
			ev = ev.Str("path", redactPath(r.URL.Path))
		}
		ev = ev.Int("status", rec.status).Int64("size", rec.size).Dur("duration", time.Since(start))
		if st.principal != "" {
			ev = ev.Str("principal", st.principal)
		}
		if st.code != "" {
			ev = ev.Str("code", st.code)
		}
		if rec.status >= 500 {
			ev = ev.Err(st.err)
		}
		ev.Msg("request")
	})
}

// redacted takes the place of what redactPath hides.
const redacted = "<redacted>"

// redactPath returns path with what may be a secret in it replaced by
// "<redacted>", whatever route the path is near: every segment after one
// that names API keys (apikey, apikeyid, apikeys...: DELETE
// /auth/apikey/{apikey} names a key by its secret, and a client may get
// the method or the path slightly wrong), and every segment shaped like a
// secret (kms.LooksLikeSecret). A path with nothing to hide comes back as
// it is, without allocating.
func redactPath(path string) string {
	var out []string // the segments, once one is redacted
	after := false   // past a segment that names API keys
	rest := path
	for n := 0; ; n++ {
		seg, tail, more := strings.Cut(rest, "/")
		if after || kms.LooksLikeSecret(seg) {
			if out == nil {
				out = strings.Split(path, "/") // the same segments
			}
			out[n] = redacted
		}
		if len(seg) >= len("apikey") && strings.EqualFold(seg[:len("apikey")], "apikey") {
			after = true
		}
		if !more {
			break
		}
		rest = tail
	}
	if out == nil {
		return path
	}
	return strings.Join(out, "/")
}

// requireBearer is the bearer middleware of SPEC.md 5.2, which serve runs
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
