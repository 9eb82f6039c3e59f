package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/ringkms/kms/httpapi"
)

// spec is the OpenAPI document kmsd embeds and serves, loaded and
// validated once, with a router over its paths.
type spec struct {
	doc    *openapi3.T
	router routers.Router
}

var (
	specOnce sync.Once
	specVal  *spec
	specErr  error
)

// loadSpec loads httpapi's OpenAPI document and checks it (doc.Validate).
// Its servers are dropped, so the router matches any host: kmsd listens on
// a new port at every start.
func loadSpec(t testing.TB) *spec {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(httpapi.OpenAPI())
		if err != nil {
			specErr = fmt.Errorf("load the OpenAPI document: %w", err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			specErr = fmt.Errorf("the OpenAPI document is not valid: %w", err)
			return
		}
		doc.Servers = nil
		router, err := gorillamux.NewRouter(doc)
		if err != nil {
			specErr = fmt.Errorf("route the OpenAPI document: %w", err)
			return
		}
		specVal = &spec{doc: doc, router: router}
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	return specVal
}

// TestOpenAPIDocument checks the document on its own, even with -short.
func TestOpenAPIDocument(t *testing.T) {
	s := loadSpec(t)
	if !s.doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi = %q, want 3.1", s.doc.OpenAPI)
	}
}

// invalidKey marks a context whose request breaks the document on
// purpose: no credential, a malformed value, a missing member. The
// validator then requires the request to fail validation (so the mark
// cannot hide drift), and still validates the answer.
type invalidKey struct{}

// breaksDoc returns ctx marked: its request is meant to break the
// document.
func breaksDoc(ctx context.Context) context.Context {
	return context.WithValue(ctx, invalidKey{}, true)
}

// statusKey marks a context whose request's answer status the
// validating transport writes down (withStatus).
type statusKey struct{}

// withStatus returns ctx marked so that the HTTP status of the answer to
// the request sent with it is written to the int returned, which stays 0
// when no answer came: for a test that must tell a 503 from a 500, or
// from a node that did not answer, where the client's error kinds do not.
func withStatus(ctx context.Context) (context.Context, *int) {
	status := new(int)
	return context.WithValue(ctx, statusKey{}, status), status
}

// validator checks every request and answer against the document and
// counts the statuses each operation answered.
type validator struct {
	t    testing.TB
	spec *spec

	mu   sync.Mutex
	seen map[string]map[int]int // "METHOD /path" of the document -> status -> count
}

func newValidator(t testing.TB) *validator {
	return &validator{t: t, spec: loadSpec(t), seen: map[string]map[int]int{}}
}

// client returns an http.Client whose transport validates.
func (v *validator) client() *http.Client {
	return &http.Client{Transport: &validatingTransport{v: v, base: http.DefaultTransport}}
}

// errorf reports a mismatch. It is safe for concurrent use.
func (v *validator) errorf(format string, args ...any) {
	v.t.Helper()
	v.t.Errorf("OpenAPI: "+format, args...)
}

// note counts one answer of an operation.
func (v *validator) note(op string, status int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen[op] == nil {
		v.seen[op] = map[int]int{}
	}
	v.seen[op][status]++
}

// coverage returns the document's operations the validator saw no answer
// of, and those it saw no 200 of.
func (v *validator) coverage() (unseen, no200 []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for path, item := range v.spec.doc.Paths.Map() {
		for method := range item.Operations() {
			key := method + " " + path
			switch {
			case v.seen[key] == nil:
				unseen = append(unseen, key)
			case v.seen[key][http.StatusOK] == 0:
				no200 = append(no200, key)
			}
		}
	}
	slices.Sort(unseen)
	slices.Sort(no200)
	return unseen, no200
}

// noServerErrors fails the test for every answer that was a 5xx other
// than 503 (a service that cannot serve now), whichever call it answered.
func (v *validator) noServerErrors(t *testing.T) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	for op, statuses := range v.seen {
		for status, n := range statuses {
			if status >= 500 && status != http.StatusServiceUnavailable {
				t.Errorf("%s answered %d %d times; a service that cannot serve answers 503", op, status, n)
			}
		}
	}
}

// summary lists the statuses each operation answered.
func (v *validator) summary() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var lines []string
	for op, st := range v.seen {
		var codes []string
		for code, n := range st {
			codes = append(codes, fmt.Sprintf("%d×%d", code, n))
		}
		slices.Sort(codes)
		lines = append(lines, fmt.Sprintf("%-52s %s", op, strings.Join(codes, " ")))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

type validatingTransport struct {
	v    *validator
	base http.RoundTripper
}

// authenticate is the document's one security scheme: HTTP bearer. It
// checks the shape of the header only; kmsd checks the secret.
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecuritySchemeName != "bearer" {
		return fmt.Errorf("unknown security scheme %q", in.SecuritySchemeName)
	}
	h := in.RequestValidationInput.Request.Header.Values("Authorization")
	if len(h) != 1 || !strings.HasPrefix(h[0], "Bearer ") || len(h[0]) == len("Bearer ") {
		return errors.New("no Authorization: Bearer <secret> header")
	}
	return nil
}

