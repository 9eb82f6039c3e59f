package transit

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
)

// DefaultMount is the mount of the engine when Options.Mount is empty:
// its paths are /v1/transit/...
const DefaultMount = "transit"

// PathPrefix starts every path of Vault's interface: the engine's, below
// /v1/<mount>/, and the others that Vault's clients call (sys/health,
// sys/mounts, auth/...), which the handler answers 404 in Vault's error
// shape, naming what is served. Mount the handler at PathPrefix for
// those answers; at /v1/<mount>/, other paths are the application's.
const PathPrefix = "/v1/"

// DefaultMaxBodyBytes is the request body cap when Options.MaxBodyBytes is
// zero: a batch of MaxBatchItems plaintexts of a few KiB each.
const DefaultMaxBodyBytes = 4 << 20

// Options configure the handler. The zero value of each field is a working
// default.
type Options struct {
	// Mount is the path of the engine below /v1/: "transit" (the
	// default) serves /v1/transit/... A Vault client names it in its
	// paths (SOPS's URI, OpenTofu's transit_engine_path).
	Mount string

	// Logger receives one line per request (request ID, method, route,
	// path, status, size, duration, principal ID) and the detail of every
	// internal error. It never receives a credential or a body. Nil means
	// silent.
	Logger *zerolog.Logger

	// MaxBodyBytes caps the body of a request; a larger one is answered
	// 413. Zero means DefaultMaxBodyBytes (4 MiB).
	MaxBodyBytes int64

	// ClientIPHeader and ClientIPHops say where the client's address comes
	// from behind trusted reverse proxies, as for httpapi.Options: the
	// rate limits of client addresses count it.
	ClientIPHeader string
	ClientIPHops   int

	// Requests, when set, is told of every request once it is answered,
	// and, when it has a method ObserveRefusedCredential(), of every
	// credential refused: httpapi's RequestObserver and
	// CredentialObserver (package metrics has one for Prometheus).
	Requests RequestObserver
}

// RequestObserver receives a measurement of each request, on its
// goroutine, after the answer is written: it must be quick
// (httpedge.RequestObserver, as httpapi.RequestObserver is).
type RequestObserver = httpedge.RequestObserver

// api holds what every handler needs.
type api struct {
	svc        *kms.Service
	edge       *httpedge.Edge[*kms.Principal] // the request pipeline
	prefix     string                         // /v1/<mount>
	credential func(r *http.Request) (string, error)
}

// answer is what a handler answers: its data (nil: no body, 204), its
// status (0: 200), and Vault's warnings.
type answer struct {
	status   int
	data     any
	auth     any // the auth block of an answer that carries a token
	warnings []string
}

// handler serves one route for an authenticated caller.
type handler func(r *http.Request, ps httprouter.Params) (*answer, error)

// route is one line of the route table.
type route struct {
	method string
	path   string // below /v1/<mount>, an httprouter pattern
	handle handler
	// read routes answer a key that does not exist 404, as Vault answers
	// a read; the others 400, as Vault's engine answers them.
	read bool
	// Flag is the flag the route needs, "<ring>" for the key it names
	// (docs/PERMISSIONS.md, kept in step by a test).
	flag string
	// public routes need no credential (a login).
	public bool
}

// routes is the route table: Vault's transit paths that ringkms serves.
func (a *api) routes() []route {
	routes := []route{
		{method: http.MethodPost, path: "/keys/:name", handle: a.createKey, flag: "keyring.<ring>.create"},
		{method: http.MethodGet, path: "/keys/:name", handle: a.readKey, read: true, flag: "keyring.<ring>.read"},
		{method: http.MethodDelete, path: "/keys/:name", handle: a.deleteKey, flag: "keyring.<ring>.delete"},
		{method: "LIST", path: "/keys", handle: a.listKeys, read: true, flag: "keyring.*.read"},
		{method: http.MethodGet, path: "/keys", handle: a.listKeysGet, read: true, flag: "keyring.*.read"},
		{method: http.MethodPost, path: "/keys/:name/rotate", handle: a.rotateKey, flag: "keyring.<ring>.rotate"},
		{method: http.MethodPost, path: "/keys/:name/config", handle: a.configKey, flag: "keyring.<ring>.config"},
		{method: http.MethodPost, path: "/encrypt/:name", handle: a.encrypt, flag: "keyring.<ring>.encrypt"},
		{method: http.MethodPost, path: "/decrypt/:name", handle: a.decrypt, flag: "keyring.<ring>.decrypt"},
		{method: http.MethodPost, path: "/rewrap/:name", handle: a.rewrap, flag: "keyring.<ring>.encrypt"},
		{method: http.MethodPost, path: "/datakey/:type/:name", handle: a.dataKey, flag: "keyring.<ring>.encrypt"},
		{method: http.MethodGet, path: "/export/:type/:name", handle: a.exportKey, read: true, flag: "keyring.<ring>.export"},
		{method: http.MethodGet, path: "/export/:type/:name/:version", handle: a.exportKey, read: true, flag: "keyring.<ring>.export"},
	}
	// The signature routes, each also with the hash it uses as the path's
	// last segment, as Vault serves them.
	for _, rt := range []route{
		{path: "/sign/:name", handle: a.sign, flag: "keyring.<ring>.sign"},
		{path: "/verify/:name", handle: a.verify, flag: "keyring.<ring>.verify"},
		{path: "/hmac/:name", handle: a.hmac, flag: "keyring.<ring>.hmac"},
	} {
		rt.method = http.MethodPost
		withHash := rt
		withHash.path += "/:hash"
		routes = append(routes, rt, withHash)
	}
	return routes
}

