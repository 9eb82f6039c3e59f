package httpapi_test

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// unwrapKey opens the wrapped key data of key keyID of ring ringID with a
// private key, as a client in any language would (docs/FORMAT.md), and
// returns the 32-byte aes256 key.
func unwrapKey(t testing.TB, kd *kms.KeyData, ringID, keyID string, open func(ct, enc, info []byte) ([]byte, error)) []byte {
	t.Helper()
	if kd == nil {
		t.Fatalf("key %s has no keyData", keyID)
	}
	ct, err := base64.StdEncoding.DecodeString(kd.Encrypted.Key.Value)
	if err != nil {
		t.Fatalf("keyData.encrypted.key.value is not base64: %v", err)
	}
	enc, err := base64.StdEncoding.DecodeString(kd.IV)
	if err != nil {
		t.Fatalf("keyData.iv is not base64: %v", err)
	}
	key, err := open(ct, enc, []byte("ringkms/keydata/v1/"+ringID+"/"+keyID))
	if err != nil {
		t.Fatalf("unwrap key %s: %v", keyID, err)
	}
	if len(key) != 32 {
		t.Fatalf("unwrapped key has %d bytes, want 32", len(key))
	}
	return key
}

func hpkeOpener(t testing.TB, kem hpke.KEM, raw []byte) func(ct, enc, info []byte) ([]byte, error) {
	t.Helper()
	priv, err := kem.NewPrivateKey(raw)
	if err != nil {
		t.Fatalf("NewPrivateKey: %v", err)
	}
	return func(ct, enc, info []byte) ([]byte, error) {
		r, err := hpke.NewRecipient(enc, priv, hpke.HKDFSHA256(), hpke.AES256GCM(), info)
		if err != nil {
			return nil, err
		}
		return r.Open(nil, ct)
	}
}

