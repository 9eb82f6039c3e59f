package transit_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"math/big"
	"strings"
	"testing"

	"filippo.io/mldsa"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pubkeytest"
	"github.com/ringkms/kms/internal/vaultct"
)

// signature returns the bytes of a vault:v<N>: signature in enc.
func signature(t *testing.T, text string, enc *base64.Encoding) []byte {
	t.Helper()
	_, b, err := vaultct.ParseWith(enc, text)
	if err != nil {
		t.Fatalf("signature %q: %v", text, err)
	}
	return b
}

// publicKey returns the public key of version 1 of the key name, as the
// key's read answers it, parsed with Go's crypto.
func publicKey(t *testing.T, c *caller, name string) crypto.PublicKey {
	t.Helper()
	read := c.read(t, "transit/keys/"+name)
	v1, _ := read.data["keys"].(map[string]any)["1"].(map[string]any)
	text, _ := v1["public_key"].(string)
	typ, _ := read.data["type"].(string)
	set, _ := read.data["parameter_set"].(string)
	pk, err := pubkeytest.Parse(typ, set, text)
	if err != nil {
		t.Fatalf("%s: public key: %v", name, err)
	}
	return pk
}

// TestSignVerify: each asymmetric type signs, and the signature verifies
// through the service and offline with Go's crypto from the public key
// that the key's read answers; ECDSA signatures in ASN.1 and JWS, RSA
// ones with PSS and PKCS #1 v1.5, a prehashed input, and the hash in the
// path; an altered signature or input verifies false; batches answer
// per item.
func TestSignVerify(t *testing.T) {
	e := newEnv(t, kms.Options{})
	msg := []byte("the release v1.2.3")
	digest := sha256.Sum256(msg)
	d384 := sha512.Sum384(msg)
	for _, tc := range []struct {
		typ, path string
		data      map[string]any
		enc       *base64.Encoding
		offline   func(pk crypto.PublicKey, sig []byte) bool
	}{
		{"ed25519", "", nil, base64.StdEncoding, func(pk crypto.PublicKey, sig []byte) bool {
			return ed25519.Verify(pk.(ed25519.PublicKey), msg, sig)
		}},
		{"ecdsa-p256", "", nil, base64.StdEncoding, func(pk crypto.PublicKey, sig []byte) bool {
			return ecdsa.VerifyASN1(pk.(*ecdsa.PublicKey), digest[:], sig)
		}},
		{"ecdsa-p256", "", map[string]any{"marshaling_algorithm": "jws"}, base64.RawURLEncoding, func(pk crypto.PublicKey, sig []byte) bool {
			r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
			return len(sig) == 64 && ecdsa.Verify(pk.(*ecdsa.PublicKey), digest[:], r, s)
		}},
		{"ecdsa-p384", "/sha2-384", nil, base64.StdEncoding, func(pk crypto.PublicKey, sig []byte) bool {
			return ecdsa.VerifyASN1(pk.(*ecdsa.PublicKey), d384[:], sig)
		}},
		{"rsa-2048", "", nil, base64.StdEncoding, func(pk crypto.PublicKey, sig []byte) bool {
			return rsa.VerifyPSS(pk.(*rsa.PublicKey), crypto.SHA256, digest[:], sig, nil) == nil
		}},
		{"rsa-2048", "", map[string]any{"signature_algorithm": "pkcs1v15"}, base64.StdEncoding, func(pk crypto.PublicKey, sig []byte) bool {
			return rsa.VerifyPKCS1v15(pk.(*rsa.PublicKey), crypto.SHA256, digest[:], sig) == nil
		}},
		{"ml-dsa", "", nil, base64.StdEncoding, func(pk crypto.PublicKey, sig []byte) bool {
			return mldsa.Verify(pk.(*mldsa.PublicKey), msg, sig, nil) == nil
		}},
	} {
		name := "s-" + strings.ReplaceAll(tc.typ, "-", "")
		if e.root.read(t, "transit/keys/"+name).status == 404 {
			e.root.mustWrite(t, "transit/keys/"+name, map[string]any{"type": tc.typ})
		}
		data := map[string]any{"input": base64.StdEncoding.EncodeToString(msg)}
		for k, v := range tc.data {
			data[k] = v
		}
		signed := e.root.mustWrite(t, "transit/sign/"+name+tc.path, data)
		text := signed.str("signature")
		if !strings.HasPrefix(text, "vault:v1:") || signed.num(t, "key_version") != 1 {
			t.Fatalf("%s %v: sign = %v", tc.typ, tc.data, signed)
		}
		if !tc.offline(publicKey(t, e.root, name), signature(t, text, tc.enc)) {
			t.Errorf("%s %v: the signature does not verify offline", tc.typ, tc.data)
		}
		data["signature"] = text
		if got := e.root.write(t, "transit/verify/"+name+tc.path, data); got.status != 200 || got.data["valid"] != true {
			t.Errorf("%s %v: verify = %v", tc.typ, tc.data, got)
		}
		data["input"] = base64.StdEncoding.EncodeToString([]byte("another release"))
		if got := e.root.write(t, "transit/verify/"+name+tc.path, data); got.status != 200 || got.data["valid"] != false {
			t.Errorf("%s %v: verify of another input = %v, want valid false", tc.typ, tc.data, got)
		}
	}

	// A prehashed input, and a batch with one bad item.
	pre := e.root.mustWrite(t, "transit/sign/s-ecdsap256", map[string]any{"input": base64.StdEncoding.EncodeToString(digest[:]), "prehashed": true})
	if !ecdsa.VerifyASN1(publicKey(t, e.root, "s-ecdsap256").(*ecdsa.PublicKey), digest[:], signature(t, pre.str("signature"), base64.StdEncoding)) {
		t.Error("the signature of a prehashed input does not verify offline")
	}
	batch := e.root.write(t, "transit/sign/s-ed25519", map[string]any{"batch_input": []any{
		map[string]any{"input": b64("a"), "reference": "one"}, map[string]any{"input": "%%%", "reference": "two"}}})
	results, _ := batch.data["batch_results"].([]any)
	if batch.status != 400 || len(results) != 2 || results[0].(map[string]any)["signature"] == nil || results[1].(map[string]any)["error"] == nil ||
		results[1].(map[string]any)["reference"] != "two" {
		t.Errorf("sign batch with a bad input = %v", batch)
	}

	// A symmetric key neither signs nor verifies.
	e.root.mustWrite(t, "transit/keys/s-aes", nil)
	if got := e.root.write(t, "transit/sign/s-aes", map[string]any{"input": b64("x")}); got.status != 400 || !strings.Contains(got.errs(), "does not support signing") {
		t.Errorf("sign with an aes256-gcm96 key = %v", got)
	}
}

