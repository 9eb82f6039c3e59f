package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
)

// RequestIDHeader is the response header that carries the request ID,
// which every log line of the request carries too.
const RequestIDHeader = httpedge.RequestIDHeader

// DefaultMaxBodyBytes is the request body cap when Options.MaxBodyBytes
// is zero.
const DefaultMaxBodyBytes = 1 << 20

// Options configure the handler. The zero value of each field is a working
// default.
type Options struct {
	// Logger receives one line per request (request ID, method, path,
	// status, size, duration, principal ID) and the detail of every
	// internal error. It never receives a credential or a body. Nil
	// means silent.
	Logger *zerolog.Logger

	// MaxBodyBytes caps the body of a request; a larger one is answered
	// 413. Zero means DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64

	// ClientIPHeader, when set, names the request header that carries the
	// client's address, as a reverse proxy in front of the service sets it
	// ("X-Forwarded-For", "X-Real-IP"). Of a list such as X-Forwarded-For,
	// to which each proxy appends the address it received the request
	// from, the address taken is the one the trusted proxies appended (see
	// ClientIPHops), never one further left, which the client may write.
	// The address throttles failed logins and password reset requests, so
	// set it only behind a proxy that sets the header: a client could
	// otherwise pick its own. Empty means the address of the connection.
	ClientIPHeader string

	// ClientIPHops is the number of trusted proxies in front of the
	// service that append to ClientIPHeader: the client's address is that
	// many from the right of the list (of every line of the header, in
	// order), or the leftmost when the list is shorter. Zero means 1: the
	// address the one proxy appended.
	ClientIPHops int

	// Requests, when set, is told of every request once it is answered:
	// its method, its route pattern ("" when no route matched), its status
	// and how long it took (package metrics has one for Prometheus); and,
	// when it is a CredentialObserver too, of every refused credential.
	Requests RequestObserver
}

// RequestObserver receives a measurement of each request
// (httpedge.RequestObserver): on the request's goroutine, after the
// answer is written, so it must be quick.
type RequestObserver = httpedge.RequestObserver

// CredentialObserver may be implemented by a RequestObserver as well, to
// be told of each request whose credential was refused before it reached
// the Service (httpedge.CredentialObserver): a 401 for a missing or
// malformed Authorization header, or a credential the Service did not
// accept. The Service records no activity for these (it cannot tell whom
// they came from), so an observer that counts refusals from the activity
// records would miss them.
type CredentialObserver = httpedge.CredentialObserver

// api holds what every handler needs.
type api struct {
	svc  *kms.Service
	edge *httpedge.Edge[*kms.Principal] // the request pipeline
}

// handler serves one route. It decodes the request, calls one Service
// method and returns the body of the 200 answer, or an error that the
// error writer renders. When it returns both a body and an error, the body
// is written with the error's status: the decrypt 422 has the shape of
// the 200 answer.
type handler func(r *http.Request, ps httprouter.Params) (any, error)

// route is one line of the route table.
type route struct {
	method string
	path   string // httprouter pattern
	handle handler

	// public routes need no credential; every other route goes through
	// the bearer middleware, which puts the caller's Principal in the
	// request context.
	public bool
	// unlimited routes are not rate-limited: a load balancer's health
	// checks must not be refused.
	unlimited bool
	// batch routes make a call per item of their body: once the body is
	// read, their handler admits the caller for that many
	// (decodeBatch), in place of the one call that the caller of any
	// other route is admitted for after authentication.
	batch bool

	// secretPath marks a route whose path carries a secret (an API key,
	// a token): the log then gets the route pattern, not the path.
	secretPath bool
	// leavesWork marks a route whose call leaves work behind its answer
	// (kms.WithAnswerNotice): its answer is flushed to the connection
	// before that work may start.
	leavesWork bool
}

