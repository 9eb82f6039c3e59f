// Package httpedge is the request pipeline of the service's HTTP
// interfaces (httpapi, transit's Vault interface, and the protocols to
// come): the router and its hooks, the request's ID and its one log line
// (internal/reqlog), the client's address (internal/clientaddr), the rate
// limits of a request and its credential, the body cap, and the handling
// of a panic. A protocol brings its route table and its answers, in its
// own shapes; what the pipeline needs of the domain (admit a request,
// turn a credential into a principal, tell a secret in a path) comes as
// function values (Domain), so that the package imports nothing of it.
package httpedge

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/clientaddr"
	"github.com/ringkms/kms/internal/reqlog"
)

// RequestIDHeader is the response header that carries the request ID,
// which the request's log line carries too.
const RequestIDHeader = "X-Request-Id"

// RequestObserver receives a measurement of each request. It is called on
// the request's goroutine after the answer is written, so it must be
// quick.
type RequestObserver interface {
	ObserveRequest(method, route string, status int, d time.Duration)
}

// CredentialObserver may be implemented by a RequestObserver as well, to
// be told of each request whose credential was refused before it reached
// the domain: a missing or malformed credential, or one the domain did
// not accept. The domain records no activity for these (it cannot tell
// whom they came from), so an observer that counts refusals from the
// activity records would miss them. ObserveRefusedCredential is called on
// the request's goroutine, before the answer is written, so it must be
// quick.
type CredentialObserver interface {
	ObserveRefusedCredential()
}

// Domain is what the pipeline needs of the domain, for callers of type P
// (a *kms.Principal): each a function the domain has as it is.
type Domain[P comparable] struct {
	// WithClientAddr returns ctx carrying the client's address, which
	// the rate limits and login throttles count (kms.WithClientAddr).
	WithClientAddr func(ctx context.Context, addr string) context.Context
	// Admit admits one call: of the client address in ctx when p is the
	// zero P, else of p's credential and Account (kms.Service.Admit).
	Admit func(ctx context.Context, p P) error
	// Authenticate returns the caller whose credential secret is; a
	// secret it refuses is an error of kind Unauthenticated
	// (kms.Service.Authenticate).
	Authenticate func(ctx context.Context, secret string) (P, error)
	// WithPrincipal returns ctx carrying the caller (kms.WithPrincipal).
	WithPrincipal func(ctx context.Context, p P) context.Context
	// PrincipalID is the caller's ID, for the log line.
	PrincipalID func(p P) string
	// AnswerNotice returns ctx for a call that leaves work behind its
	// answer, and sent, called once the answer is on the connection
	// (kms.WithAnswerNotice). Needed by LeavesWork routes only.
	AnswerNotice func(ctx context.Context) (context.Context, func())
	// Secret reports whether a path segment may be a secret, which the
	// log line and the answers then hide (kms.LooksLikeSecret).
	Secret func(segment string) bool
}

// Config is a protocol's pipeline.
type Config[P comparable] struct {
	Domain Domain[P]

	// Prefix starts the path of every route (transit's /v1/<mount>); the
	// log line and the RequestObserver get it in the route's pattern.
	Prefix string

	// Logger receives one line per request (reqlog.Write); never a
	// credential or a body. Nil means silent.
	Logger *zerolog.Logger

	// MaxBodyBytes caps the body of a request; zero or less means
	// DefaultMaxBodyBytes, the protocol's default.
	MaxBodyBytes, DefaultMaxBodyBytes int64

	// ClientIPHeader and ClientIPHops say where the client's address
	// comes from behind trusted reverse proxies (clientaddr.Of): the
	// header's name, empty for the connection's address, and the number
	// of proxies, 0 meaning 1.
	ClientIPHeader string
	ClientIPHops   int

	// Requests, when set, is told of every request once it is answered,
	// and, when it is a CredentialObserver too, of every refused
	// credential.
	Requests RequestObserver

	// Credential returns the secret a request presents, or why it
	// presents none (an error of kind Unauthenticated). Nil means Bearer.
	Credential func(r *http.Request) (string, error)
	// Authenticate, when set, authenticates a request itself, in place
	// of Credential and Domain.Authenticate: for a protocol whose
	// clients sign each request, its body included, with a secret they
	// never send (AWS's Signature Version 4). The body is capped before
	// it runs; it may read it, and then leaves r.Body for the handler
	// to read again. A refusal is an error of kind Unauthenticated.
	Authenticate func(r *http.Request) (P, error)
	// Refusal, when set, is the answer to every refused credential (an
	// Unauthenticated error, whether the credential is missing, malformed
	// or not accepted), in place of the reason: Vault's "permission
	// denied" says nothing of why.
	Refusal error

	// WriteError writes err as the protocol's error answer (and notes it
	// for the log line: NoteError).
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
	// NotFound answers a path that no route serves; MethodNotAllowed a
	// path served by routes of other methods, httprouter's Allow header
	// set.
	NotFound, MethodNotAllowed http.HandlerFunc
	// PanicCode is the code the log line gives a panic once the answer
	// is written ("" for none).
	PanicCode string
}

