package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/ringkms/kms"
)

// getSigningKeys sends GET /ks/signing-keys with no credential, and with
// If-None-Match when etag is not empty.
func getSigningKeys(t *testing.T, e *env, etag string) (int, http.Header, []byte) {
	t.Helper()
	var h http.Header
	if etag != "" {
		h = http.Header{"If-None-Match": {etag}}
	}
	r := e.send(t, http.MethodGet, "/ks/signing-keys", req{header: h})
	return r.status, r.header, r.body
}

// TestSigningKeysRoute checks GET /ks/signing-keys: public, the keys of
// SigningKeys, cacheable with an ETag that changes with a rotation, 304 to
// a request that names the current ETag.
func TestSigningKeysRoute(t *testing.T) {
	e := newEnv(t)
	status, h, body := getSigningKeys(t, e, "")
	if status != http.StatusOK {
		t.Fatalf("GET /ks/signing-keys = %d %s, want 200", status, body)
	}
	got := decode[kms.SigningKeySet](t, reply{status: status, header: h, body: body})
	want, err := e.svc.SigningKeys(e.rootCtx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Keys) != 1 || got.Keys[0].ID != want.Keys[0].ID || got.Keys[0].PublicKey != want.Keys[0].PublicKey || !got.Keys[0].Active {
		t.Fatalf("GET /ks/signing-keys = %+v, want %+v", got.Keys, want.Keys)
	}
	if cc := h.Get("Cache-Control"); cc != "public, max-age=300" {
		t.Errorf("Cache-Control = %q, want public, max-age=300", cc)
	}
	if ct := h.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	etag := h.Get("ETag")
	if len(etag) < 3 || etag[0] != '"' {
		t.Fatalf("ETag = %q, want a strong entity tag", etag)
	}
	for _, inm := range []string{etag, `"x", ` + etag, "W/" + etag, "*"} {
		status, h2, body := getSigningKeys(t, e, inm)
		if status != http.StatusNotModified || len(body) != 0 || h2.Get("ETag") != etag || h2.Get("Cache-Control") != "public, max-age=300" {
			t.Errorf("If-None-Match %s: %d, ETag %q, body %q; want 304 with the ETag and no body", inm, status, h2.Get("ETag"), body)
		}
	}
	if status, _, _ := getSigningKeys(t, e, `"other"`); status != http.StatusOK {
		t.Errorf("If-None-Match of another ETag = %d, want 200", status)
	}
	// Other answers stay uncacheable.
	if r := e.do(t, "GET", "/ks/keyrings", e.root, nil).want(t, http.StatusOK); r.header.Get("Cache-Control") != "no-store" || r.header.Get("ETag") != "" {
		t.Errorf("GET /ks/keyrings: Cache-Control %q, ETag %q; want no-store and none", r.header.Get("Cache-Control"), r.header.Get("ETag"))
	}

	k, err := e.svc.RotateSigningKey(e.rootCtx)
	if err != nil {
		t.Fatal(err)
	}
	status, h, body = getSigningKeys(t, e, etag)
	if status != http.StatusOK || h.Get("ETag") == etag {
		t.Fatalf("after a rotation, If-None-Match of the old ETag = %d, ETag %q; want 200 and a new ETag", status, h.Get("ETag"))
	}
	got = decode[kms.SigningKeySet](t, reply{status: status, header: h, body: body})
	if len(got.Keys) != 2 || got.Keys[0].Active || got.Keys[1].ID != k.ID || !got.Keys[1].Active {
		t.Fatalf("after a rotation GET /ks/signing-keys = %+v, want the old key and the active %s", got.Keys, k.ID)
	}
}