func TestCreateKeyRing(t *testing.T) {
	e := newEnv(t)

	x25519, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x25519Raw := base64.StdEncoding.EncodeToString(x25519.PublicKey().Bytes())
	der, err := x509.MarshalPKIXPublicKey(x25519.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	x25519PEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err = x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	x25519Open := hpkeOpener(t, hpke.DHKEM(ecdh.X25519()), x25519.Bytes())
	rsaOpen := func(ct, _, info []byte) ([]byte, error) {
		return rsa.DecryptOAEP(sha256.New(), nil, rsaKey, ct, info)
	}

	tests := []struct {
		name      string
		body      map[string]any
		encoding  string
		generated bool // the answer carries the private key
		open      func(ct, enc, info []byte) ([]byte, error)
		wantPub   string // the ring's publicKey, in its canonical form
	}{
		{name: "generated X-Wing", body: map[string]any{"name": "gen-xwing", "props": map[string]any{"team": "pay"}, "keyProps": map[string]any{"k": "v"}},
			encoding: "hpke-xwing", generated: true},
		{name: "generated X25519", body: map[string]any{"name": "gen-x25519", "kem": "x25519", "algo": "aes256"},
			encoding: "hpke-x25519", generated: true},
		{name: "caller X25519 raw", body: map[string]any{"name": "own-x25519", "publicKey": x25519Raw}, encoding: "hpke-x25519", open: x25519Open, wantPub: x25519Raw},
		{name: "caller X25519 PEM", body: map[string]any{"name": "own-x25519-pem", "publicKey": x25519PEM}, encoding: "hpke-x25519", open: x25519Open, wantPub: x25519Raw},
		{name: "caller RSA-2048 PEM", body: map[string]any{"name": "own-rsa", "publicKey": rsaPEM}, encoding: "rsa-oaep-sha256", open: rsaOpen, wantPub: rsaPEM},
		{name: "caller key wins over kem", body: map[string]any{"name": "own-kem", "publicKey": x25519Raw, "kem": "xwing"}, encoding: "hpke-x25519", open: x25519Open},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "POST", "/ks/keyrings", e.root, tc.body).want(t, http.StatusOK)
			raw := r.object(t)
			if _, ok := raw["privateKey"]; ok != tc.generated {
				t.Errorf("POST /ks/keyrings: privateKey present = %v, want %v; body %s", ok, tc.generated, r.body)
			}
			res := decode[kms.CreateKeyRingResult](t, r)
			if res.Ring == nil || res.Key == nil {
				t.Fatalf("POST /ks/keyrings = %s, want ring and key", r.body)
			}
			name := tc.body["name"].(string)
			if res.Ring.Name != name || res.Ring.DisplayName != name || res.Ring.ActiveAlgorithm != "aes256" || res.Ring.ID == "" {
				t.Errorf("ring = %+v, want name and displayName %q, activeAlgorithm aes256", res.Ring, name)
			}
			if res.Ring.ActiveKey != res.Key.ID || res.Key.Type != "aes256" {
				t.Errorf("ring.activeKey = %q, key = %+v, want the key's ID and type aes256", res.Ring.ActiveKey, res.Key)
			}
			if got := res.Key.KeyData.Encrypted.Key.Encoding; got != tc.encoding {
				t.Errorf("keyData.encrypted.key.encoding = %q, want %q", got, tc.encoding)
			}
			if tc.wantPub != "" && res.Ring.PublicKey != tc.wantPub {
				t.Errorf("ring.publicKey = %q, want %q", res.Ring.PublicKey, tc.wantPub)
			}
			if res.Ring.PublicKey == "" {
				t.Errorf("ring.publicKey is empty")
			}
			open := tc.open
			if tc.generated {
				priv, err := base64.StdEncoding.DecodeString(res.PrivateKey)
				if err != nil {
					t.Fatalf("privateKey is not base64: %v", err)
				}
				kem := hpke.MLKEM768X25519()
				if tc.encoding == "hpke-x25519" {
					kem = hpke.DHKEM(ecdh.X25519())
				}
				open = hpkeOpener(t, kem, priv)
			}
			unwrapKey(t, res.Key.KeyData, res.Ring.ID, res.Key.ID, open)
			if tc.body["props"] != nil && res.Ring.Props["team"] != "pay" {
				t.Errorf("ring.props = %v, want team: pay", res.Ring.Props)
			}
			if tc.body["keyProps"] != nil && res.Key.Props["k"] != "v" {
				t.Errorf("key.props = %v, want k: v", res.Key.Props)
			}
		})
	}

	e.createRing(t, "pay")
	e.wantBodyErrors(t, "POST", "/ks/keyrings", "400 ", append(ringCreateErrors("pay"),
		bodyError{"empty name", map[string]any{"name": ""}, http.StatusBadRequest, "invalid"},
		bodyError{"duplicate other case", map[string]any{"name": "Pay"}, http.StatusBadRequest, "conflict"},
		bodyError{"bad algo", map[string]any{"name": "algo", "algo": "aes128"}, http.StatusBadRequest, "invalid"},
		bodyError{"bad publicKey", map[string]any{"name": "pk", "publicKey": "bm90IGEga2V5"}, http.StatusBadRequest, "invalid"},
		bodyError{"bad publicKey PEM", map[string]any{"name": "pk", "publicKey": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}, http.StatusBadRequest, "invalid"},
		bodyError{"bad kem", map[string]any{"name": "kem", "kem": "p256"}, http.StatusBadRequest, "invalid"},
		bodyError{"bad dataKeys", map[string]any{"name": "dk", "dataKeys": "both"}, http.StatusBadRequest, "invalid"},
		bodyError{"name of wrong type", map[string]any{"name": 5}, http.StatusBadRequest, "invalid"},
		bodyError{"invalid JSON", `{"name": "x"`, http.StatusBadRequest, "invalid"},
	))
	t.Run("31 characters (32 or more: shaped like a credential)", func(t *testing.T) {
		e.createRing(t, strings.Repeat("b", 31))
	})
	e.checkAuth(t, "POST", "/ks/keyrings", map[string]any{"name": "denied"})
	t.Run("200 with the create flag of the ring", func(t *testing.T) {
		secret, _ := e.apiKey(t, "keyring.allowed.create")
		e.do(t, "POST", "/ks/keyrings", secret, map[string]any{"name": "allowed", "kem": "x25519"}).want(t, http.StatusOK)
		e.do(t, "POST", "/ks/keyrings", secret, map[string]any{"name": "other", "kem": "x25519"}).wantError(t, http.StatusForbidden, "permission_denied")
	})
}

// getError is a GET that fails: its path, and the status and code of
// its error.
type getError struct {
	name, path string
	status     int
	code       string
}

// wantGetErrors runs each case as a subtest, named prefix and the
// case's name: a GET of its path with the root key answers its error.
func (e *env) wantGetErrors(t *testing.T, prefix string, cases []getError) {
	t.Helper()
	for _, tc := range cases {
		t.Run(prefix+tc.name, func(t *testing.T) {
			e.do(t, "GET", tc.path, e.root, nil).wantError(t, tc.status, tc.code)
		})
	}
}

