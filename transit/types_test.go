package transit_test

import (
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pubkeytest"
)

// TestKeyTypes: every type is made with its parameters and read in
// Vault's shape: the keys map has creation times in Unix seconds for the
// symmetric types, and an object with the public key, its name and its
// creation time for the asymmetric ones; the supports_ fields say what
// the type does. A type that does not encrypt refuses encrypt.
func TestKeyTypes(t *testing.T) {
	e := newEnv(t, kms.Options{})
	for _, tc := range []struct {
		typ          string
		params       map[string]any
		encrypts     bool
		signs        bool
		name         string // the keys' name, for an asymmetric type
		keySize      int64
		parameterSet string
	}{
		{typ: "aes256-gcm96", encrypts: true},
		{typ: "chacha20-poly1305", encrypts: true},
		{typ: "hmac", params: map[string]any{"key_size": 64}, keySize: 64},
		{typ: "ed25519", signs: true, name: "ed25519"},
		{typ: "ecdsa-p256", signs: true, name: "P-256"},
		{typ: "ecdsa-p384", signs: true, name: "P-384"},
		{typ: "rsa-2048", signs: true, name: "rsa-2048"},
		{typ: "ml-dsa", signs: true, name: "ML-DSA-65", parameterSet: "65"},
		{typ: "ml-dsa", params: map[string]any{"parameter_set": "44"}, signs: true, name: "ML-DSA-44", parameterSet: "44"},
	} {
		name := "t-" + strings.ReplaceAll(tc.typ, "-", "") + tc.parameterSet
		data := map[string]any{"type": tc.typ}
		for k, v := range tc.params {
			data[k] = v
		}
		e.root.mustWrite(t, "transit/keys/"+name, data)
		a := e.root.read(t, "transit/keys/"+name)
		if a.status != 200 || a.data["type"] != tc.typ || a.data["supports_encryption"] != tc.encrypts ||
			a.data["supports_decryption"] != tc.encrypts || a.data["supports_signing"] != tc.signs || a.data["supports_derivation"] != false {
			t.Errorf("%s: read = %v", tc.typ, a)
			continue
		}
		if tc.keySize != 0 && a.num(t, "key_size") != tc.keySize {
			t.Errorf("%s: key_size = %v, want %d", tc.typ, a.data["key_size"], tc.keySize)
		}
		if tc.parameterSet != "" && a.data["parameter_set"] != tc.parameterSet {
			t.Errorf("%s: parameter_set = %v, want %s", tc.typ, a.data["parameter_set"], tc.parameterSet)
		}
		v1 := a.data["keys"].(map[string]any)["1"]
		if tc.name == "" {
			if _, ok := v1.(interface{ Int64() (int64, error) }); !ok {
				t.Errorf("%s: keys[1] = %#v, want its creation time in Unix seconds", tc.typ, v1)
			}
		} else {
			pub, _ := v1.(map[string]any)
			if pub["name"] != tc.name || pub["creation_time"] == nil || !parses(tc.typ, tc.parameterSet, pub["public_key"]) {
				t.Errorf("%s: keys[1] = %#v, want its public key named %s", tc.typ, v1, tc.name)
			}
		}
		enc := e.root.write(t, "transit/encrypt/"+name, map[string]any{"plaintext": b64("x")})
		if tc.encrypts != (enc.status == 200) || !tc.encrypts && !strings.Contains(enc.errs(), "does not support encryption") {
			t.Errorf("%s: encrypt = %v", tc.typ, enc)
		}
	}
}

// TestAssociatedData: encrypt binds associated_data to the ciphertext,
// for both AEAD types, single and batch, and on rewrap and datakey:
// decrypt opens it only with the same data (400 otherwise, as Vault).
func TestAssociatedData(t *testing.T) {
	e := newEnv(t, kms.Options{})
	for _, typ := range []string{"aes256-gcm96", "chacha20-poly1305"} {
		name := "ad-" + strings.Split(typ, "-")[0]
		e.root.mustWrite(t, "transit/keys/"+name, map[string]any{"type": typ})
		ad, other := b64("tenant=1"), b64("tenant=2")
		ct := e.root.mustWrite(t, "transit/encrypt/"+name, map[string]any{"plaintext": b64("secret"), "associated_data": ad}).str("ciphertext")
		if got := e.root.write(t, "transit/decrypt/"+name, map[string]any{"ciphertext": ct, "associated_data": ad}); got.str("plaintext") != b64("secret") {
			t.Errorf("%s: decrypt with its associated data = %v", typ, got)
		}
		for _, wrong := range []map[string]any{{"ciphertext": ct, "associated_data": other}, {"ciphertext": ct}} {
			if got := e.root.write(t, "transit/decrypt/"+name, wrong); got.status != 400 {
				t.Errorf("%s: decrypt with other associated data (%v) = %v, want 400", typ, wrong["associated_data"], got)
			}
		}
		batch := e.root.write(t, "transit/decrypt/"+name, map[string]any{"batch_input": []any{
			map[string]any{"ciphertext": ct, "associated_data": ad}, map[string]any{"ciphertext": ct, "associated_data": other}}})
		results, _ := batch.data["batch_results"].([]any)
		if len(results) != 2 || results[0].(map[string]any)["plaintext"] != b64("secret") || results[1].(map[string]any)["error"] == "" {
			t.Errorf("%s: batch decrypt = %v", typ, batch)
		}
		e.root.mustWrite(t, "transit/keys/"+name+"/rotate", nil)
		rw := e.root.mustWrite(t, "transit/rewrap/"+name, map[string]any{"ciphertext": ct, "associated_data": ad}).str("ciphertext")
		if got := e.root.write(t, "transit/decrypt/"+name, map[string]any{"ciphertext": rw, "associated_data": ad}); !strings.HasPrefix(rw, "vault:v2:") || got.str("plaintext") != b64("secret") {
			t.Errorf("%s: the rewrapped %q decrypts to %v", typ, rw, got)
		}
		dk := e.root.mustWrite(t, "transit/datakey/plaintext/"+name, map[string]any{"associated_data": ad})
		if got := e.root.write(t, "transit/decrypt/"+name, map[string]any{"ciphertext": dk.str("ciphertext"), "associated_data": ad}); got.str("plaintext") != dk.str("plaintext") {
			t.Errorf("%s: the data key's ciphertext decrypts to %v", typ, got)
		}
		if got := e.root.write(t, "transit/encrypt/"+name, map[string]any{"plaintext": b64("x"), "associated_data": "%%%"}); got.status != 400 || !strings.Contains(got.errs(), "associated_data") {
			t.Errorf("%s: associated_data that is not base64 = %v", typ, got)
		}
	}
}

// parses reports whether pub is the public key of a key of typ, as the
// key's read writes it.
func parses(typ, paramSet string, pub any) bool {
	text, _ := pub.(string)
	_, err := pubkeytest.Parse(typ, paramSet, text)
	return err == nil
}
