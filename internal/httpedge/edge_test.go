package httpedge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// caller is the principal of the tests' domain.
type caller struct{ id string }

type (
	addrKey   struct{}
	callerKey struct{}
)

// domain is a small domain for the pipeline: two credentials, a rate
// limit that refuses what the test names, and a record of what it was
// asked, in order.
type domain struct {
	mu       sync.Mutex
	calls    []string // "addr <address>", "caller <id>", "auth <secret>"
	refuse   string   // the entry of calls to refuse, RateLimited
	sent     int      // answer notices sent
	requests []string // ObserveRequest: "METHOD route status"
	refused  int      // ObserveRefusedCredential
}

func (d *domain) note(s string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, s)
	return s == d.refuse
}

func (d *domain) ObserveRequest(method, route string, status int, _ time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requests = append(d.requests, fmt.Sprintf("%s %s %d", method, route, status))
}

func (d *domain) ObserveRefusedCredential() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refused++
}

func (d *domain) hooks() Domain[*caller] {
	return Domain[*caller]{
		WithClientAddr: func(ctx context.Context, addr string) context.Context {
			return context.WithValue(ctx, addrKey{}, addr)
		},
		Admit: func(ctx context.Context, p *caller) error {
			what := "addr " + fmt.Sprint(ctx.Value(addrKey{}))
			if p != nil {
				what = "caller " + p.id
			}
			if d.note(what) {
				return &base.Error{Kind: base.KindRateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond}
			}
			return nil
		},
		Authenticate: func(_ context.Context, secret string) (*caller, error) {
			d.note("auth " + secret)
			switch secret {
			case "good-secret":
				return &caller{id: "k1"}, nil
			case "broken":
				return nil, base.Errorf(base.KindUnavailable, "store down")
			}
			return nil, base.Errorf(base.KindUnauthenticated, "invalid credential")
		},
		WithPrincipal: func(ctx context.Context, p *caller) context.Context { return context.WithValue(ctx, callerKey{}, p) },
		PrincipalID:   func(p *caller) string { return p.id },
		AnswerNotice: func(ctx context.Context) (context.Context, func()) {
			var once sync.Once
			return ctx, func() {
				once.Do(func() {
					d.mu.Lock()
					d.sent++
					d.mu.Unlock()
				})
			}
		},
		Secret: func(seg string) bool { return strings.HasPrefix(seg, "sk_") },
	}
}

