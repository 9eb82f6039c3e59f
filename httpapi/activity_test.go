package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/ringkms/kms"
)

func TestGetActivityOverHTTP(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "audited")
	recs := e.activity(t, func(a *kms.Activity) bool { return a.Action == "keyring.create" && a.Ring == "audited" })
	if len(recs) != 1 {
		t.Fatalf("%d records of the ring's creation, want 1", len(recs))
	}
	want := recs[0]
	r := e.do(t, "GET", "/auth/activity/"+want.ID, e.root, nil).want(t, http.StatusOK)
	got := decode[kms.Activity](t, r)
	if got.ID != want.ID || got.KeyID != want.KeyID || got.Action != "keyring.create" || got.Ring != "audited" || !got.Valid ||
		got.CreatedAt != want.CreatedAt || got.Digest != want.Digest || got.Props == nil {
		t.Fatalf("GET /auth/activity/{id} = %s, want %+v", r.body, want)
	}
	if _, ok := r.object(t)["createdAt"].(float64); !ok {
		t.Errorf("createdAt is not a number: %s", r.body)
	}
	e.do(t, "GET", "/auth/activity/01a2000000000000000000000000beef", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(t, "GET", "/auth/activity/nope", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
	e.checkAuth(t, "GET", "/auth/activity/"+want.ID, nil)
}
