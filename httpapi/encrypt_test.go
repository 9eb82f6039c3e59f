package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

func TestEncryptDecrypt(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "Pay")

	res := e.encrypt(t, "pay")
	if res.Key == nil || res.Key.ID != created.Key.ID || res.Key.KeyData == nil || res.RingID != created.Ring.ID || res.Hash == "" || res.Header == "" {
		t.Fatalf("POST /ks/encrypt = %+v, want the active key with keyData, the ring ID, a hash and a header", res)
	}
	if again := e.encrypt(t, "pay"); again.Hash == res.Hash || again.Header == res.Header {
		t.Errorf("two encrypt calls gave the same hash or header")
	}

	t.Run("round trip", func(t *testing.T) {
		r := e.do(t, "POST", "/ks/decrypt", e.root, map[string]any{"hash": res.Hash, "header": res.Header}).want(t, http.StatusOK)
		got := decode[kms.DecryptResult](t, r)
		if got.RingID != created.Ring.ID || got.RingName != "Pay" || got.Key == nil || got.Key.ID != res.Key.ID || *got.Key.KeyData != *res.Key.KeyData {
			t.Errorf("POST /ks/decrypt = %s, want ring %s and key %s", r.body, created.Ring.ID, res.Key.ID)
		}
		if !got.Asset.Valid {
			t.Errorf("POST /ks/decrypt: asset.valid = false, want true; body %s", r.body)
		}
	})
	t.Run("round trip with a restricted key", func(t *testing.T) {
		enc, _ := e.apiKey(t, "keyring.pay.encrypt")
		dec, _ := e.apiKey(t, "keyring.pay.decrypt")
		r := e.do(t, "POST", "/ks/encrypt", enc, map[string]any{"ringname": "pay"}).want(t, http.StatusOK)
		mine := decode[kms.EncryptResult](t, r)
		e.do(t, "POST", "/ks/decrypt", dec, map[string]any{"hash": mine.Hash, "header": mine.Header}).want(t, http.StatusOK)
		e.do(t, "POST", "/ks/decrypt", enc, map[string]any{"hash": mine.Hash, "header": mine.Header}).wantError(t, http.StatusForbidden, "permission_denied")
	})

	other := e.encrypt(t, "pay")
	unprocessable := []struct {
		name         string
		hash, header string
		ringKnown    bool // the hash verified, so the answer names the ring
	}{
		{"altered hash", flip(res.Hash), res.Header, false},
		{"garbage hash", "garbage", res.Header, false},
		{"altered header", res.Hash, flip(res.Header), true},
		{"garbage header", res.Hash, "garbage", true},
		{"header of another hash", res.Hash, other.Header, true},
	}
	for _, tc := range unprocessable {
		t.Run("422 "+tc.name, func(t *testing.T) {
			r := e.do(t, "POST", "/ks/decrypt", e.root, map[string]any{"hash": tc.hash, "header": tc.header}).want(t, http.StatusUnprocessableEntity)
			body := r.object(t)
			for _, member := range []string{"ringId", "ringname", "key", "asset"} {
				if _, ok := body[member]; !ok {
					t.Errorf("422 body %s has no %s: want the shape of the 200 answer", r.body, member)
				}
			}
			if _, ok := body["code"]; ok {
				t.Errorf("422 body %s is in the error shape, want the decrypt shape", r.body)
			}
			got := decode[kms.DecryptResult](t, r)
			if got.Asset.Valid || got.Asset.Message == "" {
				t.Errorf("422 asset = %+v, want valid false and a message", got.Asset)
			}
			if got.Key != nil {
				t.Errorf("422 body carries a key: %s", r.body)
			}
			if tc.ringKnown && got.RingID != created.Ring.ID {
				t.Errorf("422 ringId = %q, want %q", got.RingID, created.Ring.ID)
			}
		})
	}
	errs := []struct {
		name string
		body any
	}{
		{"missing hash", map[string]any{"header": res.Header}},
		{"missing header", map[string]any{"hash": res.Hash}},
		{"hash of wrong type", map[string]any{"hash": 1, "header": res.Header}},
		{"invalid JSON", `{"hash": `},
	}
	for _, tc := range errs {
		t.Run("400 "+tc.name, func(t *testing.T) {
			e.do(t, "POST", "/ks/decrypt", e.root, tc.body).wantError(t, http.StatusBadRequest, "invalid")
		})
	}
	t.Run("404 after the ring is deleted", func(t *testing.T) {
		e.createRing(t, "gone")
		gone := e.encrypt(t, "gone")
		e.do(t, "DELETE", "/ks/keyrings/gone", e.root, nil).want(t, http.StatusOK)
		e.do(t, "POST", "/ks/decrypt", e.root, map[string]any{"hash": gone.Hash, "header": gone.Header}).wantError(t, http.StatusNotFound, "not_found")
	})
	t.Run("decrypt", func(t *testing.T) {
		e.checkAuth(t, "POST", "/ks/decrypt", map[string]any{"hash": res.Hash, "header": res.Header})
	})

	t.Run("encrypt errors", func(t *testing.T) {
		e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{}).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": "bad name!"}).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": "nope"}).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "POST", "/ks/encrypt", e.root, `{"ringname": "pay"} {}`).wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("encrypt", func(t *testing.T) {
		e.checkAuth(t, "POST", "/ks/encrypt", map[string]any{"ringname": "pay"})
	})
}

