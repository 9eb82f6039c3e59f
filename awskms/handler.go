package awskms

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
	"github.com/ringkms/kms/internal/sigv4"
)

// TargetPrefix starts the X-Amz-Target of every call: AWS KMS's service
// name in its JSON protocol.
const TargetPrefix = "TrentService."

// ContentType is the JSON 1.1 protocol's content type.
const ContentType = "application/x-amz-json-1.1"

// service is the service name a signature is scoped to.
const service = "kms"

// accountID is the account of the ARNs: AWS account IDs have 12 digits,
// which ringkms's Accounts have not; clients only carry it.
const accountID = "000000000000"

// DefaultMaxBodyBytes caps a request's body when Options.MaxBodyBytes is
// zero: AWS KMS takes plaintexts of up to 4 KiB, 6 KiB ciphertexts and
// messages to sign of 4 KiB, in base64 in JSON.
const DefaultMaxBodyBytes = 64 << 10

// Options configure the handler. The zero value of each field is a
// working default.
type Options struct {
	// Logger receives one line per request (request ID, route, status,
	// size, duration, principal ID, the exception of an error); never a
	// credential, a signature or a body. Nil means silent.
	Logger *zerolog.Logger
	// MaxBodyBytes caps the body of a request; zero means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ClientIPHeader and ClientIPHops say where the client's address
	// comes from behind trusted reverse proxies, as for
	// httpapi.Options.
	ClientIPHeader string
	ClientIPHops   int
	// Requests, when set, is told of every request once it is answered
	// (httpedge.RequestObserver; package metrics has one). Its route is
	// the operation served, "TrentService.Encrypt"; "/" for a request
	// that names none.
	Requests httpedge.RequestObserver
	// Now is the clock that signatures' times are checked against; nil
	// is time.Now.
	Now func() time.Time
}

// api holds what every operation needs.
type api struct {
	svc  *kms.Service
	edge *httpedge.Edge[*kms.Principal]
	now  func() time.Time
}

// call is one request being answered: its body, the region its
// signature names, and the caller's context.
type call struct {
	r      *http.Request
	body   []byte
	region string
}

// operation answers a call: the value to answer (JSON), or an error.
type operation func(a *api, c *call) (any, error)

// New returns the handler of AWS KMS's JSON protocol over svc. Mount it
// where POST / reaches it (Handles says which requests are its).
func New(svc *kms.Service, opts Options) http.Handler {
	if svc == nil {
		panic("awskms: New needs a *kms.Service")
	}
	a := &api{svc: svc, now: opts.Now}
	if a.now == nil {
		a.now = time.Now
	}
	a.edge = httpedge.New(httpedge.Config[*kms.Principal]{
		Domain: httpedge.Domain[*kms.Principal]{WithClientAddr: kms.WithClientAddr, Admit: svc.Admit,
			WithPrincipal: kms.WithPrincipal, PrincipalID: func(p *kms.Principal) string { return p.ID },
			Secret: kms.LooksLikeSecret},
		Logger: opts.Logger, MaxBodyBytes: opts.MaxBodyBytes, DefaultMaxBodyBytes: DefaultMaxBodyBytes,
		ClientIPHeader: opts.ClientIPHeader, ClientIPHops: opts.ClientIPHops, Requests: opts.Requests,
		Authenticate: a.authenticate,
		WriteError:   writeError,
		NotFound: func(w http.ResponseWriter, r *http.Request) {
			writeError(w, r, fail("UnknownOperationException", "AWS KMS's protocol is served at POST /"))
		},
		MethodNotAllowed: func(w http.ResponseWriter, r *http.Request) {
			writeError(w, r, fail("UnknownOperationException", "AWS KMS's protocol is served at POST /"))
		},
	})
	return a.edge.Handler([]httpedge.Route{{Method: http.MethodPost, Path: "/", Handle: a.serve}})
}

// Handles reports whether r is a call of AWS KMS's protocol: POST / with
// an X-Amz-Target of TrentService, so that a server can serve it beside
// other interfaces on one listener.
func Handles(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/" && strings.HasPrefix(r.Header.Get("X-Amz-Target"), TargetPrefix)
}

