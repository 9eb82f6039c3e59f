package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/docblock"
	"github.com/ringkms/kms/internal/httpedge"
	"github.com/ringkms/kms/kmstest"
)

func TestKindStatus(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{kms.Errorf(kms.KindInvalid, "x"), 400, "invalid"},
		{kms.Errorf(kms.KindUnauthenticated, "x"), 401, "unauthenticated"},
		{kms.Errorf(kms.KindPermissionDenied, "x"), 403, "permission_denied"},
		{kms.Errorf(kms.KindNotFound, "x"), 404, "not_found"},
		{kms.Errorf(kms.KindConflict, "x"), 400, "conflict"},
		{kms.Errorf(kms.KindLimit, "x"), 403, "limit"},
		{kms.Errorf(kms.KindUnprocessable, "x"), 422, "unprocessable"},
		{kms.Errorf(kms.KindTooLarge, "x"), 413, "too_large"},
		{kms.Errorf(kms.KindDisabled, "x"), 403, "disabled"},
		{kms.Errorf(kms.KindDestroyed, "x"), 410, "destroyed"},
		{kms.Errorf(kms.KindInternal, "x"), 500, "internal"},
		{kms.Errorf(kms.Kind(200), "x"), 500, "internal"},
		{errors.New("plain"), 500, "internal"},
		{fmt.Errorf("wrapped: %w", kms.Errorf(kms.KindNotFound, "x")), 404, "not_found"},
		{&httpedge.StatusError{Status: 503, Code: "unavailable", Message: "m"}, 503, "unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			status, code := statusOf(tc.err)
			if status != tc.status || code != tc.code {
				t.Errorf("statusOf(%v) = %d, %q, want %d, %q", tc.err, status, code, tc.status, tc.code)
			}
		})
	}
	// Every kind of kms has a line in the table.
	for k := kms.KindInternal; k <= kms.KindTooLarge; k++ {
		if _, ok := kindStatus[k]; !ok {
			t.Errorf("kindStatus has no status for kind %v", k)
		}
	}
}

// TestAPIDocErrorCodes: docs/API.md's list of error codes names every
// kind the service answers with, with the status the one table gives it.
func TestAPIDocErrorCodes(t *testing.T) {
	doc := strings.Join(strings.Fields(docblock.Read(t, "docs/API.md")), " ")
	for kind, status := range kindStatus {
		if want := fmt.Sprintf("`%s` (%d", kind, status); !strings.Contains(doc, want) {
			t.Errorf("docs/API.md does not list %s as %s...)", kind, want)
		}
	}
}

// testServer serves New's routes and extra ones, public, with a log.
func testServer(t *testing.T, extra ...route) (*httptest.Server, *kmstest.LogBuffer) {
	t.Helper()
	k := kmstest.New(t, kmstest.MemoryStore(t), kms.Options{})
	logs := &kmstest.LogBuffer{}
	logger := zerolog.New(logs)
	srv, _ := kmstest.Serve(t, newHandler(k.Service, Options{Logger: &logger}, extra), "")
	return srv, logs
}

func get(t *testing.T, url string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("GET %s: body %q is not JSON: %v", url, b, err)
	}
	return resp, body
}