// CloseIdleConnections closes the idle connections of the transport
// below (http.Client.CloseIdleConnections).
func (tr *validatingTransport) CloseIdleConnections() {
	if c, ok := tr.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (tr *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	v := tr.v
	v.t.Helper()
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	name := req.Method + " " + req.URL.Path
	// A path that holds a secret (DELETE /auth/apikey/{secret}) is named by
	// its route below, once it is known.
	route, params, routeErr := v.spec.router.FindRoute(req)
	if routeErr == nil {
		name = req.Method + " " + route.Path
	}
	expectInvalid, _ := req.Context().Value(invalidKey{}).(bool)

	var input *openapi3filter.RequestValidationInput
	if routeErr != nil {
		v.errorf("%s: the document has no such operation: %v", name, routeErr)
	} else {
		// Validate a copy, so the validator's reading cannot disturb the
		// request sent.
		vreq := req.Clone(context.Background())
		if reqBody != nil {
			vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
		}
		input = &openapi3filter.RequestValidationInput{
			Request:    vreq,
			PathParams: params,
			Route:      route,
			Options: &openapi3filter.Options{
				AuthenticationFunc:                authenticate,
				RejectWhenRequestBodyNotSpecified: true,
				SkipSettingDefaults:               true,
				IncludeResponseStatus:             true,
				MultiError:                        true,
			},
		}
		err := openapi3filter.ValidateRequest(context.Background(), input)
		if err == nil {
			err = v.strictRequestBody(route.Operation, reqBody)
		}
		switch {
		case err != nil && !expectInvalid:
			v.errorf("request %s does not match the document: %v\nbody: %s", name, err, clip(reqBody))
		case err == nil && expectInvalid:
			v.errorf("request %s was meant to break the document, but it matches it\nbody: %s", name, clip(reqBody))
		}
	}

	resp, err := tr.base.RoundTrip(req)
	if status, ok := req.Context().Value(statusKey{}).(*int); ok && err == nil {
		*status = resp.StatusCode
	}
	if err != nil || input == nil {
		return resp, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	v.note(name, resp.StatusCode)
	rin := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                input.Options,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		v.errorf("answer %d to %s does not match the document: %v\nbody: %s", resp.StatusCode, name, err, clip(respBody))
	}
	return resp, nil
}

// strictRequestBody checks that a request body sends no member its
// schema does not declare. kmsd ignores unknown members, so the document
// leaves request objects open; the client of this repository must still
// send none, or it and the server may have drifted apart (a renamed
// member the server silently ignores). Objects declared free-form
// (additionalProperties set) are not checked.
func (v *validator) strictRequestBody(op *openapi3.Operation, body []byte) error {
	if op.RequestBody == nil || op.RequestBody.Value == nil || len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	mt := op.RequestBody.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return err
	}
	return undeclaredMembers("body", mt.Schema.Value, value)
}

func undeclaredMembers(at string, s *openapi3.Schema, value any) error {
	if s == nil {
		return nil
	}
	switch value := value.(type) {
	case map[string]any:
		// The members of s and of its alternatives (a nullable member is
		// anyOf [its schema, null]).
		props := map[string]*openapi3.SchemaRef{}
		open := false
		subs := append([]*openapi3.SchemaRef{{Value: s}}, s.AllOf...)
		subs = append(append(subs, s.AnyOf...), s.OneOf...)
		for _, sub := range subs {
			if sub.Value == nil {
				continue
			}
			for name, p := range sub.Value.Properties {
				props[name] = p
			}
			ap := sub.Value.AdditionalProperties
			open = open || ap.Has != nil || ap.Schema != nil
		}
		for name, member := range value {
			p, ok := props[name]
			if !ok {
				if !open && len(props) > 0 {
					return fmt.Errorf("%s: member %q is not in the document", at, name)
				}
				continue
			}
			if err := undeclaredMembers(at+"."+name, p.Value, member); err != nil {
				return err
			}
		}
	case []any:
		items := s.Items
		for _, alt := range s.AnyOf {
			if items == nil && alt.Value != nil {
				items = alt.Value.Items
			}
		}
		if items != nil {
			for i, item := range value {
				if err := undeclaredMembers(fmt.Sprintf("%s[%d]", at, i), items.Value, item); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// clip shortens a body for a failure message.
func clip(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