// bodyError is a request with a body that fails: its body, and the
// status and code of its error.
type bodyError struct {
	name   string
	body   any
	status int
	code   string
}

// wantBodyErrors runs each case as a subtest, named prefix and the case's
// name: a request of method to path with its body and the root key
// answers its error.
func (e *env) wantBodyErrors(t *testing.T, method, path, prefix string, cases []bodyError) {
	t.Helper()
	for _, tc := range cases {
		t.Run(prefix+tc.name, func(t *testing.T) {
			e.do(t, method, path, e.root, tc.body).wantError(t, tc.status, tc.code)
		})
	}
}

// ringCreateErrors are bodies that the routes that create a ring, /ks and
// /asym alike, refuse; dup is the name of a ring that exists.
func ringCreateErrors(dup string) []bodyError {
	return []bodyError{
		{"missing name", map[string]any{"algo": "aes256"}, http.StatusBadRequest, "invalid"},
		{"bad name", map[string]any{"name": "bad name!"}, http.StatusBadRequest, "invalid"},
		{"65 characters", map[string]any{"name": strings.Repeat("a", 65)}, http.StatusBadRequest, "invalid"},
		{"duplicate", map[string]any{"name": dup}, http.StatusBadRequest, "conflict"},
	}
}

func TestGetKeyRing(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "Payments")
	reader, _ := e.apiKey(t, "keyring.payments.read")

	tests := []struct {
		name, path, secret string
	}{
		{"by name", "/ks/keyrings/Payments", e.root},
		{"by name, other case", "/ks/keyrings/pAYMENTS", e.root},
		{"by ID", "/ks/keyrings/" + created.Ring.ID + "?id=true", e.root},
		{"by ID, id=TRUE", "/ks/keyrings/" + created.Ring.ID + "?id=TRUE", e.root},
		{"with the read flag", "/ks/keyrings/payments", reader},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "GET", tc.path, tc.secret, nil).want(t, http.StatusOK)
			got := decode[struct{ Ring *kms.KeyRing }](t, r).Ring
			if got == nil || got.ID != created.Ring.ID || got.Name != "Payments" || got.ActiveKey != created.Key.ID || got.PublicKey != created.Ring.PublicKey {
				t.Errorf("GET %s = %s, want ring %+v", tc.path, r.body, created.Ring)
			}
		})
	}
	e.wantGetErrors(t, "", []getError{
		{"unknown name", "/ks/keyrings/nope", http.StatusNotFound, "not_found"},
		{"unknown ID", "/ks/keyrings/0123456789abcdef0123456789abcdef?id=true", http.StatusNotFound, "not_found"},
		{"name as ID", "/ks/keyrings/Payments?id=true", http.StatusNotFound, "not_found"},
		{"ID as name", "/ks/keyrings/" + created.Ring.ID, http.StatusNotFound, "not_found"},
		{"bad name", "/ks/keyrings/bad%20name!", http.StatusBadRequest, "invalid"},
		{"65 characters", "/ks/keyrings/" + strings.Repeat("a", 65), http.StatusBadRequest, "invalid"},
	})
	e.checkAuth(t, "GET", "/ks/keyrings/payments", nil)
	t.Run("403 by ID", func(t *testing.T) {
		secret, _ := e.apiKey(t, "keyring.other.read")
		e.do(t, "GET", "/ks/keyrings/"+created.Ring.ID+"?id=true", secret, nil).wantError(t, http.StatusForbidden, "permission_denied")
	})
}