func TestInternalErrors(t *testing.T) {
	const detail = "open /var/lib/kms/secret-file: permission denied"
	srv, logs := testServer(t,
		route{method: "GET", path: "/test/panic", public: true, handle: func(*http.Request, httprouter.Params) (any, error) {
			panic("boom: " + detail)
		}},
		route{method: "GET", path: "/test/plain-error", public: true, handle: func(*http.Request, httprouter.Params) (any, error) {
			return nil, errors.New(detail)
		}},
		route{method: "GET", path: "/test/kms-internal", public: true, handle: func(*http.Request, httprouter.Params) (any, error) {
			return nil, &kms.Error{Kind: kms.KindInternal, Message: "read key ring", Err: errors.New(detail)}
		}},
		route{method: "GET", path: "/test/unencodable", public: true, handle: func(*http.Request, httprouter.Params) (any, error) {
			return map[string]any{"f": func() {}}, nil
		}},
		route{method: "GET", path: "/test/secret/:token", public: true, secretPath: true, handle: func(*http.Request, httprouter.Params) (any, error) {
			return map[string]any{}, nil
		}},
	)
	for _, path := range []string{"/test/panic", "/test/plain-error", "/test/kms-internal", "/test/unencodable"} {
		t.Run(path, func(t *testing.T) {
			resp, body := get(t, srv.URL+path)
			if resp.StatusCode != 500 || body["message"] != "internal error" || body["code"] != "internal" || len(body) != 2 {
				t.Errorf("GET %s = %d %v, want 500 {message: internal error, code: internal}", path, resp.StatusCode, body)
			}
			id := resp.Header.Get(RequestIDHeader)
			var line map[string]any
			for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(l), &m) == nil && m["req_id"] == id {
					line = m
				}
			}
			if line == nil {
				t.Fatalf("no log line with req_id %s:\n%s", id, logs.String())
			}
			if line["level"] != "error" || line["status"] != float64(500) {
				t.Errorf("log line %v, want level error and status 500", line)
			}
			if errText, _ := line["error"].(string); path != "/test/unencodable" && !strings.Contains(errText, detail) {
				t.Errorf("log line error = %q, want the detail %q", errText, detail)
			}
		})
	}
	t.Run("the panic is logged with its stack", func(t *testing.T) {
		if !strings.Contains(logs.String(), "boom: ") || !strings.Contains(logs.String(), "goroutine") {
			t.Errorf("the log has no panic with stack:\n%s", logs.String())
		}
	})
	t.Run("a secret path is logged by its route", func(t *testing.T) {
		resp, _ := get(t, srv.URL+"/test/secret/rk_very-secret-token")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /test/secret/... = %d, want 200", resp.StatusCode)
		}
		if strings.Contains(logs.String(), "rk_very-secret-token") {
			t.Errorf("the log has the secret path:\n%s", logs.String())
		}
		if !strings.Contains(logs.String(), `"route":"/test/secret/:token"`) {
			t.Errorf("the log has no route pattern:\n%s", logs.String())
		}
	})
	t.Run("the server still serves", func(t *testing.T) {
		resp, _ := get(t, srv.URL+"/healthz")
		if resp.StatusCode != 200 {
			t.Errorf("GET /healthz after a panic = %d, want 200", resp.StatusCode)
		}
	})
}

func TestNewNilService(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("New(nil, ...) did not panic")
		}
	}()
	New(nil, Options{})
}

func TestJSONErrorMessages(t *testing.T) {
	type inner struct {
		N int64 `json:"n"`
	}
	type body struct {
		Name  string         `json:"name"`
		Flag  bool           `json:"flag"`
		List  []string       `json:"list"`
		Inner inner          `json:"inner"`
		Props map[string]any `json:"props"`
		F     float64        `json:"f"`
	}
	tests := []struct{ in, want string }{
		{`{"name": 1}`, `member "name" must be a string, not number`},
		{`{"flag": "x"}`, `member "flag" must be a boolean, not string`},
		{`{"list": {}}`, `member "list" must be an array, not object`},
		{`{"inner": {"n": 1.5}}`, `member "inner.n" must be a whole number`},
		{`{"props": []}`, `member "props" must be an object, not array`},
		{`{"f": true}`, `member "f" must be a number, not bool`},
		{`[]`, `it must be an object, not array`},
		{`{"name": "x",}`, `invalid JSON body: invalid character '}'`},
	}
	for _, tc := range tests {
		var v body
		err := jsonError(json.Unmarshal([]byte(tc.in), &v))
		if kms.ErrorKind(err) != kms.KindInvalid || !strings.Contains(kms.ErrorMessage(err), tc.want) {
			t.Errorf("decode %s: %v, want an invalid error containing %q", tc.in, err, tc.want)
		}
	}
}

// TestCheckContentType checks that the fast path for the common forms
// agrees with the media type parser, and that the parser still takes the
// others.
func TestCheckContentType(t *testing.T) {
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"Application/JSON; Charset=UTF-8", true},
		{"application/json;charset=utf-8", true},
		{"application/json ; charset=\"utf-8\"", true},
		{"", false},
		{"text/plain", false},
		{"application/jsonx", false},
		{"application/json; charset", false},
		{"application/x-www-form-urlencoded", false},
	} {
		if err := checkContentType(tc.value); (err == nil) != tc.ok {
			t.Errorf("checkContentType(%q) = %v, want ok %v", tc.value, err, tc.ok)
		}
	}
}
