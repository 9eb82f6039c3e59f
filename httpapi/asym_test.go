package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"testing"
)

// checkAsymKey checks the shape of an asym key: type AES256 and a plain
// key, base64 of 32 bytes.
func checkAsymKey(t testing.TB, where string, k map[string]any) string {
	t.Helper()
	if k["type"] != "AES256" || k["id"] == "" {
		t.Errorf("%s: key = %v, want type AES256 and an id", where, k)
	}
	kd, _ := k["keyData"].(map[string]any)
	key, _ := kd["key"].(string)
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != 32 {
		t.Fatalf("%s: keyData.key = %q, want base64 of 32 bytes", where, key)
	}
	return key
}

func TestAsym(t *testing.T) {
	e := newEnv(t)

	r := e.do(t, "POST", "/asym/keyrings", e.root, map[string]any{"name": "Vault", "algo": "aes256",
		"props": map[string]any{"p": 1}, "keyProps": map[string]any{"kp": "v"}}).want(t, http.StatusOK)
	created := r.object(t)
	ring, _ := created["ring"].(map[string]any)
	key, _ := created["key"].(map[string]any)
	if ring == nil || key == nil {
		t.Fatalf("POST /asym/keyrings = %s, want ring and key", r.body)
	}
	for _, member := range []string{"id", "name", "displayName", "activeKey", "activeAlgorithm", "publicKey", "createdAt", "updatedAt"} {
		if _, ok := ring[member]; !ok {
			t.Errorf("asym ring %v has no %s", ring, member)
		}
	}
	if _, ok := ring["props"]; ok {
		t.Errorf("asym ring %v has props, want none", ring)
	}
	if ring["name"] != "Vault" || ring["activeKey"] != key["id"] || ring["activeAlgorithm"] != "aes256" {
		t.Errorf("asym ring = %v, want name Vault, activeKey the key's ID, activeAlgorithm aes256", ring)
	}
	if priv, _ := created["privateKey"].(string); priv == "" {
		t.Errorf("POST /asym/keyrings: no privateKey in %s", r.body)
	}
	firstKey := checkAsymKey(t, "POST /asym/keyrings", key)
	if props, _ := key["props"].(map[string]any); props["kp"] != "v" {
		t.Errorf("asym key props = %v, want kp: v", key["props"])
	}
	ringID, firstID := ring["id"].(string), key["id"].(string)

	t.Run("read key", func(t *testing.T) {
		for _, path := range []string{"/asym/keyrings/vault/keys/" + firstID, "/asym/keyrings/" + ringID + "/keys/" + firstID + "?id=true"} {
			r := e.do(t, "GET", path, e.root, nil).want(t, http.StatusOK)
			if got := checkAsymKey(t, "GET "+path, r.object(t)); got != firstKey {
				t.Errorf("GET %s: keyData.key = %q, want the key given at creation %q", path, got, firstKey)
			}
		}
		reader, _ := e.apiKey(t, "keyring.vault.read")
		e.do(t, "GET", "/asym/keyrings/vault/keys/"+firstID, reader, nil).want(t, http.StatusOK)
	})

	var rotatedID string
	t.Run("rotate", func(t *testing.T) {
		r := e.do(t, "POST", "/asym/rotate", e.root, map[string]any{"ringname": "VAULT", "algo": "aes256"}).want(t, http.StatusOK)
		body := r.object(t)
		k, _ := body["key"].(map[string]any)
		if len(body) != 1 || k == nil {
			t.Fatalf("POST /asym/rotate = %s, want {key}", r.body)
		}
		newKey := checkAsymKey(t, "POST /asym/rotate", k)
		rotatedID, _ = k["id"].(string)
		if rotatedID == firstID || newKey == firstKey {
			t.Errorf("POST /asym/rotate gave key %s %q, want a new ID and key", rotatedID, newKey)
		}
		r = e.do(t, "GET", "/asym/keyrings/vault/keys/"+rotatedID, e.root, nil).want(t, http.StatusOK)
		if got := checkAsymKey(t, "GET rotated key", r.object(t)); got != newKey {
			t.Errorf("GET rotated key = %q, want %q", got, newKey)
		}
		r = e.do(t, "GET", "/asym/keyrings/vault/keys/"+firstID, e.root, nil).want(t, http.StatusOK)
		if got := checkAsymKey(t, "GET first key after rotation", r.object(t)); got != firstKey {
			t.Errorf("GET first key after rotation = %q, want %q", got, firstKey)
		}
		secret, _ := e.apiKey(t, "keyring.vault.rotate")
		e.do(t, "POST", "/asym/rotate", secret, map[string]any{"ringname": "vault"}).want(t, http.StatusOK)
	})

	ks := e.createRing(t, "plain")
	e.wantBodyErrors(t, "POST", "/asym/keyrings", "create 400 ", append(ringCreateErrors("vault"),
		bodyError{"name of a /ks ring", map[string]any{"name": "PLAIN"}, http.StatusBadRequest, "conflict"},
		bodyError{"bad algo", map[string]any{"name": "algo", "algo": "rsa"}, http.StatusBadRequest, "invalid"},
		bodyError{"props of wrong type", map[string]any{"name": "props", "props": "x"}, http.StatusBadRequest, "invalid"},
		bodyError{"invalid JSON", `{"name": }`, http.StatusBadRequest, "invalid"},
	))
	e.wantGetErrors(t, "read key ", []getError{
		{"unknown ring", "/asym/keyrings/nope/keys/" + firstID, http.StatusNotFound, "not_found"},
		{"unknown key", "/asym/keyrings/vault/keys/0123456789abcdef0123456789abcdef", http.StatusNotFound, "not_found"},
		{"malformed key ID", "/asym/keyrings/vault/keys/xyz", http.StatusNotFound, "not_found"},
		{"bad ring name", "/asym/keyrings/bad%20name!/keys/" + firstID, http.StatusBadRequest, "invalid"},
		{"malformed ring ID", "/asym/keyrings/vault/keys/" + firstID + "?id=true", http.StatusNotFound, "not_found"},
		{"a /ks ring", "/asym/keyrings/plain/keys/" + ks.Key.ID, http.StatusNotFound, "not_found"},
	})
	t.Run("an asym ring is not a /ks ring", func(t *testing.T) {
		e.do(t, "GET", "/ks/keyrings/vault", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "vault"}).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": "vault"}).wantError(t, http.StatusNotFound, "not_found")
	})
	e.wantBodyErrors(t, "POST", "/asym/rotate", "rotate ", []bodyError{
		{"missing ringname", map[string]any{}, http.StatusBadRequest, "invalid"},
		{"bad algo", map[string]any{"ringname": "vault", "algo": "x"}, http.StatusBadRequest, "invalid"},
		{"unknown ring", map[string]any{"ringname": "nope"}, http.StatusNotFound, "not_found"},
		{"a /ks ring", map[string]any{"ringname": "plain"}, http.StatusNotFound, "not_found"},
	})
	t.Run("create", func(t *testing.T) { e.checkAuth(t, "POST", "/asym/keyrings", map[string]any{"name": "denied"}) })
	t.Run("read key", func(t *testing.T) { e.checkAuth(t, "GET", "/asym/keyrings/vault/keys/"+firstID, nil) })
	t.Run("rotate", func(t *testing.T) { e.checkAuth(t, "POST", "/asym/rotate", map[string]any{"ringname": "vault"}) })
}