func TestGetKey(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "getkey")
	r := e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "getkey"}).want(t, http.StatusOK)
	rotated := decode[struct{ Key kms.Key }](t, r).Key

	for _, tc := range []struct {
		name, path string
		want       *kms.Key
	}{
		{"first key", "/ks/keyrings/getkey/keys/" + created.Key.ID, created.Key},
		{"rotated key", "/ks/keyrings/GetKey/keys/" + rotated.ID, &rotated},
		{"by ring ID", "/ks/keyrings/" + created.Ring.ID + "/keys/" + created.Key.ID + "?id=true", created.Key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "GET", tc.path, e.root, nil).want(t, http.StatusOK)
			got := decode[kms.Key](t, r)
			if got.ID != tc.want.ID || got.Type != "aes256" || got.KeyData == nil || *got.KeyData != *tc.want.KeyData {
				t.Errorf("GET %s = %s, want key %+v", tc.path, r.body, tc.want)
			}
		})
	}
	e.wantGetErrors(t, "", []getError{
		{"unknown key", "/ks/keyrings/getkey/keys/0123456789abcdef0123456789abcdef", http.StatusNotFound, "not_found"},
		{"malformed key ID", "/ks/keyrings/getkey/keys/not-an-id", http.StatusNotFound, "not_found"},
		{"unknown ring", "/ks/keyrings/nope/keys/" + created.Key.ID, http.StatusNotFound, "not_found"},
		{"bad ring name", "/ks/keyrings/bad%20name!/keys/" + created.Key.ID, http.StatusBadRequest, "invalid"},
		{"malformed ring ID", "/ks/keyrings/getkey/keys/" + created.Key.ID + "?id=true", http.StatusNotFound, "not_found"},
	})
	t.Run("key of another ring", func(t *testing.T) {
		other := e.createRing(t, "getkey-other")
		e.do(t, "GET", "/ks/keyrings/getkey/keys/"+other.Key.ID, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
	})
	e.checkAuth(t, "GET", "/ks/keyrings/getkey/keys/"+created.Key.ID, nil)
}

func TestRotate(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "rot")

	r := e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "ROT", "algo": "aes256"}).want(t, http.StatusOK)
	body := r.object(t)
	if len(body) != 1 || body["key"] == nil {
		t.Fatalf("POST /ks/rotate = %s, want {key}", r.body)
	}
	key := decode[struct{ Key kms.Key }](t, r).Key
	if key.ID == "" || key.ID == created.Key.ID || key.KeyData == nil || key.Type != "aes256" {
		t.Errorf("POST /ks/rotate: key = %+v, want a new aes256 key with keyData", key)
	}
	ring := decode[struct{ Ring kms.KeyRing }](t, e.do(t, "GET", "/ks/keyrings/rot", e.root, nil).want(t, http.StatusOK)).Ring
	if ring.ActiveKey != key.ID {
		t.Errorf("after rotation, activeKey = %s, want %s", ring.ActiveKey, key.ID)
	}

	e.wantBodyErrors(t, "POST", "/ks/rotate", "", []bodyError{
		{"missing ringname", map[string]any{"algo": "aes256"}, http.StatusBadRequest, "invalid"},
		{"bad algo", map[string]any{"ringname": "rot", "algo": "des"}, http.StatusBadRequest, "invalid"},
		{"bad name", map[string]any{"ringname": "bad name!"}, http.StatusBadRequest, "invalid"},
		{"ringname of wrong type", map[string]any{"ringname": []string{"rot"}}, http.StatusBadRequest, "invalid"},
		{"unknown ring", map[string]any{"ringname": "nope"}, http.StatusNotFound, "not_found"},
	})
	e.checkAuth(t, "POST", "/ks/rotate", map[string]any{"ringname": "rot"})

	t.Run("403 is in the activity trail", func(t *testing.T) {
		secret, keyID := e.apiKey(t, "keyring.rot.encrypt", "keyring.rot.read")
		msg := e.do(t, "POST", "/ks/rotate", secret, map[string]any{"ringname": "rot"}).wantError(t, http.StatusForbidden, "permission_denied")
		if !strings.Contains(msg, "keyring.rot.rotate") {
			t.Errorf("403 message %q does not name the missing flag keyring.rot.rotate", msg)
		}
		if _, err := e.svc.VerifyActivityChain(e.rootCtx); err != nil {
			t.Fatalf("VerifyActivityChain() after the 403 = %v", err)
		}
		denials := e.activity(t, func(a *kms.Activity) bool {
			return a.KeyID == keyID && a.Action == "keyring.rotate"
		})
		if len(denials) != 1 {
			t.Fatalf("found %d keyring.rotate records of API key %s, want 1: %+v", len(denials), keyID, denials)
		}
		d := denials[0]
		if d.Valid || d.Ring != "rot" || d.AccountID != e.account || d.Props["flag"] != "keyring.rot.rotate" {
			t.Errorf("denial record = %+v, want valid false, ring rot, account %s, props.flag keyring.rot.rotate", d, e.account)
		}
		// The answer did not rotate the ring.
		ring := decode[struct{ Ring kms.KeyRing }](t, e.do(t, "GET", "/ks/keyrings/rot", e.root, nil).want(t, http.StatusOK)).Ring
		if ring.ActiveKey != key.ID {
			t.Errorf("after a denied rotation, activeKey = %s, want %s", ring.ActiveKey, key.ID)
		}
	})
	t.Run("200 with keyring.*.rotate", func(t *testing.T) {
		secret, _ := e.apiKey(t, "keyring.*.rotate")
		e.do(t, "POST", "/ks/rotate", secret, map[string]any{"ringname": "rot"}).want(t, http.StatusOK)
	})
}

