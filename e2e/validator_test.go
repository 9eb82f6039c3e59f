package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that keeps the failures reported to it.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.errs
	r.errs = nil
	return out
}

// TestValidatorCatchesDrift checks that the validating transport fails on
// each kind of drift, against a fake server whose answers are wrong on
// purpose. It needs no kmsd and runs with -short.
func TestValidatorCatchesDrift(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		status, _ := map[string]int{"teapot": 418, "error": 401}[r.URL.Query().Get("answer")]
		if status == 0 {
			status = 200
		}
		w.WriteHeader(status)
		fmt.Fprint(w, map[string]string{
			"":           `{"status":"ok"}`,
			"extra":      `{"status":"ok","uptime":1}`,
			"missing":    `{}`,
			"teapot":     `{"message":"short and stout","code":"internal"}`,
			"error":      `{"message":"x","code":"no_such_code"}`,
			"ring":       `{"ring":{"id":"x"}}`,
			"keyleak":    `{"keyid":"0123456789abcdef0123456789abcdef","key":"rk_secret","active":true,"accountId":"0123456789abcdef0123456789abcdef","references":{"accountId":"0123456789abcdef0123456789abcdef"},"flags":{},"props":{},"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:05Z"}`,
			"pagination": `{"data":[],"pagination":{"limit":10,"count":0,"hasMore":true}}`,
		}[r.URL.Query().Get("answer")])
	}))
	defer srv.Close()
	rec := &recorder{TB: t}
	v := newValidator(rec)
	hc := v.client()
	send := func(method, path, secret, body string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		} else {
			req.Body = http.NoBody
		}
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	cases := []struct {
		name, method, path, secret, body string
		want                             string // in the failure; empty: no failure
	}{
		{"a documented answer", "GET", "/healthz", "", "", ""},
		{"an undocumented member", "GET", "/healthz?answer=extra", "", "", "uptime"},
		{"a missing member", "GET", "/healthz?answer=missing", "", "", "answer 200"},
		{"an undocumented status", "GET", "/healthz?answer=teapot", "", "", "status is not supported"},
		{"an undocumented error code", "GET", "/ks/keyrings?answer=error", "k", "", "answer 401"},
		{"a malformed resource", "GET", "/ks/keyrings/payments?answer=ring", "k", "", "answer 200"},
		{"a secret in a safe API key", "GET", "/auth/apikey/0123456789abcdef0123456789abcdef?answer=keyleak", "k", "", "answer 200"},
		{"hasMore without nextCursor", "GET", "/ks/keyrings?answer=pagination", "k", "", "answer 200"},
		{"a route missing from the document", "GET", "/ks/nothing", "k", "", "no such operation"},
		{"a method missing from the document", "PATCH", "/ks/keyrings/payments", "k", `{}`, "no such operation"},
		{"no credential", "GET", "/ks/keyrings", "", "", "does not match the document"},
		{"a missing required member", "POST", "/ks/encrypt", "k", `{}`, "does not match the document"},
		{"an undeclared request member", "POST", "/ks/encrypt", "k", `{"ringname":"a","ringName":"a"}`, `member "ringName"`},
		{"an undeclared nested request member", "PUT", "/ks/config", "k", `{"ringname":"a","config":{"algos":{"aes256":{"maxEncryptcount":1}}}}`, `"maxEncryptcount"`},
		{"free-form members", "POST", "/ks/encrypt?answer=missing", "k", `{"ringname":"a","asset":{"data":{"any":1},"extra":true}}`, "answer 200"},
		{"a body where none is documented", "GET", "/healthz", "", `{}`, "does not match the document"},
	}
	for _, c := range cases {
		send(c.method, c.path, c.secret, c.body)
		errs := rec.take()
		got := strings.Join(errs, "\n")
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: the validator reported\n%s", c.name, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s: the validator reported %q, want a failure with %q", c.name, got, c.want)
		}
	}
}
