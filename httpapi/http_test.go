package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/kmstest"
)

func TestBearer(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		auth   []string
		status int
	}{
		{"valid", []string{"Bearer " + e.root}, http.StatusOK},
		{"scheme lower case", []string{"bearer " + e.root}, http.StatusOK},
		{"scheme upper case", []string{"BEARER " + e.root}, http.StatusOK},
		{"no header", nil, http.StatusUnauthorized},
		{"empty header", []string{""}, http.StatusUnauthorized},
		{"no scheme", []string{e.root}, http.StatusUnauthorized},
		{"scheme alone", []string{"Bearer"}, http.StatusUnauthorized},
		{"scheme and space", []string{"Bearer "}, http.StatusUnauthorized},
		{"two spaces", []string{"Bearer  " + e.root}, http.StatusUnauthorized},
		{"tab", []string{"Bearer\t" + e.root}, http.StatusUnauthorized},
		{"no space", []string{"Bearer" + e.root}, http.StatusUnauthorized},
		{"Basic", []string{"Basic " + e.root}, http.StatusUnauthorized},
		{"Token", []string{"Token " + e.root}, http.StatusUnauthorized},
		{"wrong secret", []string{"Bearer " + e.root + "x"}, http.StatusUnauthorized},
		{"trailing garbage", []string{"Bearer " + e.root + " x"}, http.StatusUnauthorized},
		{"very long secret", []string{"Bearer " + strings.Repeat("k", 4000)}, http.StatusUnauthorized},
		{"two headers", []string{"Bearer " + e.root, "Bearer " + e.root}, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.send(t, "GET", "/ks/keyrings", req{auth: tc.auth})
			if tc.status == http.StatusOK {
				r.want(t, http.StatusOK)
				return
			}
			msg := r.wantError(t, http.StatusUnauthorized, "unauthenticated")
			if strings.Contains(msg, e.root) {
				t.Errorf("401 message %q echoes the secret", msg)
			}
			if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("401 WWW-Authenticate = %q, want Bearer", got)
			}
		})
	}
	t.Run("credential checked before the body", func(t *testing.T) {
		r := e.send(t, "POST", "/ks/keyrings", req{body: "{not json", contentType: "text/plain"})
		r.wantError(t, http.StatusUnauthorized, "unauthenticated")
	})
}