// New returns an http.Handler that serves Vault's transit interface over
// svc at /v1/<opts.Mount>/ (package comment). It panics when svc is nil
// or the mount is not a path segment.
func New(svc *kms.Service, opts Options) http.Handler {
	if svc == nil {
		panic("transit: New needs a *kms.Service")
	}
	a := newAPI(svc, opts)
	routes := a.edgeRoutes("/"+strings.TrimPrefix(a.prefix, PathPrefix), a.routes())
	return a.edge.Handler(append(routes, a.edgeRoutes("/auth", a.authRoutes())...))
}

// newAPI returns the api of svc, over the request pipeline of
// internal/httpedge: it takes the credential of X-Vault-Token, else of
// Authorization: Bearer, and answers any it refuses Vault's "permission
// denied"; the client address's rate limit, then, once the credential is
// known, its own and its Account's, for one call: before the body is
// read, so that a caller out of calls costs no reading and parsing (a
// route that makes a call per item of its body admits the others once it
// has read them, admit).
func newAPI(svc *kms.Service, opts Options) *api {
	mount := opts.Mount
	if mount == "" {
		mount = DefaultMount
	}
	if strings.ContainsAny(mount, "/:*?#") {
		panic("transit: Options.Mount is one path segment, such as \"transit\"")
	}
	// Vault's token, else a bearer's; any refused is "permission denied".
	a := &api{svc: svc, prefix: PathPrefix + mount, credential: httpedge.TokenOrBearer("X-Vault-Token")}
	a.edge = httpedge.New(httpedge.Config[*kms.Principal]{
		Domain: httpedge.Domain[*kms.Principal]{WithClientAddr: kms.WithClientAddr, Admit: svc.Admit,
			Authenticate: svc.Authenticate, WithPrincipal: kms.WithPrincipal,
			PrincipalID: func(p *kms.Principal) string { return p.ID }, Secret: kms.LooksLikeSecret},
		Prefix: strings.TrimSuffix(PathPrefix, "/"), Logger: opts.Logger, MaxBodyBytes: opts.MaxBodyBytes, DefaultMaxBodyBytes: DefaultMaxBodyBytes,
		ClientIPHeader: opts.ClientIPHeader, ClientIPHops: opts.ClientIPHops, Requests: opts.Requests,
		Credential: a.credential, Refusal: errPermissionDenied,
		WriteError: func(w http.ResponseWriter, r *http.Request, err error) { a.writeError(w, r, err, false) },
		NotFound:   a.notFound, MethodNotAllowed: a.methodNotAllowed,
	})
	return a
}

// edgeRoutes are routes below /v1<below> as the pipeline serves them
// (httpedge.Route):
// once it has admitted and authenticated the caller and capped the body,
// the handler runs and its answer or its error is written. A POST route
// is served for PUT too, as Vault takes PUT for POST (its Go client
// writes with PUT).
func (a *api) edgeRoutes(below string, routes []route) []httpedge.Route {
	var out []httpedge.Route
	for _, rt := range routes {
		fail := func(w http.ResponseWriter, r *http.Request, err error) { a.writeError(w, r, err, rt.read) }
		er := httpedge.Route{Method: rt.method, Path: below + rt.path, Public: rt.public, Fail: fail,
			Handle: func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
				ans, err := rt.handle(r, ps)
				if err != nil {
					fail(w, r, err)
					return
				}
				a.writeAnswer(w, r, ans)
			}}
		out = append(out, er)
		if rt.method == http.MethodPost {
			er.Method = http.MethodPut
			out = append(out, er)
		}
	}
	return out
}

// errPermissionDenied is the answer to a missing, malformed or refused
// credential: Vault's, which says nothing of why.
var errPermissionDenied = kms.Errorf(kms.KindUnauthenticated, "permission denied")