// testStatus is the tests' protocol's status of an error.
func testStatus(err error) int {
	if se := AsStatusError(err); se != nil {
		return se.Status
	}
	switch base.ErrorKind(err) {
	case base.KindUnauthenticated:
		return http.StatusUnauthorized
	case base.KindRateLimited:
		return http.StatusTooManyRequests
	case base.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case base.KindInvalid:
		return http.StatusBadRequest
	case base.KindUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeTest is the tests' protocol's writer: {"error": message}, or the
// answer given.
func writeTest(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeTestError(w http.ResponseWriter, r *http.Request, err error) {
	status := testStatus(err)
	NoteError(r, err, "code_"+base.ErrorKind(err).String())
	SetRetryAfter(w.Header(), err)
	writeTest(w, status, map[string]string{"error": Message(err, status)})
}

// served is a server of routes over the tests' domain, with its log.
type served struct {
	url  string
	dom  *domain
	logs *kmsdtest.Buffer
	edge *Edge[*caller]
}

func serveRoutes(t *testing.T, change func(*Config[*caller]), routes ...Route) *served {
	t.Helper()
	s := &served{dom: &domain{}, logs: &kmsdtest.Buffer{}}
	log := zerolog.New(s.logs)
	cfg := Config[*caller]{
		Domain: s.dom.hooks(), Logger: &log, DefaultMaxBodyBytes: 64, Requests: s.dom,
		WriteError: writeTestError, PanicCode: "internal",
		NotFound: func(w http.ResponseWriter, r *http.Request) {
			writeTestError(w, r, &StatusError{Status: http.StatusNotFound, Message: "no " + s.edge.RedactPath(r.URL.Path)})
		},
		MethodNotAllowed: func(w http.ResponseWriter, r *http.Request) {
			writeTestError(w, r, &StatusError{Status: http.StatusMethodNotAllowed, Message: "allowed: " + w.Header().Get("Allow")})
		},
	}
	if change != nil {
		change(&cfg)
	}
	s.edge = New(cfg)
	srv := httptest.NewServer(s.edge.Handler(routes))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// do sends a request with the headers given ("Name: value" each) and
// returns its answer, with its body read.
func (s *served) do(t *testing.T, method, path, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		r.Header.Add(name, value)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// line returns the log line of the request whose ID is id.
func (s *served) line(t *testing.T, id string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(s.logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["req_id"] == id {
			return m
		}
	}
	t.Fatalf("no log line with req_id %q in\n%s", id, s.logs.String())
	return nil
}

// whoami answers the caller's ID and address, as the domain sees them.
func whoami(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, _ := r.Context().Value(callerKey{}).(*caller)
	id := ""
	if p != nil {
		id = p.id
	}
	writeTest(w, http.StatusOK, map[string]any{"caller": id, "addr": r.Context().Value(addrKey{})})
}

func TestServe(t *testing.T) {
	s := serveRoutes(t, func(c *Config[*caller]) { c.Prefix = "/v9" },
		Route{Method: "GET", Path: "/who/:name", Handle: whoami},
		Route{Method: "GET", Path: "/open", Handle: whoami, Public: true},
		Route{Method: "GET", Path: "/health", Handle: whoami, Public: true, Unlimited: true},
		Route{Method: "POST", Path: "/batch", Handle: whoami, AdmitsCaller: true},
	)
	bearer := "Authorization: Bearer good-secret"

	resp, body := s.do(t, "GET", "/v9/who/ada", "", bearer)
	if resp.StatusCode != 200 || body != `{"addr":"127.0.0.1","caller":"k1"}` {
		t.Fatalf("GET /v9/who/ada = %d %s", resp.StatusCode, body)
	}
	id := resp.Header.Get(RequestIDHeader)
	if len(id) != 20 {
		t.Errorf("request ID %q", id)
	}
	l := s.line(t, id)
	want := map[string]any{"level": "info", "method": "GET", "route": "/v9/who/:name", "path": "/v9/who/ada",
		"status": float64(200), "size": float64(len(body)), "principal": "k1", "message": "request"}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("log line %s = %v, want %v (%v)", k, l[k], v, l)
		}
	}
	if got := strings.Join(s.dom.calls, ", "); got != "addr 127.0.0.1, auth good-secret, caller k1" {
		t.Errorf("the domain was asked: %s", got)
	}

	t.Run("public, unlimited and batch routes", func(t *testing.T) {
		for _, tc := range []struct{ method, path, calls string }{
			{"GET", "/v9/open", "addr 127.0.0.1"},
			{"GET", "/v9/health", ""},
			{"POST", "/v9/batch", "addr 127.0.0.1, auth good-secret"},
		} {
			s.dom.calls = nil
			if resp, body := s.do(t, tc.method, tc.path, "", bearer); resp.StatusCode != 200 {
				t.Errorf("%s %s = %d %s", tc.method, tc.path, resp.StatusCode, body)
			}
			if got := strings.Join(s.dom.calls, ", "); got != tc.calls {
				t.Errorf("%s %s: the domain was asked %q, want %q", tc.method, tc.path, got, tc.calls)
			}
		}
	})

	t.Run("refused calls", func(t *testing.T) {
		for _, refuse := range []string{"addr 127.0.0.1", "caller k1"} {
			s.dom.refuse = refuse
			resp, body := s.do(t, "GET", "/v9/who/ada", "", bearer)
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || body != `{"error":"slow down"}` {
				t.Errorf("refused %s: %d %s, Retry-After %q", refuse, resp.StatusCode, body, resp.Header.Get("Retry-After"))
			}
			if l := s.line(t, resp.Header.Get(RequestIDHeader)); l["code"] != "code_rate_limited" {
				t.Errorf("refused %s: log line %v", refuse, l)
			}
		}
		s.dom.refuse = ""
	})

	t.Run("observers", func(t *testing.T) {
		s.dom.requests, s.dom.refused = nil, 0
		s.do(t, "GET", "/v9/who/ada", "", bearer)
		s.do(t, "GET", "/v9/who/ada", "")
		s.do(t, "GET", "/v9/who/ada", "", "Authorization: Bearer wrong")
		s.do(t, "GET", "/v9/who/ada", "", "Authorization: Bearer broken") // not a refusal: 503
		s.do(t, "GET", "/v9/nowhere", "")
		s.do(t, "DELETE", "/v9/open", "")
		want := "GET /v9/who/:name 200, GET /v9/who/:name 401, GET /v9/who/:name 401, GET /v9/who/:name 503, GET  404, DELETE  405"
		if got := strings.Join(s.dom.requests, ", "); got != want {
			t.Errorf("ObserveRequest got\n\t%s\nwant\n\t%s", got, want)
		}
		if s.dom.refused != 2 {
			t.Errorf("ObserveRefusedCredential called %d times, want 2", s.dom.refused)
		}
	})
}

func TestCredentials(t *testing.T) {
	routes := []Route{{Method: "GET", Path: "/who", Handle: whoami}}
	s := serveRoutes(t, nil, routes...)
	for _, tc := range []struct {
		headers []string
		status  int
		body    string
	}{
		{nil, 401, `{"error":"missing credential: send Authorization: Bearer \u003cAPI key\u003e"}`},
		{[]string{"Authorization: Bearer good-secret", "Authorization: Bearer good-secret"}, 401, `{"error":"send one Authorization header, not 2"}`},
		{[]string{"Authorization: Basic abc"}, 401, `{"error":"malformed Authorization header: use Bearer \u003cAPI key\u003e"}`},
		{[]string{"Authorization: Bearer nope"}, 401, `{"error":"invalid credential"}`},
		{[]string{"X-Vault-Token: good-secret"}, 401, `{"error":"missing credential: send Authorization: Bearer \u003cAPI key\u003e"}`},
		{[]string{"authorization: bearer good-secret"}, 200, `{"addr":"127.0.0.1","caller":"k1"}`},
	} {
		if resp, body := s.do(t, "GET", "/who", "", tc.headers...); resp.StatusCode != tc.status || body != tc.body {
			t.Errorf("Bearer, %q: %d %s, want %d %s", tc.headers, resp.StatusCode, body, tc.status, tc.body)
		}
	}

	denied := base.Errorf(base.KindUnauthenticated, "permission denied")
	v := serveRoutes(t, func(c *Config[*caller]) {
		c.Credential, c.Refusal = TokenOrBearer("x-vault-token"), denied
	}, routes...)
	for _, tc := range []struct {
		headers []string
		status  int
	}{
		{[]string{"X-Vault-Token: good-secret"}, 200},
		{[]string{"Authorization: Bearer good-secret"}, 200},
		{[]string{"X-Vault-Token: good-secret", "Authorization: Bearer nope"}, 200},
		{[]string{"X-Vault-Token: nope", "Authorization: Bearer good-secret"}, 401},
		{[]string{"X-Vault-Token: good-secret", "X-Vault-Token: good-secret"}, 401},
		{[]string{"X-Vault-Token: "}, 401},
		{nil, 401},
		{[]string{"X-Vault-Token: broken"}, 503},
	} {
		resp, body := v.do(t, "GET", "/who", "", tc.headers...)
		if resp.StatusCode != tc.status || (tc.status == 401 && body != `{"error":"permission denied"}`) {
			t.Errorf("TokenOrBearer, %q: %d %s, want %d", tc.headers, resp.StatusCode, body, tc.status)
		}
	}
	if v.dom.refused != 4 {
		t.Errorf("ObserveRefusedCredential called %d times, want 4", v.dom.refused)
	}
	// Space around a secret, which a server trims off a header's value,
	// is refused too.
	for _, h := range []string{"X-Vault-Token", "Authorization"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header[h] = []string{"Bearer good-secret\t"}
		if secret, err := TokenOrBearer("X-Vault-Token")(r); base.ErrorKind(err) != base.KindUnauthenticated {
			t.Errorf("TokenOrBearer of %s: %q = %q, %v", h, r.Header[h], secret, err)
		}
	}
}

// TestLogRedaction: the log line and the answers hide what may be a
// secret in a path; a SecretPath route's line has its pattern only.
func TestLogRedaction(t *testing.T) {
	s := serveRoutes(t, nil,
		Route{Method: "GET", Path: "/keys/:key", Handle: whoami, Public: true, SecretPath: true},
		Route{Method: "GET", Path: "/open/:x", Handle: whoami, Public: true},
	)
	for _, tc := range []struct{ path, route, logged string }{
		{"/keys/sk_live", "/keys/:key", ""},
		{"/open/sk_live", "/open/:x", "/open/<redacted>"},
		{"/nowhere/sk_live/x", "", "/nowhere/<redacted>/x"},
		{"/apikey/anything", "", "/apikey/<redacted>"},
	} {
		resp, body := s.do(t, "GET", tc.path, "")
		if strings.Contains(body, "sk_live") {
			t.Errorf("GET %s answers the secret: %s", tc.path, body)
		}
		l := s.line(t, resp.Header.Get(RequestIDHeader))
		if path, _ := l["path"].(string); path != tc.logged {
			t.Errorf("GET %s: logged path %q, want %q", tc.path, path, tc.logged)
		}
		if route, _ := l["route"].(string); route != tc.route {
			t.Errorf("GET %s: logged route %q, want %q", tc.path, route, tc.route)
		}
	}
	if strings.Contains(s.logs.String(), "sk_live") {
		t.Errorf("the log has a secret:\n%s", s.logs.String())
	}
}

// TestPanic: a handler that panics before its answer is answered the
// protocol's 500; one that panics after its answer leaves that answer
// whole, and its log line its status and the code of the panic (the
// error itself is logged for a 5xx only). A LeavesWork route's notice is
// sent all the same.
func TestPanic(t *testing.T) {
	s := serveRoutes(t, nil,
		Route{Method: "GET", Path: "/before", Public: true, LeavesWork: true, Handle: func(http.ResponseWriter, *http.Request, httprouter.Params) {
			panic("before the answer")
		}},
		Route{Method: "GET", Path: "/after", Public: true, Handle: func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
			writeTest(w, http.StatusMultiStatus, map[string]string{"answer": "whole"})
			panic("after the answer")
		}},
		Route{Method: "GET", Path: "/abort", Public: true, Handle: func(http.ResponseWriter, *http.Request, httprouter.Params) {
			panic(http.ErrAbortHandler)
		}},
	)
	resp, body := s.do(t, "GET", "/before", "")
	if resp.StatusCode != 500 || body != `{"error":"internal error"}` {
		t.Errorf("panic before the answer: %d %s", resp.StatusCode, body)
	}
	l := s.line(t, resp.Header.Get(RequestIDHeader))
	if e, _ := l["error"].(string); l["level"] != "error" || l["status"] != float64(500) || !strings.Contains(e, "panic: before the answer") || !strings.Contains(e, "goroutine") {
		t.Errorf("panic before the answer: log line %v", l)
	}
	if s.dom.sent != 1 {
		t.Errorf("panic of a LeavesWork route: %d notices sent, want 1", s.dom.sent)
	}

	resp, body = s.do(t, "GET", "/after", "")
	if resp.StatusCode != http.StatusMultiStatus || body != `{"answer":"whole"}` {
		t.Errorf("panic after the answer: %d %q, want the answer alone", resp.StatusCode, body)
	}
	l = s.line(t, resp.Header.Get(RequestIDHeader))
	if _, ok := l["error"]; l["status"] != float64(207) || l["code"] != "internal" || ok {
		t.Errorf("panic after the answer: log line %v", l)
	}

	r, _ := http.NewRequest("GET", s.url+"/abort", nil)
	if resp, err := http.DefaultClient.Do(r); err == nil {
		resp.Body.Close()
		t.Errorf("http.ErrAbortHandler: answered %d, want the connection aborted", resp.StatusCode)
	}
}

// TestBodyCap: the body is capped at MaxBodyBytes, told by its length or
// found reading it; a LeavesWork route's answer is flushed before its
// notice is sent.
func TestBodyCap(t *testing.T) {
	var s *served
	read := func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		var buf bytes.Buffer
		err := s.edge.CheckLength(r)
		if err == nil {
			err = ReadBody(&buf, r.Body)
		}
		if err != nil {
			writeTestError(w, r, err)
			return
		}
		writeTest(w, http.StatusOK, map[string]int{"read": buf.Len()})
	}
	s = serveRoutes(t, nil, Route{Method: "POST", Path: "/read", Handle: read, Public: true, LeavesWork: true})
	resp, body := s.do(t, "POST", "/read", strings.Repeat("x", 64))
	if resp.StatusCode != 200 || body != `{"read":64}` {
		t.Errorf("a body of the cap: %d %s", resp.StatusCode, body)
	}
	if s.dom.sent != 1 {
		t.Errorf("%d notices sent, want 1", s.dom.sent)
	}
	resp, body = s.do(t, "POST", "/read", strings.Repeat("x", 65))
	if resp.StatusCode != 413 || body != `{"error":"request body is larger than 64 bytes"}` {
		t.Errorf("a body past the cap: %d %s", resp.StatusCode, body)
	}
	// Without a length, the cap is found reading.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(strings.Repeat("y", 100)))
		pw.Close()
	}()
	r, _ := http.NewRequest("POST", s.url+"/read", pr)
	resp2, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != 413 || string(b) != `{"error":"request body is larger than 64 bytes"}` {
		t.Errorf("a body past the cap, unannounced: %d %s", resp2.StatusCode, b)
	}
	if err := ReadBody(new(bytes.Buffer), errReader{errors.New("reset")}); base.ErrorKind(err) != base.KindInvalid ||
		base.ErrorMessage(err) != "cannot read the request body: reset" {
		t.Errorf("ReadBody of a failing body: %v", err)
	}
}

