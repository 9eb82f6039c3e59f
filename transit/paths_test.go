package transit_test

import (
	"encoding/json"
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
	do := func(method, path string) (int, http.Header, []string) {
		t.Helper()
		req, _ := http.NewRequest(method, e.url+path, nil)
		req.Header.Set("X-Vault-Token", e.RootKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Errors []string `json:"errors"`
		}
		if method != http.MethodHead {
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("%s %s: the body is not Vault's error shape: %v", method, path, err)
			}
		}
		return resp.StatusCode, resp.Header, body.Errors
	}
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
		code, h, errs := do(tc.method, tc.path)
		if code != http.StatusNotFound || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || len(errs) != 1 ||
			!strings.Contains(errs[0], `"`+tc.path+`" is not served`) || !strings.Contains(errs[0], "only Vault's transit engine, at /v1/transit/") {
			t.Errorf("%s %s = %d %v %q, want 404 naming the path and the transit engine", tc.method, tc.path, code, h, errs)
		}
	}
	if code, _, _ := do(http.MethodHead, "/v1/sys/health"); code != http.StatusNotFound {
		t.Errorf("HEAD /v1/sys/health = %d, want 404", code)
	}
	// A path of the engine that is not served says what the engine serves.
	for _, path := range []string{"/v1/transit/sign/k", "/v1/transit", "/v1/transit/"} {
		if code, _, errs := do("POST", path); code != http.StatusNotFound || len(errs) != 1 || !strings.Contains(errs[0], "transit engine serves keys, encrypt") {
			t.Errorf("POST %s = %d %q, want 404 saying what the engine serves", path, code, errs)
		}
	}
	// A secret pasted into the path goes to no answer.
	if _, _, errs := do("GET", "/v1/auth/token/lookup/"+e.RootKey); len(errs) != 1 || strings.Contains(errs[0], e.RootKey) || !strings.Contains(errs[0], "<redacted>") {
		t.Errorf("a path with a secret = %q, want it redacted", errs)
	}
	// Vault's own client reads the answer as Vault's.
	if _, err := e.vault.Sys().Health(); status(err) != http.StatusNotFound || !strings.Contains(errorsOf(err), "is not served") {
		t.Errorf("Vault client Sys().Health() = %v, want 404 saying what is served", err)
	}
}