// routes is the route table, in the order of docs/API.md.
// docs/PERMISSIONS.md has one line per route with the flag it needs, and
// a test keeps the two in step.
func (a *api) routes() []route {
	return []route{
		{method: http.MethodGet, path: "/healthz", handle: a.healthz, public: true, unlimited: true},
		{method: http.MethodGet, path: "/openapi.json", handle: a.openAPI, public: true},

		// Key rings and keys.
		{method: http.MethodGet, path: "/ks/hash/:hash", handle: a.lookupHash},
		{method: http.MethodGet, path: "/ks/header/:header", handle: a.lookupHeader},
		{method: http.MethodGet, path: "/ks/signing-keys", handle: a.signingKeys, public: true},
		{method: http.MethodPost, path: "/ks/decrypt", handle: a.decrypt},
		{method: http.MethodPost, path: "/ks/encrypt", handle: a.encrypt},
		{method: http.MethodPost, path: "/ks/encrypt/batch", handle: a.encryptBatch, batch: true},
		{method: http.MethodPost, path: "/ks/decrypt/batch", handle: a.decryptBatch, batch: true},
		{method: http.MethodPost, path: "/ks/rotate", handle: a.rotate},
		{method: http.MethodPost, path: "/ks/keyrings", handle: a.createKeyRing},
		{method: http.MethodGet, path: "/ks/keyrings", handle: a.listKeyRings},
		{method: http.MethodGet, path: "/ks/keyrings/:ringname", handle: a.getKeyRing},
		{method: http.MethodGet, path: "/ks/config", handle: a.getConfig(false)},
		{method: http.MethodPut, path: "/ks/config", handle: a.setConfig(false)},
		{method: http.MethodDelete, path: "/ks/keyrings/:ringname", handle: a.deleteKeyRing},
		{method: http.MethodGet, path: "/ks/keyrings/:ringname/keys", handle: a.listKeys},
		{method: http.MethodGet, path: "/ks/keyrings/:ringname/keys/:keyId", handle: a.getKey},
		{method: http.MethodPatch, path: "/ks/keyrings/:ringname/keys/:keyId", handle: a.setKeyState(false)},
		{method: http.MethodPost, path: "/ks/keyrings/:ringname/keys/:keyId/destroy", handle: a.destroyKey(false)},
		{method: http.MethodDelete, path: "/ks/keyrings/:ringname/keys/:keyId/destroy", handle: a.cancelDestroyKey(false)},
		{method: http.MethodGet, path: "/ks/keyrings/:ringname/keys/:keyId/usage", handle: a.keyUsage},
		{method: http.MethodGet, path: "/ks/keyrings/:ringname/keys/:keyId/hashes", handle: a.listKeyHashes},

		// The Asset store, and lineage.
		{method: http.MethodGet, path: "/assets/:id", handle: a.getAsset},
		{method: http.MethodDelete, path: "/assets/:id", handle: a.deleteAsset},
		{method: http.MethodPost, path: "/assets/search", handle: a.searchAssets},
		{method: http.MethodGet, path: "/assets/:id/lineage", handle: a.getLineage},

		// The asym service.
		{method: http.MethodPost, path: "/asym/keyrings", handle: a.createAsymKeyRing},
		{method: http.MethodGet, path: "/asym/keyrings/:ringname/keys/:keyId", handle: a.getAsymKey},
		{method: http.MethodPatch, path: "/asym/keyrings/:ringname/keys/:keyId", handle: a.setKeyState(true)},
		{method: http.MethodPost, path: "/asym/keyrings/:ringname/keys/:keyId/destroy", handle: a.destroyKey(true)},
		{method: http.MethodDelete, path: "/asym/keyrings/:ringname/keys/:keyId/destroy", handle: a.cancelDestroyKey(true)},
		{method: http.MethodGet, path: "/asym/keyrings/:ringname/keys/:keyId/usage", handle: a.asymKeyUsage},
		{method: http.MethodGet, path: "/asym/keyrings/:ringname/keys/:keyId/export", handle: a.exportAsymKey},
		{method: http.MethodPost, path: "/asym/rotate", handle: a.rotateAsym},
		{method: http.MethodGet, path: "/asym/config", handle: a.getConfig(true)},
		{method: http.MethodPut, path: "/asym/config", handle: a.setConfig(true)},

		// Users and login. Login, invitations and password
		// resets are public: the token or password in the body is the
		// credential.
		{method: http.MethodPost, path: "/auth/validate", handle: a.validateAPIKey},
		{method: http.MethodPost, path: "/auth/user/invite", handle: a.invite},
		{method: http.MethodGet, path: "/auth/user/invite-validate", handle: a.validateInvite, public: true},
		{method: http.MethodPost, path: "/auth/user/invite-complete", handle: a.completeInvite, public: true},
		{method: http.MethodPost, path: "/auth/basic/login", handle: a.login, public: true},
		{method: http.MethodGet, path: "/auth/basic/refresh", handle: a.refresh},
		{method: http.MethodPost, path: "/auth/basic/logout", handle: a.logout},
		{method: http.MethodPost, path: "/auth/basic/reset-password-start", handle: a.startPasswordReset, public: true, leavesWork: true},
		{method: http.MethodPost, path: "/auth/basic/reset-password-complete", handle: a.completePasswordReset, public: true},
		{method: http.MethodGet, path: "/auth/basic/reset-password-complete", handle: a.checkPasswordReset, public: true},
		{method: http.MethodGet, path: "/auth/users/:username", handle: a.getUser},
		{method: http.MethodPatch, path: "/auth/users/:username", handle: a.updateUser},
		{method: http.MethodDelete, path: "/auth/users/:username", handle: a.deleteUser},
		{method: http.MethodGet, path: "/auth/users", handle: a.listUsers},
		{method: http.MethodPost, path: "/auth/users", handle: a.createUser},

		// Accounts.
		{method: http.MethodPost, path: "/auth/accounts", handle: a.createAccount},
		{method: http.MethodGet, path: "/auth/accounts", handle: a.listAccounts},
		{method: http.MethodGet, path: "/auth/accounts/:id", handle: a.getAccount},
		{method: http.MethodPatch, path: "/auth/accounts/:id", handle: a.updateAccount},
		{method: http.MethodDelete, path: "/auth/accounts/:id", handle: a.deleteAccount},
		{method: http.MethodGet, path: "/auth/accounts/:id/apikeys", handle: a.listAccountAPIKeys},

		// API keys and activity. DELETE names the key by its
		// secret unless ?id=true: the log gets the route, not the path.
		{method: http.MethodGet, path: "/auth/apikey", handle: a.listAPIKeys},
		{method: http.MethodPost, path: "/auth/apikey", handle: a.createAPIKey},
		{method: http.MethodPut, path: "/auth/apikey", handle: a.updateAPIKey},
		{method: http.MethodPut, path: "/auth/apikeyid", handle: a.updateAPIKeyByID},
		{method: http.MethodGet, path: "/auth/apikey/:apikeyid", handle: a.getAPIKey},
		{method: http.MethodGet, path: "/auth/apikey/:apikeyid/props", handle: a.getAPIKey},
		{method: http.MethodDelete, path: "/auth/apikey/:apikey", handle: a.deleteAPIKey, secretPath: true},
		{method: http.MethodGet, path: "/auth/search/keyring/:keyringname/apikey", handle: a.searchAPIKeysByRing},
		{method: http.MethodPost, path: "/auth/search/activity", handle: a.searchActivity},
		{method: http.MethodGet, path: "/auth/activity/:id", handle: a.getActivity},
	}
}