// errReader fails with its error.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// TestRequestID: every request gets a new ID of 20 characters of
// lower-case base32hex, in its header and its log line, which RequestID
// tells the handler.
func TestRequestID(t *testing.T) {
	seen := make(map[string]bool)
	s := serveRoutes(t, nil, Route{Method: "GET", Path: "/id", Public: true, Handle: func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		writeTest(w, http.StatusOK, RequestID(r))
	}})
	for range 50 {
		resp, body := s.do(t, "GET", "/id", "")
		id := resp.Header.Get(RequestIDHeader)
		if len(id) != 20 || strings.Trim(id, "0123456789abcdefghijklmnopqrstuv") != "" {
			t.Fatalf("request ID %q: want 20 characters of 0-9 and a-v", id)
		}
		if body != `"`+id+`"` {
			t.Fatalf("RequestID = %s, header %q", body, id)
		}
		if seen[id] {
			t.Fatalf("request ID %q given twice", id)
		}
		seen[id] = true
		s.line(t, id)
	}
	if id := RequestID(httptest.NewRequest("GET", "/", nil)); id != "" {
		t.Errorf("RequestID outside Log = %q", id)
	}
}

// TestSignedRequests: a protocol that authenticates a request itself
// (Config.Authenticate) reads its capped body, which its handler reads
// again; a refusal is counted as any refused credential, and the handler
// never runs.
func TestSignedRequests(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			writeTestError(w, r, err)
			return
		}
		p, _ := r.Context().Value(callerKey{}).(*caller)
		writeTest(w, http.StatusOK, map[string]any{"caller": p.id, "body": string(b)})
	}
	s := serveRoutes(t, func(c *Config[*caller]) {
		c.Authenticate = func(r *http.Request) (*caller, error) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, base.Errorf(base.KindTooLarge, "body: %v", err)
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			if r.Header.Get("X-Signature") != "sig:"+string(b) {
				return nil, base.Errorf(base.KindUnauthenticated, "signature does not match")
			}
			return &caller{id: "signer"}, nil
		}
	}, Route{Method: "POST", Path: "/", Handle: echo})
	if resp, body := s.do(t, "POST", "/", "hello", "X-Signature: sig:hello"); resp.StatusCode != 200 || body != `{"body":"hello","caller":"signer"}` {
		t.Fatalf("a signed request: %d %s", resp.StatusCode, body)
	}
	if resp, body := s.do(t, "POST", "/", "hello", "X-Signature: sig:other"); resp.StatusCode != 401 || !strings.Contains(body, "does not match") {
		t.Fatalf("a request signed for another body: %d %s", resp.StatusCode, body)
	}
	if resp, _ := s.do(t, "POST", "/", strings.Repeat("x", 65), "X-Signature: sig:"+strings.Repeat("x", 65)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a signed request over the body cap: %d, want 413", resp.StatusCode)
	}
	if s.dom.refused != 1 {
		t.Errorf("ObserveRefusedCredential called %d times, want 1", s.dom.refused)
	}
}