func TestDeleteKeyRing(t *testing.T) {
	e := newEnv(t)
	used := e.createRing(t, "in-use")
	free := e.createRing(t, "free")
	e.apiKey(t, "keyring.in-use.encrypt")

	t.Run("400 while an API key names it", func(t *testing.T) {
		msg := e.do(t, "DELETE", "/ks/keyrings/in-use", e.root, nil).wantError(t, http.StatusBadRequest, "conflict")
		if !strings.Contains(msg, "API key") {
			t.Errorf("message %q does not say an API key uses the ring", msg)
		}
		e.do(t, "GET", "/ks/keyrings/in-use", e.root, nil).want(t, http.StatusOK)
	})
	t.Run("200 when none does", func(t *testing.T) {
		res := e.encrypt(t, "free")
		r := e.do(t, "DELETE", "/ks/keyrings/FREE", e.root, nil).want(t, http.StatusOK)
		body := r.object(t)
		if len(body) != 2 || body["name"] != "free" || body["id"] != free.Ring.ID {
			t.Errorf("DELETE /ks/keyrings/FREE = %s, want {name: free, id: %s}", r.body, free.Ring.ID)
		}
		e.do(t, "GET", "/ks/keyrings/free", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/ks/keyrings/"+free.Ring.ID+"?id=true", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/ks/keyrings/free/keys/"+free.Key.ID, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/ks/hash/"+res.Hash, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "DELETE", "/ks/keyrings/free", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		// The name is free again.
		e.createRing(t, "free")
	})
	t.Run("a flag set to false does not hold it", func(t *testing.T) {
		e.createRing(t, "victim")
		e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": e.account,
			"flags": map[string]bool{"keyring.victim.delete": false, "keyring.victim.*": false, "*": false}}).want(t, http.StatusOK)
		e.do(t, "DELETE", "/ks/keyrings/victim", e.root, nil).want(t, http.StatusOK)
	})
	t.Run("400 names no key of another Account", func(t *testing.T) {
		e.createRing(t, "shared")
		other := decode[kms.Account](t, e.do(t, "POST", "/auth/accounts", e.root, map[string]any{"uid": "other"}).want(t, http.StatusOK))
		theirs := decode[kms.APIKey](t, e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": other.ID,
			"flags": map[string]bool{"keyring.shared.encrypt": true}}).want(t, http.StatusOK))
		deleter, _ := e.apiKey(t, "keyring.*.delete")
		msg := e.do(t, "DELETE", "/ks/keyrings/shared", deleter, nil).wantError(t, http.StatusBadRequest, "conflict")
		if strings.Contains(msg, theirs.KeyID) || !strings.Contains(msg, "other accounts") {
			t.Errorf("message %q: want no key ID of another Account, and that keys of other accounts name the ring", msg)
		}
		_, mine := e.apiKey(t, "keyring.shared.read")
		msg = e.do(t, "DELETE", "/ks/keyrings/shared", deleter, nil).wantError(t, http.StatusBadRequest, "conflict")
		if strings.Contains(msg, theirs.KeyID) || !strings.Contains(msg, mine) {
			t.Errorf("message %q: want key %s of the caller's Account and not %s", msg, mine, theirs.KeyID)
		}
		// With accounts.all, every Account's keys are named.
		msg = e.do(t, "DELETE", "/ks/keyrings/shared", e.root, nil).wantError(t, http.StatusBadRequest, "conflict")
		if !strings.Contains(msg, theirs.KeyID) || !strings.Contains(msg, mine) {
			t.Errorf("message %q (accounts.all): want keys %s and %s", msg, mine, theirs.KeyID)
		}
	})
	t.Run("400 bad name", func(t *testing.T) {
		e.do(t, "DELETE", "/ks/keyrings/bad%20name!", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
	})
	e.checkAuth(t, "DELETE", "/ks/keyrings/in-use", nil)
	_ = used
}
