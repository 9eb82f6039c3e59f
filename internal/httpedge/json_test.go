package httpedge

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// appended encodes itself (Appender), as the hot answers do.
type appended string

func (a appended) AppendJSON(b []byte) ([]byte, error) {
	return strconv.AppendQuote(b, "appended "+string(a)), nil
}

// tagged is a Conditional answer whose ETag is "t".
type tagged struct{ body any }

func (c tagged) Body() any { return c.body }

func (c tagged) NotModified(h http.Header, r *http.Request, b []byte) bool {
	h.Set("Cache-Control", "public, max-age=60")
	h.Set("ETag", `"t"`)
	return r.Header.Get("If-None-Match") == `"t"`
}

// TestJSONWriter: every protocol's answers are written alike, in the
// protocol's format: JSON with a final newline, its length, the content
// type and headers of the protocol, per caller (no-store) unless
// Conditional; nothing for a nil answer; a 304 for a Conditional answer
// the request holds; and the protocol's internal error, 500, for an
// answer that cannot be encoded or whose status is not a final one.
func TestJSONWriter(t *testing.T) {
	j := &JSONWriter{ContentType: "application/x-test", Internal: map[string]string{"kind": "internal"}, InternalCode: "internal",
		Header: func(h http.Header, r *http.Request) { h.Set("X-Test-Id", r.Header.Get("X-Ask")) }}
	for _, tc := range []struct {
		name        string
		status      int
		v           any
		inm         string // If-None-Match
		wantStatus  int
		wantBody    string
		wantType    string
		wantCaching string
	}{
		{"a value", 200, map[string]int{"n": 1}, "", 200, "{\"n\":1}\n", "application/x-test", "no-store"},
		{"an appender", 207, appended("x"), "", 207, "\"appended x\"\n", "application/x-test", "no-store"},
		{"nothing", 204, nil, "", 204, "", "", "no-store"},
		{"a conditional answer", 200, tagged{appended("c")}, "", 200, "\"appended c\"\n", "application/x-test", "public, max-age=60"},
		{"a conditional answer held", 200, tagged{appended("c")}, `"t"`, 304, "", "", "public, max-age=60"},
		{"an unencodable answer", 200, map[string]any{"f": func() {}}, "", 500, "{\"kind\":\"internal\"}\n", "application/x-test", "no-store"},
		{"an unencodable conditional answer", 200, tagged{func() {}}, `"t"`, 500, "{\"kind\":\"internal\"}\n", "application/x-test", "no-store"},
		{"an interim status", 101, map[string]int{}, "", 500, "{\"kind\":\"internal\"}\n", "application/x-test", "no-store"},
		{"no status", 0, nil, "", 500, "{\"kind\":\"internal\"}\n", "application/x-test", "no-store"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Ask", tc.name)
		if tc.inm != "" {
			r.Header.Set("If-None-Match", tc.inm)
		}
		w := httptest.NewRecorder()
		j.Write(w, r, tc.status, tc.v)
		h := w.Header()
		if w.Code != tc.wantStatus || w.Body.String() != tc.wantBody || h.Get("Content-Type") != tc.wantType || h.Get("Cache-Control") != tc.wantCaching {
			t.Errorf("%s: %d %q, Content-Type %q, Cache-Control %q; want %d %q, %q, %q", tc.name, w.Code, w.Body, h.Get("Content-Type"), h.Get("Cache-Control"),
				tc.wantStatus, tc.wantBody, tc.wantType, tc.wantCaching)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Test-Id") != tc.name {
			t.Errorf("%s: headers %v, want nosniff and the protocol's own", tc.name, h)
		}
		if n := h.Get("Content-Length"); tc.wantBody != "" && n != strconv.Itoa(len(tc.wantBody)) {
			t.Errorf("%s: Content-Length %q, want %d", tc.name, n, len(tc.wantBody))
		}
	}
}
