package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// keyAnswer is the body of the key state routes.
type keyAnswer struct {
	Key kms.Key `json:"key"`
}

// TestKeyStates drives a key through its states over HTTP: disabled keys
// answer 403 with code disabled and their state, and come back.
func TestKeyStates(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "states")
	first := created.Key.ID
	old := e.encrypt(t, "states")
	keyPath := "/ks/keyrings/states/keys/" + first
	decrypt := func() reply {
		return e.do(t, "POST", "/ks/decrypt", e.root, map[string]any{"hash": old.Hash, "header": old.Header})
	}

	msg := e.do(t, "PATCH", keyPath, e.root, map[string]any{"state": "disabled"}).wantError(t, http.StatusBadRequest, "invalid")
	if !strings.Contains(msg, "rotate") {
		t.Errorf("disabling the active key: message %q does not say to rotate first", msg)
	}
	e.do(t, "PATCH", keyPath, e.root, map[string]any{"state": "off"}).wantError(t, http.StatusBadRequest, "invalid")
	k := decode[keyAnswer](t, e.do(t, "PATCH", keyPath, e.root, map[string]any{"state": "disabled", "rotate": true}).want(t, http.StatusOK))
	if k.Key.ID != first || k.Key.State != kms.KeyDisabled || k.Key.KeyData != nil {
		t.Fatalf("PATCH disabled = %+v", k.Key)
	}
	if got := e.encrypt(t, "states"); got.Key.ID == first {
		t.Fatalf("encrypt handed out the disabled key %s", first)
	}
	body := decrypt().wantErrorBody(t, http.StatusForbidden, "disabled")
	if body["state"] != kms.KeyDisabled || !strings.Contains(body["message"].(string), first) {
		t.Errorf("decrypt with a disabled key: %v, want state disabled and a message naming the key", body)
	}
	e.do(t, "GET", keyPath, e.root, nil).wantErrorBody(t, http.StatusForbidden, "disabled")
	list := decode[kms.List[*kms.Key]](t, e.do(t, "GET", "/ks/keyrings/states/keys", e.root, nil).want(t, http.StatusOK))
	if list.Data[0].ID != first || list.Data[0].State != kms.KeyDisabled || list.Data[1].State != kms.KeyEnabled {
		t.Errorf("key list states: %s %s, want disabled, enabled", list.Data[0].State, list.Data[1].State)
	}

	e.do(t, "PATCH", keyPath, e.root, map[string]any{"state": "enabled"}).want(t, http.StatusOK)
	if got := decode[kms.DecryptResult](t, decrypt().want(t, http.StatusOK)); got.Key.ID != first {
		t.Fatalf("decrypt after enabling: key %s, want %s", got.Key.ID, first)
	}

	e.do(t, "POST", keyPath+"/destroy", e.root, map[string]any{"after": "1m"}).wantError(t, http.StatusBadRequest, "invalid")
	k = decode[keyAnswer](t, e.do(t, "POST", keyPath+"/destroy", e.root, nil).want(t, http.StatusOK))
	if k.Key.State != kms.KeyDestroyScheduled || k.Key.DestroyAt == nil {
		t.Fatalf("POST destroy = %+v, want destroy_scheduled with destroyAt", k.Key)
	}
	body = e.do(t, "GET", keyPath, e.root, nil).wantErrorBody(t, http.StatusForbidden, "disabled")
	if body["state"] != kms.KeyDestroyScheduled {
		t.Errorf("GET a key scheduled for destruction: state %v, want destroy_scheduled", body["state"])
	}
	e.do(t, "PATCH", keyPath, e.root, map[string]any{"state": "enabled"}).wantError(t, http.StatusBadRequest, "conflict")
	k = decode[keyAnswer](t, e.do(t, "DELETE", keyPath+"/destroy", e.root, nil).want(t, http.StatusOK))
	if k.Key.State != kms.KeyDisabled || k.Key.DestroyAt != nil {
		t.Fatalf("DELETE destroy = %+v, want disabled", k.Key)
	}
	e.do(t, "DELETE", keyPath+"/destroy", e.root, nil).wantError(t, http.StatusBadRequest, "conflict")

	asym := decode[kms.CreateAsymKeyRingResult](t, e.do(t, "POST", "/asym/keyrings", e.root, map[string]any{"name": "astates"}).want(t, http.StatusOK))
	asymPath := "/asym/keyrings/astates/keys/" + asym.Key.ID
	e.do(t, "PATCH", asymPath, e.root, map[string]any{"state": "disabled", "rotate": true}).want(t, http.StatusOK)
	e.do(t, "GET", asymPath, e.root, nil).wantErrorBody(t, http.StatusForbidden, "disabled")
	e.do(t, "PATCH", asymPath, e.root, map[string]any{"state": "enabled"}).want(t, http.StatusOK)
	e.do(t, "GET", asymPath, e.root, nil).want(t, http.StatusOK)
}