// Route is one route of a protocol: what the pipeline does before its
// handler runs.
type Route struct {
	Method string
	Path   string // below Config.Prefix, an httprouter pattern
	// Handle answers the request, for a caller authenticated and
	// admitted, with its body capped.
	Handle httprouter.Handle
	// Fail, when set, writes the route's answer to an error of the
	// pipeline (a refused credential or call) in place of
	// Config.WriteError.
	Fail func(w http.ResponseWriter, r *http.Request, err error)

	// Public routes need no credential.
	Public bool
	// Unlimited routes are not rate-limited: a load balancer's health
	// checks must not be refused.
	Unlimited bool
	// AdmitsCaller routes admit their authenticated caller themselves,
	// once they have read the body (a batch: a call per item), in place
	// of the one call the pipeline admits.
	AdmitsCaller bool
	// SecretPath routes carry a secret in their path (an API key): the
	// log line then gets the route's pattern, not the path.
	SecretPath bool
	// LeavesWork routes leave work behind their answer
	// (Domain.AnswerNotice): the answer is flushed to the connection
	// before that work may start.
	LeavesWork bool
}

// Edge is a protocol's pipeline.
type Edge[P comparable] struct {
	cfg      Config[P]
	log      zerolog.Logger
	refusals CredentialObserver // cfg.Requests, when it is one
}

// New returns the pipeline of cfg.
func New[P comparable](cfg Config[P]) *Edge[P] {
	cfg.ClientIPHeader = http.CanonicalHeaderKey(cfg.ClientIPHeader)
	cfg.ClientIPHops = max(cfg.ClientIPHops, 1)
	if cfg.Credential == nil {
		cfg.Credential = Bearer
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = cfg.DefaultMaxBodyBytes
	}
	e := &Edge[P]{cfg: cfg, log: zerolog.Nop()}
	if cfg.Logger != nil {
		e.log = *cfg.Logger
	}
	e.refusals, _ = cfg.Requests.(CredentialObserver)
	return e
}

// MaxBodyBytes is the cap on a request's body.
func (e *Edge[P]) MaxBodyBytes() int64 { return e.cfg.MaxBodyBytes }

// RedactPath returns path with what may be a secret in it hidden
// (reqlog.RedactPath, with Domain.Secret).
func (e *Edge[P]) RedactPath(path string) string {
	return reqlog.RedactPath(path, e.cfg.Domain.Secret)
}

// ClientAddr is the address of r's client: from Config.ClientIPHeader
// when set and present (internal/clientaddr), else the connection's.
func (e *Edge[P]) ClientAddr(r *http.Request) string {
	return clientaddr.Of(r, e.cfg.ClientIPHeader, e.cfg.ClientIPHops)
}

// Handler serves routes, each at Config.Prefix + its path, with the
// request log (Log).
func (e *Edge[P]) Handler(routes []Route) http.Handler {
	router := httprouter.New()
	// Redirects would drop the prefix of a mounted handler, and automatic
	// OPTIONS answers would bypass the protocol's shape: answer 404/405
	// instead.
	router.RedirectTrailingSlash = false
	router.RedirectFixedPath = false
	router.HandleOPTIONS = false
	router.HandleMethodNotAllowed = true
	router.NotFound = e.cfg.NotFound
	router.MethodNotAllowed = e.cfg.MethodNotAllowed
	router.PanicHandler = e.panicked
	for _, rt := range routes {
		router.Handle(rt.Method, e.cfg.Prefix+rt.Path, e.serve(rt))
	}
	return e.Log(router)
}