func TestRequestBody(t *testing.T) {
	e := newEnv(t, func(o *envOptions) { o.maxBody = 4096 })
	ok := `{"name": "NAME", "kem": "x25519"}`
	n := 0
	name := func() string { n++; return "body-" + string(rune('a'+n)) }

	tests := []struct {
		name        string
		body        string
		contentType string
		chunked     bool
		status      int
		code        string
		inMessage   string
	}{
		{name: "plain", body: ok, status: http.StatusOK},
		{name: "charset parameter", body: ok, contentType: "application/json; charset=utf-8", status: http.StatusOK},
		{name: "media type in upper case", body: ok, contentType: "Application/JSON", status: http.StatusOK},
		{name: "unknown members", body: `{"name": "NAME", "kem": "x25519", "extra": {"a": [1, 2]}, "more": null}`, status: http.StatusOK},
		{name: "chunked", body: ok, chunked: true, status: http.StatusOK},
		{name: "no Content-Type", body: ok, contentType: "-", status: http.StatusBadRequest, code: "invalid", inMessage: "Content-Type"},
		{name: "text/plain", body: ok, contentType: "text/plain", status: http.StatusBadRequest, code: "invalid", inMessage: "Content-Type"},
		{name: "application/jsonx", body: ok, contentType: "application/jsonx", status: http.StatusBadRequest, code: "invalid", inMessage: "Content-Type"},
		{name: "malformed Content-Type", body: ok, contentType: "application/json; =", status: http.StatusBadRequest, code: "invalid", inMessage: "Content-Type"},
		{name: "empty body", body: "", status: http.StatusBadRequest, code: "invalid", inMessage: "body is required"},
		{name: "blank body", body: " \n", status: http.StatusBadRequest, code: "invalid", inMessage: "body is required"},
		{name: "truncated JSON", body: `{"name": "x"`, status: http.StatusBadRequest, code: "invalid", inMessage: "invalid JSON body"},
		{name: "not JSON", body: `name=x`, status: http.StatusBadRequest, code: "invalid", inMessage: "invalid JSON body"},
		{name: "trailing garbage", body: `{"name": "x"} x`, status: http.StatusBadRequest, code: "invalid", inMessage: "invalid JSON body"},
		{name: "two objects", body: `{"name": "x"}{"name": "y"}`, status: http.StatusBadRequest, code: "invalid", inMessage: "invalid JSON body"},
		{name: "array", body: `[{"name": "x"}]`, status: http.StatusBadRequest, code: "invalid", inMessage: "must be an object"},
		{name: "string", body: `"x"`, status: http.StatusBadRequest, code: "invalid", inMessage: "must be an object"},
		{name: "name of wrong type", body: `{"name": 5}`, status: http.StatusBadRequest, code: "invalid", inMessage: `"name" must be a string`},
		{name: "props of wrong type", body: `{"name": "x", "props": [1]}`, status: http.StatusBadRequest, code: "invalid", inMessage: `"props" must be an object`},
		{name: "null body", body: `null`, status: http.StatusBadRequest, code: "invalid", inMessage: "name is required"},
		{name: "too large", body: `{"name": "x", "props": {"pad": "` + strings.Repeat("p", 5000) + `"}}`, status: http.StatusRequestEntityTooLarge, code: "too_large", inMessage: "4096"},
		{name: "too large, chunked", body: `{"name": "x", "props": {"pad": "` + strings.Repeat("p", 5000) + `"}}`, chunked: true, status: http.StatusRequestEntityTooLarge, code: "too_large", inMessage: "4096"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.ReplaceAll(tc.body, "NAME", name())
			r := e.send(t, "POST", "/ks/keyrings", req{body: body, contentType: tc.contentType, chunked: tc.chunked, auth: []string{"Bearer " + e.root}})
			if tc.status == http.StatusOK {
				r.want(t, http.StatusOK)
				return
			}
			msg := r.wantError(t, tc.status, tc.code)
			if !strings.Contains(msg, tc.inMessage) {
				t.Errorf("POST /ks/keyrings message = %q, want it to contain %q", msg, tc.inMessage)
			}
		})
	}
	t.Run("default cap is 1 MiB", func(t *testing.T) {
		d := newEnv(t)
		pad := strings.Repeat("p", 1<<20)
		msg := d.do(t, "POST", "/ks/keyrings", d.root, `{"name": "big", "props": {"pad": "`+pad+`"}}`).wantError(t, http.StatusRequestEntityTooLarge, "too_large")
		if !strings.Contains(msg, "1048576") {
			t.Errorf("413 message %q does not give the limit 1048576", msg)
		}
	})
}

