package transit_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestOutsideEngine: a path of Vault's interface outside the transit
// engine (sys/health, sys/mounts, auth/..., another engine) is answered
// 404 in Vault's error shape, naming the path (redacted as the log line
// is) and what is served; a path of the engine that is not served says
// what the engine serves.
func TestOutsideEngine(t *testing.T) {
	e := newEnv(t, kms.Options{})
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/sys/health"},
		{"GET", "/v1/sys/mounts"},
		{"GET", "/v1/sys/seal-status"},
		{"POST", "/v1/auth/token/create"},
		{"PUT", "/v1/auth/userpass/login/ada"},
		{"GET", "/v1/secret/data/app"},
		{"POST", "/v1/transit2/encrypt/k"},
		{"LIST", "/v1/sys/policies/acl"},
		{"GET", "/v1/"},
	} {
		a := e.root.do(t, tc.method, strings.TrimPrefix(tc.path, "/v1/"), nil)
		if a.status != http.StatusNotFound || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") || len(a.errors) != 1 ||
			!strings.Contains(a.errors[0], `"`+tc.path+`" is not served`) || !strings.Contains(a.errors[0], "only Vault's transit engine, at /v1/transit/") {
			t.Errorf("%s %s = %v %v, want 404 naming the path and the transit engine", tc.method, tc.path, a, a.header)
		}
	}
	if a := e.root.do(t, http.MethodHead, "sys/health", nil); a.status != http.StatusNotFound {
		t.Errorf("HEAD /v1/sys/health = %v, want 404", a)
	}
	// A path of the engine that is not served says what the engine serves.
	for _, path := range []string{"transit/backup/k", "transit", "transit/"} {
		if a := e.root.do(t, "POST", path, nil); a.status != http.StatusNotFound || len(a.errors) != 1 ||
			!strings.Contains(a.errors[0], "transit engine serves keys, encrypt") {
			t.Errorf("POST /v1/%s = %v, want 404 saying what the engine serves", path, a)
		}
	}
	// A secret pasted into the path goes to no answer.
	if a := e.root.read(t, "auth/token/lookup/"+e.RootKey); len(a.errors) != 1 || strings.Contains(a.errors[0], e.RootKey) ||
		!strings.Contains(a.errors[0], "<redacted>") {
		t.Errorf("a path with a secret = %q, want it redacted", a.errors)
	}
	// The query Vault's clients add to sys/health changes nothing.
	if a := e.root.read(t, "sys/health?uninitcode=299&sealedcode=299&standbycode=299"); a.status != http.StatusNotFound ||
		!strings.Contains(a.errs(), "is not served") {
		t.Errorf("GET /v1/sys/health with the query of Vault's clients = %v, want 404 saying what is served", a)
	}
}