// serve adapts a route: it records the matched route for the log line,
// applies the rate limits (Domain.Admit: the client address's, before the
// credential is checked, so that guessing credentials is limited too;
// then, once the caller of a route that is not Public is authenticated,
// its credential's and Account's, which an AdmitsCaller route applies
// itself), caps the body and runs the handler. The caller and its address
// reach the domain in the request context, which is cloned once for both.
func (e *Edge[P]) serve(rt Route) httprouter.Handle {
	d := &e.cfg.Domain
	route := e.cfg.Prefix + rt.Path
	fail := rt.Fail
	if fail == nil {
		fail = e.cfg.WriteError
	}
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		st := stateFrom(r.Context())
		if st != nil {
			st.route, st.secretPath = route, rt.SecretPath
		}
		ctx := r.Context()
		if addr := e.ClientAddr(r); addr != "" {
			ctx = d.WithClientAddr(ctx, addr)
		}
		if !rt.Unlimited {
			var anyone P
			if err := d.Admit(ctx, anyone); err != nil {
				fail(w, r, err)
				return
			}
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(rawWriter(w, r), r.Body, e.cfg.MaxBodyBytes)
		}
		if !rt.Public {
			p, err := e.authenticate(r)
			if err != nil {
				fail(w, r, err)
				return
			}
			if st != nil {
				st.principal = d.PrincipalID(p)
			}
			ctx = d.WithPrincipal(ctx, p)
			if !rt.AdmitsCaller {
				if err := d.Admit(ctx, p); err != nil {
					fail(w, r, err)
					return
				}
			}
		}
		var sent func() // with LeavesWork: the answer is on the connection
		if rt.LeavesWork {
			ctx, sent = d.AnswerNotice(ctx)
			defer sent() // a panic's answer is written later: the work waits no longer
		}
		if ctx != r.Context() {
			r = r.WithContext(ctx)
		}
		rt.Handle(w, r, ps)
		if sent != nil {
			// The answer has its Content-Length: flushed, it is whole.
			http.NewResponseController(w).Flush()
			sent()
		}
	}
}

// authenticate returns the caller of r: the secret it presents
// (Config.Credential) as the domain accepts it. A refused credential is
// told to the CredentialObserver, and answered Config.Refusal when set.
func (e *Edge[P]) authenticate(r *http.Request) (P, error) {
	var p P
	var err error
	if e.cfg.Authenticate != nil {
		p, err = e.cfg.Authenticate(r)
	} else {
		var secret string
		if secret, err = e.cfg.Credential(r); err == nil {
			p, err = e.cfg.Domain.Authenticate(r.Context(), secret)
		}
	}
	if err != nil && base.ErrorKind(err) == base.KindUnauthenticated {
		if e.cfg.Refusal != nil {
			err = e.cfg.Refusal
		}
		if e.refusals != nil {
			e.refusals.ObserveRefusedCredential()
		}
	}
	return p, err
}

// Log gives every request an ID (the RequestIDHeader response header and
// the req_id field of its log line) and logs one line when the request
// is done (reqlog.Write): method, route, path, status, size, duration and
// principal ID; for a 5xx, the full error (at level warn for a 503, an
// outage ridden out; error for the others). Neither headers nor bodies are
// logged; the path is logged redacted (RedactPath), and not at all for a
// route marked SecretPath, which is logged by its pattern only. Nothing
// else logs during a request, so no per-request logger is made.
func (e *Edge[P]) Log(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := reqlog.NewID()
		w.Header()[RequestIDHeader] = []string{id} // canonical already
		st := &reqState{id: id, rec: recorder{ResponseWriter: w, status: http.StatusOK}}
		rec := &st.rec
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
		if e.cfg.Requests != nil {
			e.cfg.Requests.ObserveRequest(r.Method, st.route, rec.status, time.Since(start))
		}
		l := reqlog.Line{ID: id, Method: r.Method, Route: st.route, Status: rec.status, Size: rec.size,
			Start: start, Principal: st.principal, Code: st.code, Err: st.err}
		if !st.secretPath {
			l.Path = e.RedactPath(r.URL.Path)
		}
		reqlog.Write(&e.log, l)
	})
}

// panicked answers a handler that panicked: the protocol's 500, and the
// panic with its stack to the log; once an answer's status is written,
// the log alone (a second answer would corrupt the first).
func (e *Edge[P]) panicked(w http.ResponseWriter, r *http.Request, v any) {
	if v == http.ErrAbortHandler {
		panic(v) // net/http's way to abort a response; it logs nothing
	}
	err := fmt.Errorf("panic: %v\n%s", v, debug.Stack())
	if st := stateFrom(r.Context()); st != nil && st.rec.wroteHeader {
		NoteError(r, err, e.cfg.PanicCode)
		return // too late for an error answer
	}
	e.cfg.WriteError(w, r, err)
}