func TestRouting(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, method, path string
		status             int
		code, allow        string
	}{
		{"unknown path", "GET", "/nope", http.StatusNotFound, "not_found", ""},
		{"root", "GET", "/", http.StatusNotFound, "not_found", ""},
		{"trailing slash", "GET", "/ks/keyrings/", http.StatusNotFound, "not_found", ""},
		{"unknown /ks path", "POST", "/ks/keyring", http.StatusNotFound, "not_found", ""},
		{"upper case path", "GET", "/KS/KEYRINGS", http.StatusNotFound, "not_found", ""},
		{"unknown /auth path", "GET", "/auth/user", http.StatusNotFound, "not_found", ""},
		{"wrong method on a user", "POST", "/auth/users/alice", http.StatusMethodNotAllowed, "method_not_allowed", "DELETE, GET, PATCH"},
		{"wrong method on an API key", "PUT", "/auth/apikey/x", http.StatusMethodNotAllowed, "method_not_allowed", "DELETE, GET"},
		{"wrong method", "DELETE", "/ks/encrypt", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
		{"wrong method on config", "POST", "/ks/config", http.StatusMethodNotAllowed, "method_not_allowed", "GET, PUT"},
		{"wrong method on healthz", "POST", "/healthz", http.StatusMethodNotAllowed, "method_not_allowed", "GET"},
		{"OPTIONS", "OPTIONS", "/ks/keyrings", http.StatusMethodNotAllowed, "method_not_allowed", "GET, POST"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, tc.method, tc.path, e.root, nil)
			r.wantError(t, tc.status, tc.code)
			if tc.allow != "" && r.header.Get("Allow") != tc.allow {
				t.Errorf("%s %s: Allow = %q, want %q", tc.method, tc.path, r.header.Get("Allow"), tc.allow)
			}
			if r.header.Get(httpapi.RequestIDHeader) == "" {
				t.Errorf("%s %s: no %s header", tc.method, tc.path, httpapi.RequestIDHeader)
			}
		})
	}
	t.Run("404 without credential", func(t *testing.T) {
		e.do(t, "GET", "/nope", "", nil).wantError(t, http.StatusNotFound, "not_found")
	})
	t.Run("answers are not cached", func(t *testing.T) {
		r := e.do(t, "GET", "/ks/keyrings", e.root, nil).want(t, http.StatusOK)
		if r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /ks/keyrings headers %v, want Cache-Control: no-store and X-Content-Type-Options: nosniff", r.header)
		}
	})
}

func TestHealthz(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "GET", "/healthz", "", nil).want(t, http.StatusOK)
	if body := r.object(t); len(body) != 1 || body["status"] != "ok" {
		t.Errorf("GET /healthz = %s, want {\"status\":\"ok\"}", r.body)
	}
	e.do(t, "GET", "/healthz", "rk_wrong", nil).want(t, http.StatusOK)

	e.store.down.Store(true)
	r = e.do(t, "GET", "/healthz", "", nil)
	msg := r.wantError(t, http.StatusServiceUnavailable, "unavailable")
	if strings.Contains(string(r.body), "disk on fire") || strings.Contains(msg, "secret-path") {
		t.Errorf("503 body %s leaks the store error", r.body)
	}
	if !strings.Contains(e.logs.String(), "disk on fire") {
		t.Errorf("the log does not have the store error: %s", e.logs.String())
	}
	e.store.down.Store(false)
	e.do(t, "GET", "/healthz", "", nil).want(t, http.StatusOK)
}