// New returns an http.Handler that serves the ringkms HTTP interface over
// svc: the routes of docs/API.md, and GET /healthz. It panics when
// svc is nil.
func New(svc *kms.Service, opts Options) http.Handler {
	return newHandler(svc, opts, nil)
}

// Unavailable returns an http.Handler for a service that cannot serve
// yet, because of err (kmsd while a full disk keeps its store from
// opening): GET /healthz answers 503 and every other request the status
// of err's kind, both with err's message, in the JSON shape and with the
// request log of New.
func Unavailable(err error, opts Options) http.Handler {
	a := newAPI(nil, opts)
	return a.edge.Log(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
			a.writeError(w, r, unhealthy(err))
			return
		}
		a.writeError(w, r, err)
	}))
}

// newHandler is New with extra routes, for tests.
func newHandler(svc *kms.Service, opts Options, extra []route) http.Handler {
	if svc == nil {
		panic("httpapi: New needs a *kms.Service")
	}
	a := newAPI(svc, opts)
	var routes []httpedge.Route
	for _, rt := range append(a.routes(), extra...) {
		routes = append(routes, a.edgeRoute(rt))
	}
	return a.edge.Handler(routes)
}

// newAPI returns the api of svc (nil for Unavailable), over the request
// pipeline of internal/httpedge.
func newAPI(svc *kms.Service, opts Options) *api {
	a := &api{svc: svc}
	a.edge = httpedge.New(httpedge.Config[*kms.Principal]{
		Domain: httpedge.Domain[*kms.Principal]{WithClientAddr: kms.WithClientAddr, Admit: svc.Admit,
			Authenticate: svc.Authenticate, WithPrincipal: kms.WithPrincipal, PrincipalID: principalID,
			AnswerNotice: kms.WithAnswerNotice, Secret: kms.LooksLikeSecret},
		Logger: opts.Logger, MaxBodyBytes: opts.MaxBodyBytes, DefaultMaxBodyBytes: DefaultMaxBodyBytes,
		ClientIPHeader: opts.ClientIPHeader, ClientIPHops: opts.ClientIPHops, Requests: opts.Requests,
		WriteError: a.writeError, NotFound: a.notFound, MethodNotAllowed: a.methodNotAllowed,
		PanicCode: kms.KindInternal.String(),
	})
	return a
}

// principalID is the caller's ID, for the log line.
func principalID(p *kms.Principal) string { return p.ID }

// edgeRoute is rt as the pipeline serves it (httpedge.Route): once the
// pipeline has admitted and authenticated the caller (the bearer
// middleware, httpedge.Bearer, for a route that is not public) and
// capped the body, the handler runs and its answer or its error is
// written.
func (a *api) edgeRoute(rt route) httpedge.Route {
	return httpedge.Route{Method: rt.method, Path: rt.path, Public: rt.public, Unlimited: rt.unlimited,
		AdmitsCaller: rt.batch, SecretPath: rt.secretPath, LeavesWork: rt.leavesWork,
		Handle: func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
			body, err := rt.handle(r, ps)
			if p, ok := body.(*page); ok && err == nil {
				a.writePage(w, r, p)
				return
			}
			switch {
			case err == nil:
				answers.Write(w, r, http.StatusOK, body)
			case body != nil:
				status, code := statusOf(err)
				httpedge.NoteError(r, err, code)
				answers.Write(w, r, status, body)
			default:
				a.writeError(w, r, err)
			}
		}}
}