// authenticate checks the request's Signature Version 4 against the
// secret of the API key it names or, with a session token, against the
// User's access token that the token is, reading the (capped) body,
// which it leaves for the operation.
func (a *api) authenticate(r *http.Request) (*kms.Principal, error) {
	q, err := sigv4.Parse(r, service, a.now(), "x-amz-target") // the operation is the signed one
	if err != nil {
		return nil, unauthenticated(err)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fail("ValidationException", fmt.Sprintf("the request's body has more than %d bytes", tooLarge.Limit))
		}
		return nil, fail("ValidationException", "the request's body could not be read")
	}
	r.Body = &readBody{Reader: bytes.NewReader(body), body: body}
	verify := func(secret []byte) error { return q.Verify(body, secret) }
	var p *kms.Principal
	if q.SecurityToken != "" {
		// A User's access token, as temporary credentials are: the
		// User's ID as the access key, the token as the secret.
		p, err = a.svc.AuthenticateSession(r.Context(), q.AccessKeyID, q.SecurityToken, verify)
	} else {
		p, err = a.svc.AuthenticateSigned(r.Context(), q.AccessKeyID, verify)
	}
	if err != nil {
		return nil, unauthenticated(err)
	}
	return p, nil
}

// readBody is a request's body once authenticate has read it: the bytes,
// for the operation, without a second copy.
type readBody struct {
	*bytes.Reader
	body []byte
}

func (*readBody) Close() error { return nil }

// regionOf is the region of the signature's scope, which authenticate
// checked: Credential=<key>/<date>/<region>/kms/aws4_request.
func regionOf(r *http.Request) string {
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	parts := strings.SplitN(cred, "/", 4)
	if len(parts) < 4 || parts[2] == "" {
		return "us-east-1"
	}
	return parts[2]
}

// unauthenticated is a refused signature as AWS answers it, of kind
// Unauthenticated for the pipeline (which counts it as a refused
// credential): the sigv4 refusal's exception, or UnrecognizedClient for
// an access key the service does not know.
func unauthenticated(err error) error {
	ae := exception(err)
	if kms.ErrorKind(err) == kms.KindInternal || kms.ErrorKind(err) == kms.KindUnavailable {
		return err
	}
	return &kms.Error{Kind: kms.KindUnauthenticated, Message: ae.message, Err: ae}
}

// serve answers a call: its operation by X-Amz-Target.
func (a *api) serve(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	target := r.Header.Get("X-Amz-Target")
	name, ok := strings.CutPrefix(target, TargetPrefix)
	if !ok {
		writeError(w, r, fail("UnknownOperationException", "X-Amz-Target must name an operation of TrentService"))
		return
	}
	op, ok := operations[name]
	if !ok {
		writeError(w, r, fail("UnsupportedOperationException", fmt.Sprintf("%s is not served; the operations served are %s", name, strings.Join(served(), ", "))))
		return
	}
	httpedge.SetRoute(r, target) // an operation served: the log line and the metrics name it
	var body []byte
	if rb, ok := r.Body.(*readBody); ok {
		body = rb.body // read and checked by authenticate
	} else {
		writeError(w, r, fail("ValidationException", "the request's body could not be read"))
		return
	}
	// The records of the call name it: aws.Encrypt...
	if p := kms.PrincipalFrom(r.Context()); p != nil {
		r = r.WithContext(kms.WithPrincipal(r.Context(), p.Via("aws."+name)))
	}
	out, err := op(a, &call{r: r, body: body, region: regionOf(r)})
	if err != nil {
		writeError(w, r, err)
		return
	}
	answers.Write(w, r, http.StatusOK, out)
}

// served are the operations served, in name order.
func served() []string {
	names := make([]string, 0, len(operations))
	for n := range operations {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// decode reads the call's body into v: JSON, unknown members ignored as
// AWS ignores them; an empty body is an empty request.
func (c *call) decode(v any) error {
	if len(bytes.TrimSpace(c.body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		return fail("SerializationException", "the request's body is not the operation's JSON: "+jsonProblem(err))
	}
	return nil
}

// named decodes the call's body into in, whose KeyId is at id, and
// answers the held key it names.
func (c *call) named(in any, id *string) (string, error) {
	if err := c.decode(in); err != nil {
		return "", err
	}
	return keyName(*id)
}

// jsonProblem says what is wrong with a body, without quoting it.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("member %s must be a %s", te.Field, te.Type)
	}
	return "malformed JSON"
}

// answers is the one writer of this package's answers
// (httpedge.JSONWriter, in AWS's format), which carry the request's ID as
// AWS's do (x-amzn-RequestId), for the SDKs' errors and logs.
var answers = &httpedge.JSONWriter{
	ContentType: ContentType,
	Internal:    map[string]string{"__type": "KMSInternalException", "message": "internal error"},
	Header: func(h http.Header, r *http.Request) {
		if id := httpedge.RequestID(r); id != "" {
			h.Set("x-amzn-RequestId", id)
		}
	},
}