// admit applies the rate limits to the n calls an items route makes
// (one per item), of which the pipeline admitted the first before the
// body was read (kms.Service.AdmitRest).
func (a *api) admit(r *http.Request, n int) error {
	return a.svc.AdmitRest(r.Context(), kms.PrincipalFrom(r.Context()), n)
}

// envelope is the shape of Vault's answers.
type envelope struct {
	RequestID     string   `json:"request_id"`
	LeaseID       string   `json:"lease_id"`
	Renewable     bool     `json:"renewable"`
	LeaseDuration int      `json:"lease_duration"`
	Data          any      `json:"data"`
	WrapInfo      any      `json:"wrap_info"`
	Warnings      []string `json:"warnings"`
	Auth          any      `json:"auth"`
	MountType     string   `json:"mount_type"`
}

// errorsBody is the shape of Vault's error answers.
type errorsBody struct {
	Errors []string `json:"errors"`
}

// writeAnswer writes ans in Vault's envelope; an answer without data is
// 204 with no body.
func (a *api) writeAnswer(w http.ResponseWriter, r *http.Request, ans *answer) {
	status := ans.status
	if status == 0 {
		status = http.StatusOK
	}
	if ans.data == nil && ans.auth == nil && status == http.StatusOK {
		answers.Write(w, r, http.StatusNoContent, nil)
		return
	}
	answers.Write(w, r, status, envelope{RequestID: httpedge.RequestID(r), Data: ans.data, Auth: ans.auth, Warnings: ans.warnings, MountType: "transit"})
}

// statusOf is the status of err, as Vault's transit engine answers its
// like: a key that does not exist is 404 on a read and 400 elsewhere;
// a missing or refused credential is 403, as a missing flag is.
func statusOf(err error, read bool) int {
	if se := httpedge.AsStatusError(err); se != nil {
		return se.Status
	}
	switch kms.ErrorKind(err) {
	case kms.KindInvalid, kms.KindConflict, kms.KindUnprocessable:
		return http.StatusBadRequest
	case kms.KindUnauthenticated, kms.KindPermissionDenied, kms.KindLimit, kms.KindDisabled:
		return http.StatusForbidden
	case kms.KindNotFound:
		if read {
			return http.StatusNotFound
		}
		return http.StatusBadRequest
	case kms.KindDestroyed:
		return http.StatusGone
	case kms.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case kms.KindRateLimited:
		return http.StatusTooManyRequests
	case kms.KindNoSpace:
		return http.StatusInsufficientStorage
	case kms.KindUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeError writes err as Vault does: {"errors": [message]} with the
// status of its kind (statusOf). A read of a key that does not exist is
// 404 with no message, as Vault answers it.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error, read bool) {
	status := statusOf(err, read)
	httpedge.NoteError(r, err, "")
	httpedge.SetRetryAfter(w.Header(), err)
	body := errorsBody{Errors: []string{httpedge.Message(err, status)}}
	if status == http.StatusNotFound && kms.ErrorKind(err) == kms.KindNotFound {
		body.Errors = []string{}
	}
	answers.Write(w, r, status, body)
}

// answers is the one writer of every answer (httpedge.JSONWriter, in
// Vault's format): JSON, or nothing for 204.
var answers = &httpedge.JSONWriter{ContentType: "application/json", Internal: errorsBody{Errors: []string{"internal error"}}}

// notFound answers a path that no route serves, as Vault answers a path
// it lacks: 404, saying what the engine serves when the path is in it,
// else that only the engine is served.
func (a *api) notFound(w http.ResponseWriter, r *http.Request) {
	if path := r.URL.Path; path == a.prefix || strings.HasPrefix(path, a.prefix+"/") {
		a.writeError(w, r, errUnsupportedPath, false)
		return
	}
	a.writeError(w, r, a.outsideEngine(r.URL.Path), false)
}

// outsideEngine answers a path outside the engine (Vault's sys/, auth/,
// another engine's mount), which it names redacted, as the log line does:
// a secret pasted into a path goes to no answer either.
func (a *api) outsideEngine(path string) error {
	return &httpedge.StatusError{Status: http.StatusNotFound,
		Message: fmt.Sprintf("%q is not served: ringkms serves only Vault's transit engine, at %s/, and takes its own credentials as Vault tokens (docs/TRANSIT.md)",
			a.edge.RedactPath(path), a.prefix)}
}

// errUnsupportedPath answers a path of Vault's engine that ringkms does
// not serve (sign, hmac, export...), or no path of it.
var errUnsupportedPath = &httpedge.StatusError{Status: http.StatusNotFound,
	Message: "unsupported path: ringkms's transit engine serves keys, encrypt, decrypt, rewrap, datakey, sign, verify, hmac and export (docs/TRANSIT.md)"}

// methodNotAllowed answers a path served for other methods, as Vault
// answers an operation its path lacks.
func (a *api) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	a.writeError(w, r, errUnsupportedOperation, false)
}
