package client

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ringkms/kms"
)

// MaxResponseBytes bounds the body of an answer that the client reads. A
// larger answer is an Internal error.
const MaxResponseBytes = 16 << 20

// DefaultUserAgent is the User-Agent of a Client without WithUserAgent.
const DefaultUserAgent = "ringkms-go-client/0.1.0"

// Client calls the HTTP interface of ringkms (package httpapi, served by
// kmsd or mounted in another server). Its methods have the names, the
// arguments and the results of the kms.Service methods they call, so code
// written against one reads the same against the other. A Client is safe
// for concurrent use.
type Client struct {
	base   string // scheme://host[/prefix], no trailing slash
	secret string // bearer secret: an API key or an access token
	hc     *http.Client
	ua     string

	roots *x509.CertPool // WithCACert, WithRootCAs: applied to hc by New
	err   error          // an option's error, which New returns
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey makes the client send the API key secret (rk_...) as its
// bearer credential.
func WithAPIKey(secret string) Option { return func(c *Client) { c.secret = secret } }

// WithToken makes the client send a User's access token (rkt_..., from
// Login, CompleteInvite or Refresh) as its bearer credential. It is
// WithAPIKey under another name: the server tells them apart.
func WithToken(accessToken string) Option { return WithAPIKey(accessToken) }

// WithHTTPClient makes the client send its requests with hc instead of
// http.DefaultClient: for timeouts, TLS settings or a proxy. Redirects
// follow hc's policy (httpapi answers none).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// New returns a Client of the service at baseURL: the address at which the
// handler is served, with its path prefix when it is mounted under one
// ("https://kms.example.com", "http://127.0.0.1:8080/kms"). Without
// WithAPIKey or WithToken, only the public calls work (Healthz, Login,
// invitations, password reset).
func New(baseURL string, opts ...Option) (*Client, error) {
	base, err := parseBase(baseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: base, hc: http.DefaultClient, ua: DefaultUserAgent}
	for _, o := range opts {
		o(c)
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	if c.roots != nil {
		if c.hc, err = withRoots(c.hc, c.roots); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// parseBase checks a base URL and returns it without a trailing slash.
func parseBase(baseURL string) (string, error) {
	if baseURL != "" && !strings.Contains(baseURL, "://") {
		// 127.0.0.1:8200 or kms.internal:8200: whether the service speaks
		// TLS is not ours to guess, and a guess of http would send the
		// credential in the clear to a service that does.
		return "", kms.Errorf(kms.KindInvalid, "base URL %q has no scheme: write http://%s, or https://%s for a service with TLS", baseURL, baseURL, baseURL)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", kms.Errorf(kms.KindInvalid, "base URL %q: %v", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", kms.Errorf(kms.KindInvalid, "base URL %q: want http:// or https:// and a host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", kms.Errorf(kms.KindInvalid, "base URL %q: want no query, fragment or user information", baseURL)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// WithBearer returns a copy of c that sends secret (an API key or an
// access token) as its bearer credential; c is unchanged. The copy shares
// c's http.Client.
func (c *Client) WithBearer(secret string) *Client {
	d := *c
	d.secret = secret
	return &d
}

// BaseURL returns the address the client calls, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Healthz asks whether the service is up and its store answers. It needs
// no credential.
func (c *Client) Healthz(ctx context.Context) error {
	return c.do(ctx, req{method: http.MethodGet, path: "/healthz"})
}

// req is one request: everything the helper do needs to send it and read
// its answer.
type req struct {
	method string
	path   string     // escaped path below the base URL, from endpoint
	query  url.Values // nil for none
	body   any        // encoded as JSON; nil for no body
	out    any        // the 200 answer is decoded into out; nil to discard it
	// outOn422 also decodes a 422 answer into out: the decrypt answer
	// that failed verification has the shape of the 200 answer.
	outOn422 bool
	// pattern, when set, names the request in error messages in place of
	// path, which then holds a secret (an API key in DELETE
	// /auth/apikey/{apikey}).
	pattern string
}

// String names the request in error messages: method and path, or the
// path's pattern when the path holds a secret. The query is never shown.
func (r req) String() string {
	if r.pattern != "" {
		return r.method + " " + r.pattern
	}
	return r.method + " " + r.path
}

// do sends r and decodes its answer. Every failure is a *kms.Error: the
// server's kind for an error answer; Unavailable when the service could
// not be reached or answered that it cannot serve now (a refused
// connection, 502, 503, 504), so that the caller knows to try again
// later or elsewhere; Internal for a server fault (500), an answer that
// is not the service's (a server whose certificate the client refuses
// among them: trying again does not help), or a call the caller's own
// context ended.
func (c *Client) do(ctx context.Context, r req) error {
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return kms.Errorf(kms.KindInvalid, "encode the request body of %v: %v", r, err)
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return &kms.Error{Kind: kms.KindInternal, Message: fmt.Sprintf("build request %v", r), Err: err}
	}
	if r.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	if c.ua != "" {
		hr.Header.Set("User-Agent", c.ua)
	}
	if c.secret != "" {
		hr.Header.Set("Authorization", "Bearer "+c.secret)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		// The *url.Error names the URL, which may carry a secret (an API
		// key in DELETE /auth/apikey/{key}): keep its cause only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil { // the caller gave up: no word on the service
			return &kms.Error{Kind: kms.KindInternal, Message: fmt.Sprintf("%v failed", r), Err: err}
		}
		if problem := tlsProblem(err); problem != "" {
			return &kms.Error{Kind: kms.KindInternal, Message: fmt.Sprintf("%v failed: %s", r, problem), Err: err}
		}
		return &kms.Error{Kind: kms.KindUnavailable, Message: fmt.Sprintf("%v failed: the service could not be reached", r), Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return &kms.Error{Kind: kms.KindInternal, Message: fmt.Sprintf("%v: read the answer (HTTP %d)", r, resp.StatusCode), Err: err}
	}
	if len(data) > MaxResponseBytes {
		return kms.Errorf(kms.KindInternal, "%v: the answer is larger than %d bytes (HTTP %d)", r, MaxResponseBytes, resp.StatusCode)
	}
	isJSON := jsonContent(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if r.out == nil {
			return nil
		}
		if !isJSON {
			return kms.Errorf(kms.KindInternal, "%v: the answer is not JSON (HTTP %d, Content-Type %q)", r, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if err := json.Unmarshal(data, r.out); err != nil {
			return &kms.Error{Kind: kms.KindInternal, Message: fmt.Sprintf("%v: cannot decode the answer (HTTP %d)", r, resp.StatusCode), Err: err}
		}
		return nil
	case resp.StatusCode == http.StatusUnprocessableEntity && r.outOn422 && r.out != nil && isJSON && !hasCode(data):
		if err := json.Unmarshal(data, r.out); err != nil {
			return &kms.Error{Kind: kms.KindInternal, Message: fmt.Sprintf("%v: cannot decode the answer (HTTP %d)", r, resp.StatusCode), Err: err}
		}
		return unprocessable(r.out)
	}
	return answerError(r, resp, data, isJSON)
}

// unprocessable returns the error of a 422 answer decoded into out: for a
// decrypt answer, an Unprocessable error with the message of its Asset
// check, as Service.Decrypt returns.
func unprocessable(out any) error {
	if res, ok := out.(*kms.DecryptResult); ok && res.Asset.Message != "" {
		return &kms.Error{Kind: kms.KindUnprocessable, Message: res.Asset.Message}
	}
	return &kms.Error{Kind: kms.KindUnprocessable, Message: "unprocessable"}
}

// hasCode reports whether a JSON answer is in the error shape, with a
// "code" member.
func hasCode(data []byte) bool {
	var eb struct {
		Code *string `json:"code"`
	}
	return json.Unmarshal(data, &eb) == nil && eb.Code != nil
}

// errorBody is the body of an error answer (httpapi's error writer).
type errorBody struct {
	Message string            `json:"message"`
	Code    string            `json:"code"`
	Errors  map[string]string `json:"errors"`
	State   string            `json:"state"`
	Results json.RawMessage   `json:"results"`
}

// statePasswordCheck is the State of an error whose Details is a
// kms.PasswordCheck (invite completion, password reset).
const statePasswordCheck = "malformed-password"

// answerError turns an error answer into a *kms.Error with the kind the
// server reported.
func answerError(r req, resp *http.Response, data []byte, isJSON bool) error {
	status := resp.StatusCode
	var eb errorBody
	if !isJSON || json.Unmarshal(data, &eb) != nil {
		kind := kms.KindInternal // not the service's answer: a wrong URL, say
		if gatewayStatus(status) {
			kind = kms.KindUnavailable // a proxy that cannot reach the service
		}
		return kms.Errorf(kind, "%v: HTTP %d with an answer that is not JSON", r, status)
	}
	kind, coded := kindOfCode[eb.Code]
	if !coded {
		kind = kindOfStatus(status)
	}
	msg := eb.Message
	if msg == "" {
		msg = strings.ToLower(http.StatusText(status))
	}
	if status >= 500 {
		// A server fault is Internal; a service that cannot serve now
		// (Unavailable) or whose storage is full (NoSpace) says so. The
		// status is in the message when no code of the service's gave
		// the kind (a proxy's answer, say): the code says it otherwise.
		if kind != kms.KindUnavailable && kind != kms.KindNoSpace {
			kind = kms.KindInternal
		}
		if !coded {
			msg = fmt.Sprintf("%s (HTTP %d)", msg, status)
		}
		return &kms.Error{Kind: kind, Message: msg}
	}
	e := &kms.Error{Kind: kind, Message: msg, Fields: eb.Errors, State: eb.State}
	if len(eb.Results) > 0 && string(eb.Results) != "null" {
		e.Details = eb.Results
		if eb.State == statePasswordCheck {
			var pc kms.PasswordCheck
			if json.Unmarshal(eb.Results, &pc) == nil {
				e.Details = pc
			}
		}
	}
	return e
}

// kindOfCode maps the "code" member of an error answer back to its kind.
// It is built from kms.Kind.String, so it holds every kind kms has.
var kindOfCode = func() map[string]kms.Kind {
	m := map[string]kms.Kind{}
	for k := kms.Kind(0); ; k++ {
		name := k.String()
		if strings.HasPrefix(name, "kind(") {
			return m
		}
		m[name] = k
	}
}()

// kindOfStatus is the kind of an error answer without a known code (an
// empty {} from password reset, a 405, a proxy's answer).
func kindOfStatus(status int) kms.Kind {
	switch status {
	case http.StatusUnauthorized:
		return kms.KindUnauthenticated
	case http.StatusForbidden:
		return kms.KindPermissionDenied
	case http.StatusNotFound:
		return kms.KindNotFound
	case http.StatusRequestEntityTooLarge:
		return kms.KindTooLarge
	case http.StatusUnprocessableEntity:
		return kms.KindUnprocessable
	case http.StatusTooManyRequests:
		return kms.KindRateLimited
	case http.StatusInsufficientStorage:
		return kms.KindNoSpace
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return kms.KindUnavailable
	case http.StatusGone:
		return kms.KindDestroyed
	}
	if status >= 400 && status < 500 {
		return kms.KindInvalid
	}
	return kms.KindInternal
}

// gatewayStatus reports whether status says that the service could not be
// reached or cannot serve now: 502, 503 or 504.
func gatewayStatus(status int) bool { return kindOfStatus(status) == kms.KindUnavailable }

// jsonContent reports whether a Content-Type is JSON.
func jsonContent(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// endpoint returns path with each %s replaced by the next of params,
// escaped as one path segment.
func endpoint(path string, params ...string) string {
	args := make([]any, len(params))
	for i, p := range params {
		args[i] = url.PathEscape(p)
	}
	return fmt.Sprintf(path, args...)
}

// query returns the query of name, value pairs; pairs with an empty value
// are left out.
func query(pairs ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	return q
}

// pageQuery is query with the cursor and limit of a page request.
func pageQuery(p kms.PageRequest, pairs ...string) url.Values {
	q := query(pairs...)
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return q
}

// yes is "true" when b holds, for the ?id=true style of flags; else empty,
// which query leaves out.
func yes(b bool) string {
	if b {
		return "true"
	}
	return ""
}

// call sends r with a new T as its answer and returns it.
func call[T any](c *Client, ctx context.Context, r req) (*T, error) {
	out := new(T)
	r.out = out
	if err := c.do(ctx, r); err != nil {
		return nil, err
	}
	return out, nil
}

// wrapper is the answer B that wraps its value, a T, in one member
// ({"ring": ...}, {"key": ...}, {"config": ...}, {"message": ...}).
type wrapper[T, B any] interface {
	*B
	value() T
}

// callWrapped is call for an answer B that wraps its value: it returns
// the value.
func callWrapped[T, B any, W wrapper[T, B]](c *Client, ctx context.Context, r req) (T, error) {
	b, err := call[B](c, ctx, r)
	if err != nil {
		var zero T
		return zero, err
	}
	return W(b).value(), nil
}