// TestHMAC: every type's versions compute HMACs (the hmac type with its
// own key, the others with a derived one); an exported hmac-key computes
// the same offline; verify checks them; the algorithm goes in the path
// or as a parameter.
func TestHMAC(t *testing.T) {
	e := newEnv(t, kms.Options{})
	e.root.mustWrite(t, "transit/keys/mac", map[string]any{"type": "hmac", "exportable": true})
	e.root.mustWrite(t, "transit/keys/aes", map[string]any{"exportable": true})
	for _, name := range []string{"mac", "aes"} {
		mac := e.root.mustWrite(t, "transit/hmac/"+name, map[string]any{"input": b64("payload")}).str("hmac")
		key := e.root.read(t, "transit/export/hmac-key/"+name+"/1").data["keys"].(map[string]any)["1"].(string)
		raw, _ := base64.StdEncoding.DecodeString(key)
		h := hmac.New(sha256.New, raw)
		h.Write([]byte("payload"))
		if want := vaultct.Format(1, h.Sum(nil)); mac != want {
			t.Errorf("%s: hmac = %s, want %s (the exported hmac-key's)", name, mac, want)
		}
		if got := e.root.write(t, "transit/verify/"+name, map[string]any{"input": b64("payload"), "hmac": mac}); got.data["valid"] != true {
			t.Errorf("%s: verify of its hmac = %v", name, got)
		}
		if got := e.root.write(t, "transit/verify/"+name, map[string]any{"input": b64("other"), "hmac": mac}); got.data["valid"] != false {
			t.Errorf("%s: verify of another input's hmac = %v", name, got)
		}
		m512 := e.root.mustWrite(t, "transit/hmac/"+name+"/sha2-512", map[string]any{"input": b64("payload")}).str("hmac")
		if len(signature(t, m512, base64.StdEncoding)) != 64 {
			t.Errorf("%s: hmac/sha2-512 = %s", name, m512)
		}
		if got := e.root.write(t, "transit/verify/"+name+"/sha2-512", map[string]any{"input": b64("payload"), "hmac": m512}); got.data["valid"] != true {
			t.Errorf("%s: verify/sha2-512 of its hmac = %v", name, got)
		}
	}
}

// TestSignPermissions: each of sign, verify and hmac needs its own flag,
// which no other ring flag but keyring.<name>.* implies; every call is
// recorded without its input or signature.
func TestSignPermissions(t *testing.T) {
	e := newEnv(t, kms.Options{})
	e.root.mustWrite(t, "transit/keys/p", map[string]any{"type": "ed25519"})
	sig := e.root.mustWrite(t, "transit/sign/p", map[string]any{"input": b64("secret input")}).str("signature")
	for _, tc := range []struct {
		flags  []string
		path   string
		data   map[string]any
		status int
	}{
		{[]string{"keyring.p.encrypt", "keyring.p.decrypt", "keyring.p.verify"}, "transit/sign/p", map[string]any{"input": b64("x")}, 403},
		{[]string{"keyring.p.sign"}, "transit/sign/p", map[string]any{"input": b64("x")}, 200},
		{[]string{"keyring.p.sign", "keyring.p.hmac"}, "transit/verify/p", map[string]any{"input": b64("x"), "signature": sig}, 403},
		{[]string{"keyring.p.verify"}, "transit/verify/p", map[string]any{"input": b64("secret input"), "signature": sig}, 200},
		{[]string{"keyring.p.sign", "keyring.p.verify"}, "transit/hmac/p", map[string]any{"input": b64("x")}, 403},
		{[]string{"keyring.p.hmac"}, "transit/hmac/p", map[string]any{"input": b64("x")}, 200},
		{[]string{"keyring.p.*"}, "transit/sign/p", map[string]any{"input": b64("x")}, 200},
	} {
		if got := e.keyWith(t, tc.flags...).write(t, tc.path, tc.data); got.status != tc.status {
			t.Errorf("%s with %v = %v, want %d", tc.path, tc.flags, got, tc.status)
		}
	}
	recs, err := e.Service.SearchActivity(e.RootCtx, kms.ActivityFilter{Ring: "p"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, a := range recs.Data {
		seen[a.Action]++
		for _, v := range a.Props {
			if s, _ := v.(string); strings.Contains(s, b64("secret input")) || strings.Contains(s, sig) {
				t.Errorf("record %s holds the input or the signature: %v", a.Action, a.Props)
			}
		}
	}
	if seen["transit.sign"] != 4 || seen["transit.verify"] != 2 || seen["transit.hmac"] != 2 {
		t.Errorf("records by action = %v", seen)
	}
}