// TestFullDisk: while the store's disk is below its reserve, /healthz
// answers 503 saying why, every call that writes (reads too: each writes
// its activity record) answers 507, and nothing leaks the path; once
// there is room, the same calls succeed without a restart.
func TestFullDisk(t *testing.T) {
	e := newEnv(t)
	e.do(t, "POST", "/ks/keyrings", e.root, map[string]any{"name": "pay"}).want(t, http.StatusOK)
	e.store.full.Store(true)
	r := e.do(t, "GET", "/healthz", "", nil)
	msg := r.wantError(t, http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(msg, "disk is full") {
		t.Errorf("GET /healthz on a full disk says %q, want it to say the disk is full", msg)
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/ks/encrypt", map[string]any{"ringname": "pay"}},
		{"POST", "/ks/keyrings", map[string]any{"name": "other"}},
		{"GET", "/ks/keyrings/pay", nil},
	} {
		r := e.do(t, c.method, c.path, e.root, c.body)
		msg := r.wantError(t, http.StatusInsufficientStorage, "insufficient_storage")
		if !strings.Contains(msg, "disk is full") || strings.Contains(string(r.body), "secret-path") {
			t.Errorf("%s %s on a full disk = %s, want a message that the disk is full, and no path", c.method, c.path, r.body)
		}
	}
	e.store.full.Store(false)
	e.do(t, "GET", "/healthz", "", nil).want(t, http.StatusOK)
	e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": "pay"}).want(t, http.StatusOK)
	e.do(t, "GET", "/ks/keyrings/other", e.root, nil).want(t, http.StatusNotFound)
}

func TestMountedUnderPrefix(t *testing.T) {
	e := newEnv(t)
	srv, _ := kmstest.Serve(t, httpapi.New(e.svc, httpapi.Options{}), "/kms/")
	auth := []string{"Bearer " + e.root}

	send(t, srv.URL, "GET", "/kms/healthz", req{}).want(t, http.StatusOK)
	send(t, srv.URL, "POST", "/kms/ks/keyrings", req{auth: auth, body: map[string]any{"name": "mounted", "kem": "x25519"}}).want(t, http.StatusOK)
	send(t, srv.URL, "GET", "/kms/ks/keyrings/mounted", req{auth: auth}).want(t, http.StatusOK)
	send(t, srv.URL, "GET", "/kms/ks/keyrings/mounted/keys?limit=5", req{auth: auth}).want(t, http.StatusOK)
	send(t, srv.URL, "GET", "/kms/ks/keyrings/mounted", req{}).wantError(t, http.StatusUnauthorized, "unauthenticated")
	send(t, srv.URL, "GET", "/kms/nope", req{auth: auth}).wantError(t, http.StatusNotFound, "not_found")
	send(t, srv.URL, "GET", "/kms/ks/keyrings/", req{auth: auth}).wantError(t, http.StatusNotFound, "not_found")
	send(t, srv.URL, "PUT", "/kms/ks/encrypt", req{auth: auth}).wantError(t, http.StatusMethodNotAllowed, "method_not_allowed")
	if r := send(t, srv.URL, "GET", "/other", req{}); r.status != http.StatusTeapot || strings.TrimSpace(string(r.body)) != kmstest.AppBody {
		t.Errorf("GET /other = %d %q, want the mux's own handler", r.status, r.body)
	}
}

func TestRequestLog(t *testing.T) {
	e := newEnv(t)
	secret, keyID := e.apiKey(t, "keyring.*.create", "keyring.*.read")
	const marker = "BODY-MARKER-d41d8cd9"

	created := e.do(t, "POST", "/ks/keyrings", secret, map[string]any{"name": "logged", "kem": "x25519", "props": map[string]any{"m": marker}}).want(t, http.StatusOK)
	missing := e.do(t, "GET", "/ks/keyrings/absent", secret, nil)
	missing.wantError(t, http.StatusNotFound, "not_found")
	e.do(t, "GET", "/ks/keyrings", "", nil).wantError(t, http.StatusUnauthorized, "unauthenticated")

	logs := e.logs.String()
	for _, s := range []string{secret, e.root, marker, decode[map[string]any](t, created)["privateKey"].(string)} {
		if strings.Contains(logs, s) {
			t.Errorf("the log contains a secret or a body: %q", s)
		}
	}
	lines := e.logs.Lines(t)
	if len(lines) != 3 {
		t.Fatalf("got %d log lines, want 3 (one per request):\n%s", len(lines), logs)
	}
	wantLines := []struct {
		method, path, route, principal string
		status                         float64
		code                           string
	}{
		{"POST", "/ks/keyrings", "/ks/keyrings", keyID, 200, ""},
		{"GET", "/ks/keyrings/absent", "/ks/keyrings/:ringname", keyID, 404, "not_found"},
		{"GET", "/ks/keyrings", "/ks/keyrings", "", 401, "unauthenticated"},
	}
	for i, w := range wantLines {
		l := lines[i]
		if l["method"] != w.method || l["path"] != w.path || l["route"] != w.route || l["status"] != w.status {
			t.Errorf("log line %d = %v, want method %s, path %s, route %s, status %v", i, l, w.method, w.path, w.route, w.status)
		}
		if got, _ := l["principal"].(string); got != w.principal {
			t.Errorf("log line %d principal = %q, want %q", i, got, w.principal)
		}
		if got, _ := l["code"].(string); got != w.code {
			t.Errorf("log line %d code = %q, want %q", i, got, w.code)
		}
		if id, _ := l["req_id"].(string); len(id) != 20 {
			t.Errorf("log line %d req_id = %v, want a 20-character ID", i, l["req_id"])
		}
		if _, ok := l["duration"].(float64); !ok {
			t.Errorf("log line %d has no duration: %v", i, l)
		}
		if size, _ := l["size"].(float64); size <= 0 {
			t.Errorf("log line %d size = %v, want the body size", i, l["size"])
		}
		if l["level"] != "info" {
			t.Errorf("log line %d level = %v, want info", i, l["level"])
		}
	}
	if lines[0]["size"] != float64(len(created.body)) {
		t.Errorf("log size = %v, want %d", lines[0]["size"], len(created.body))
	}
	if lines[1]["req_id"] != missing.header.Get(httpapi.RequestIDHeader) {
		t.Errorf("log req_id = %v, want the X-Request-Id answered, %q", lines[1]["req_id"], missing.header.Get(httpapi.RequestIDHeader))
	}
	if lines[0]["req_id"] == lines[1]["req_id"] {
		t.Errorf("two requests share the request ID %v", lines[0]["req_id"])
	}
}

func TestNilLogger(t *testing.T) {
	e := newEnv(t)
	srv, _ := kmstest.Serve(t, httpapi.New(e.svc, httpapi.Options{}), "")
	send(t, srv.URL, "GET", "/ks/keyrings", req{auth: []string{"Bearer " + e.root}}).want(t, http.StatusOK)
	r := send(t, srv.URL, "GET", "/nope", req{})
	r.wantError(t, http.StatusNotFound, "not_found")
	if r.header.Get(httpapi.RequestIDHeader) == "" {
		t.Errorf("no %s header without a logger", httpapi.RequestIDHeader)
	}
}

func TestStoreFailure(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "ks")
	r := e.do(t, "POST", "/asym/keyrings", e.root, map[string]any{"name": "asym"}).want(t, http.StatusOK)
	asymKey := decode[struct{ Key struct{ ID string } }](t, r).Key.ID

	e.store.readOnly.Store(true)
	tests := []struct {
		method, path string
		body         any
	}{
		{"POST", "/ks/rotate", map[string]any{"ringname": "ks"}},
		{"POST", "/ks/keyrings", map[string]any{"name": "new", "kem": "x25519"}},
		{"PUT", "/ks/config", map[string]any{"ringname": "ks", "config": map[string]any{}}},
		{"POST", "/asym/keyrings", map[string]any{"name": "new-asym"}},
		{"GET", "/asym/keyrings/asym/keys/" + asymKey, nil},
		{"POST", "/asym/rotate", map[string]any{"ringname": "asym"}},
		{"POST", "/ks/encrypt", map[string]any{"ringname": "ks"}},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := e.do(t, tc.method, tc.path, e.root, tc.body)
			if msg := r.wantError(t, http.StatusInternalServerError, "internal"); msg != "internal error" {
				t.Errorf("%s %s: message = %q, want internal error", tc.method, tc.path, msg)
			}
			if strings.Contains(string(r.body), "disk on fire") {
				t.Errorf("%s %s: body %s leaks the cause", tc.method, tc.path, r.body)
			}
			id := r.header.Get(httpapi.RequestIDHeader)
			var found bool
			for _, l := range e.logs.Lines(t) {
				if l["req_id"] == id {
					found = true
					if errText, _ := l["error"].(string); !strings.Contains(errText, "disk on fire") || l["level"] != "error" {
						t.Errorf("log line %v, want level error and the cause", l)
					}
				}
			}
			if !found {
				t.Errorf("no log line with req_id %s", id)
			}
		})
	}
	e.store.readOnly.Store(false)
	t.Run("recovers", func(t *testing.T) {
		r := e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "ks"}).want(t, http.StatusOK)
		if k := decode[struct{ Key kms.Key }](t, r).Key; k.ID == created.Key.ID {
			t.Errorf("rotation after recovery kept key %s", k.ID)
		}
		if _, err := e.svc.VerifyActivityChain(e.rootCtx); err != nil {
			t.Errorf("VerifyActivityChain() = %v", err)
		}
	})
}