func TestLookupHash(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "hashes")
	res := e.encrypt(t, "hashes")

	r := e.do(t, "GET", "/ks/hash/"+res.Hash, e.root, nil).want(t, http.StatusOK)
	if got := decode[kms.HashInfo](t, r); got.RingID != created.Ring.ID || got.KeyID != res.Key.ID || len(r.object(t)) != 2 {
		t.Errorf("GET /ks/hash/... = %s, want {ringId: %s, keyId: %s}", r.body, created.Ring.ID, res.Key.ID)
	}
	reader, _ := e.apiKey(t, "keyring.hashes.read")
	e.do(t, "GET", "/ks/hash/"+res.Hash, reader, nil).want(t, http.StatusOK)

	for _, tc := range []struct{ name, hash string }{
		{"garbage", "garbage"},
		{"altered", flip(res.Hash)},
		{"truncated", res.Hash[:len(res.Hash)-4]},
		{"a header", res.Header},
	} {
		t.Run("400 "+tc.name, func(t *testing.T) {
			e.do(t, "GET", "/ks/hash/"+tc.hash, e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		})
	}
	e.checkAuth(t, "GET", "/ks/hash/"+res.Hash, nil)
	t.Run("404 after the ring is deleted", func(t *testing.T) {
		e.do(t, "DELETE", "/ks/keyrings/hashes", e.root, nil).wantError(t, http.StatusBadRequest, "conflict") // the reader key names it
		e.createRing(t, "hashes2")
		res2 := e.encrypt(t, "hashes2")
		e.do(t, "DELETE", "/ks/keyrings/hashes2", e.root, nil).want(t, http.StatusOK)
		e.do(t, "GET", "/ks/hash/"+res2.Hash, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
	})
}

func TestLookupHeader(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "headers")
	res := e.encrypt(t, "headers")

	r := e.do(t, "GET", "/ks/header/"+res.Header, e.root, nil).want(t, http.StatusOK)
	got := decode[kms.HeaderInfo](t, r)
	if !got.Valid || got.Version != 1 || got.HasSignedAsset || got.Hash != res.Hash {
		t.Errorf("GET /ks/header/... = %s, want valid true, version 1, hasSignedAsset false, hash %s", r.body, res.Hash)
	}
	t.Run("altered header is described as invalid", func(t *testing.T) {
		// Character 24 is in the header's signed body (the hash), so the
		// header still decodes; a change to its proof depth would not.
		r := e.do(t, "GET", "/ks/header/"+flipAt(res.Header, 24), e.root, nil).want(t, http.StatusOK)
		if got := decode[kms.HeaderInfo](t, r); got.Valid {
			t.Errorf("GET /ks/header/<altered> = %s, want valid false", r.body)
		}
	})
	for _, tc := range []struct{ name, header string }{
		{"garbage", "garbage"},
		{"truncated", res.Header[:40]},
		{"a hash", res.Hash},
	} {
		t.Run("400 "+tc.name, func(t *testing.T) {
			e.do(t, "GET", "/ks/header/"+tc.header, e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		})
	}
	e.checkAuth(t, "GET", "/ks/header/"+res.Header, nil)
	t.Run("404 after the ring is deleted", func(t *testing.T) {
		e.do(t, "DELETE", "/ks/keyrings/headers", e.root, nil).want(t, http.StatusOK)
		msg := e.do(t, "GET", "/ks/header/"+res.Header, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		if !strings.Contains(msg, "not found") {
			t.Errorf("404 message %q does not say not found", msg)
		}
	})
}

// TestValidateIsNotAKeyUse: POST /auth/validate, from a key holding
// apikeys.validate alone, reporting an encrypt and a decrypt of another
// key with its keyId and a hash and an Asset never issued, leaves the
// key's usage and hashes as the real calls made them, and is recorded as
// a validation that keeps the claim.
func TestValidateIsNotAKeyUse(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "pay")
	issued := e.encrypt(t, "pay")
	keyPath := "/ks/keyrings/pay/keys/" + created.Key.ID
	usage := func() kms.KeyUsage {
		t.Helper()
		return decode[kms.KeyUsage](t, e.do(t, "GET", keyPath+"/usage", e.root, nil).want(t, http.StatusOK))
	}
	before := usage()
	subject, subjectID := e.apiKey(t, "keyring.pay.encrypt", "keyring.pay.decrypt")
	validator, validatorID := e.apiKey(t, "apikeys.validate")
	const forged = "AQHforged-hash-never-issued"
	for _, action := range []string{"encrypt", "decrypt"} {
		r := e.do(t, "POST", "/auth/validate", validator, map[string]any{"key": subject, "activity": map[string]any{
			"action": action, "ringname": "pay", "props": map[string]any{
				"keyId": created.Key.ID, "hash": forged, "assetId": "019d0000000000000000000000000001", "result": "ok", "via": action}}}).want(t, http.StatusOK)
		if got := decode[kms.ValidateResult](t, r); !got.Valid || got.ValidAction == nil || !*got.ValidAction {
			t.Fatalf("POST /auth/validate (%s) = %s, want valid, action allowed", action, r.body)
		}
	}
	if after := usage(); after.EncryptCount != before.EncryptCount || after.DecryptCount != before.DecryptCount {
		t.Errorf("usage after the validations = %+v, want %+v", after, before)
	}
	hashes := decode[kms.List[*kms.KeyHash]](t, e.do(t, "GET", keyPath+"/hashes", e.root, nil).want(t, http.StatusOK))
	if len(hashes.Data) != 1 || hashes.Data[0].Hash != issued.Hash {
		t.Errorf("GET %s/hashes = %+v, want only %s", keyPath, hashes.Data, issued.Hash)
	}
	search := func(filter map[string]any) []kms.Activity {
		t.Helper()
		r := e.do(t, "POST", "/auth/search/activity", e.root, filter).want(t, http.StatusOK)
		return decode[kms.List[kms.Activity]](t, r).Data
	}
	if got := search(map[string]any{"keyid": subjectID, "action": "encrypt"}); len(got) != 0 {
		t.Errorf("search of the validated key's encrypts = %+v, want none", got)
	}
	recs := search(map[string]any{"keyid": subjectID, "action": "validate"})
	if len(recs) != 2 {
		t.Fatalf("%d validation records, want 2", len(recs))
	}
	for i, action := range []string{"encrypt", "decrypt"} {
		p := recs[i].Props
		if p["reportedAction"] != action || p["keyId"] != created.Key.ID || p["hash"] != forged || p["via"] != "validate" || p["validatedBy"] != validatorID {
			t.Errorf("validation record %d props = %v, want the claim of a %s, via validate", i, p, action)
		}
	}
}
