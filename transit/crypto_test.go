package transit_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

func TestEncryptDecrypt(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root
	// Encrypt makes the key on first use.
	enc := c.mustWrite(t, "transit/encrypt/orders", map[string]any{"plaintext": b64("the quick brown fox")})
	ct := enc.str("ciphertext")
	if !strings.HasPrefix(ct, "vault:v1:") || enc.num(t, "key_version") != 1 {
		t.Fatalf("encrypt answered %v", enc.data)
	}
	blob, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ct, "vault:v1:"))
	if err != nil || len(blob) != 12+len("the quick brown fox")+16 {
		t.Errorf("ciphertext %q: %d bytes (%v), want nonce, ciphertext and tag", ct, len(blob), err)
	}
	dec := c.mustWrite(t, "transit/decrypt/orders", map[string]any{"ciphertext": ct})
	if dec.str("plaintext") != b64("the quick brown fox") {
		t.Errorf("decrypt answered %v", dec.data)
	}
	// An empty plaintext is one.
	empty := c.mustWrite(t, "transit/encrypt/orders", map[string]any{"plaintext": ""})
	if got := c.mustWrite(t, "transit/decrypt/orders", map[string]any{"ciphertext": empty.str("ciphertext")}).str("plaintext"); got != "" {
		t.Errorf("decrypt of an empty plaintext = %q", got)
	}

	// Older versions decrypt; encrypt takes the latest unless told.
	c.mustWrite(t, "transit/keys/orders/rotate", nil)
	if got := c.mustWrite(t, "transit/decrypt/orders", map[string]any{"ciphertext": ct}).str("plaintext"); got != b64("the quick brown fox") {
		t.Errorf("decrypt of v1 after rotation = %q", got)
	}
	v2 := c.mustWrite(t, "transit/encrypt/orders", map[string]any{"plaintext": b64("x")})
	if !strings.HasPrefix(v2.str("ciphertext"), "vault:v2:") || v2.num(t, "key_version") != 2 {
		t.Errorf("encrypt after rotation answered %v", v2.data)
	}
	v1 := c.mustWrite(t, "transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "key_version": 1})
	if !strings.HasPrefix(v1.str("ciphertext"), "vault:v1:") {
		t.Errorf("encrypt with key_version 1 answered %v", v1.data)
	}

	flipped := bytes.Clone(blob)
	flipped[len(flipped)-1] ^= 1 // a bit of the tag
	tampered := "vault:v1:" + base64.StdEncoding.EncodeToString(flipped)
	for _, tc := range []struct {
		name, path string
		data       map[string]any
		status     int
		want       string
	}{
		{"not base64", "transit/encrypt/orders", map[string]any{"plaintext": "***"}, 400, "illegal base64"},
		{"no plaintext", "transit/encrypt/orders", map[string]any{}, 400, "missing plaintext"},
		{"version too new for encrypt", "transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "key_version": 3}, 400, "higher than the latest"},
		{"context", "transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "context": b64("c")}, 400, "context is not supported"},
		{"unknown type on upsert", "transit/encrypt/new", map[string]any{"plaintext": b64("x"), "type": "aes128-gcm96"}, 400, "aes256-gcm96"},
		{"garbage", "transit/decrypt/orders", map[string]any{"ciphertext": "garbage"}, 400, "invalid ciphertext: no prefix"},
		{"bad base64", "transit/decrypt/orders", map[string]any{"ciphertext": "vault:v1:***"}, 400, "could not decode base64"},
		{"tampered", "transit/decrypt/orders", map[string]any{"ciphertext": tampered}, 400, "message authentication failed"},
		{"too short", "transit/decrypt/orders", map[string]any{"ciphertext": "vault:v1:" + b64("short")}, 400, "too short"},
		{"version too new", "transit/decrypt/orders", map[string]any{"ciphertext": "vault:v9:" + strings.TrimPrefix(ct, "vault:v1:")}, 400, "version is too new"},
		{"another key's", "transit/decrypt/other", map[string]any{"ciphertext": ct}, 400, "not found"},
		{"no ciphertext", "transit/decrypt/orders", map[string]any{}, 400, "missing ciphertext"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a := c.write(t, tc.path, tc.data); a.status != tc.status || !strings.Contains(a.errs(), tc.want) {
				t.Errorf("write(%s, %v) = %v, want %d naming %q", tc.path, tc.data, a, tc.status, tc.want)
			}
		})
	}
	// A ciphertext of one key does not open with another.
	c.mustWrite(t, "transit/keys/other", nil)
	if a := c.write(t, "transit/decrypt/other", map[string]any{"ciphertext": ct}); a.status != 400 ||
		!strings.Contains(a.errs(), "message authentication failed") {
		t.Errorf("decrypt with another key = %v", a)
	}

	// The minimum decryption version refuses older ciphertexts; the
	// minimum encryption version older key versions.
	c.mustWrite(t, "transit/keys/orders/config", map[string]any{"min_decryption_version": 2, "min_encryption_version": 2})
	if a := c.write(t, "transit/decrypt/orders", map[string]any{"ciphertext": ct}); a.status != 400 || !strings.Contains(a.errs(), "too old") {
		t.Errorf("decrypt below min_decryption_version = %v", a)
	}
	if a := c.write(t, "transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "key_version": 1}); a.status != 400 ||
		!strings.Contains(a.errs(), "less than the minimum") {
		t.Errorf("encrypt below min_encryption_version = %v", a)
	}
}

func TestBatch(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root
	c.mustWrite(t, "transit/keys/batch", nil)
	in := []any{
		map[string]any{"plaintext": b64("one"), "reference": "a"},
		map[string]any{"plaintext": b64("two"), "reference": "b"},
		map[string]any{"plaintext": b64("three")},
	}
	enc := c.mustWrite(t, "transit/encrypt/batch", map[string]any{"batch_input": in})
	results, _ := enc.data["batch_results"].([]any)
	if len(results) != 3 {
		t.Fatalf("batch_results = %v", enc.data)
	}
	var cts []any
	for i, r := range results {
		m := r.(map[string]any)
		if !strings.HasPrefix(m["ciphertext"].(string), "vault:v1:") || m["key_version"].(json.Number).String() != "1" || m["error"] != nil {
			t.Errorf("item %d = %v", i, m)
		}
		cts = append(cts, map[string]any{"ciphertext": m["ciphertext"], "reference": m["reference"]})
	}
	if results[0].(map[string]any)["reference"] != "a" || results[2].(map[string]any)["reference"] != "" {
		t.Errorf("references = %v", results)
	}
	dec := c.mustWrite(t, "transit/decrypt/batch", map[string]any{"batch_input": cts})
	for i, want := range []string{"one", "two", "three"} {
		if got := dec.data["batch_results"].([]any)[i].(map[string]any)["plaintext"]; got != b64(want) {
			t.Errorf("decrypted item %d = %v, want %q", i, got, b64(want))
		}
	}

	// One bad item fails itself, not the others, and the batch answers
	// 400 with every item's result, as Vault answers; with a
	// partial_failure_response_code, that code.
	bad := []any{map[string]any{"plaintext": b64("ok")}, map[string]any{"plaintext": "%%%", "reference": "bad"}}
	partly := c.write(t, "transit/encrypt/batch", map[string]any{"batch_input": bad})
	items := partly.data["batch_results"].([]any)
	if partly.status != 400 || !strings.HasPrefix(items[0].(map[string]any)["ciphertext"].(string), "vault:v1:") ||
		!strings.Contains(items[1].(map[string]any)["error"].(string), "illegal base64") || items[1].(map[string]any)["reference"] != "bad" {
		t.Errorf("partly bad batch = %v", partly)
	}
	if a := c.write(t, "transit/encrypt/batch", map[string]any{"batch_input": bad, "partial_failure_response_code": 207}); a.status != 207 {
		t.Errorf("partly bad batch with partial_failure_response_code 207 = %v", a)
	}
	// Every item failed: the override does not apply.
	if a := c.write(t, "transit/decrypt/batch", map[string]any{"batch_input": []any{
		map[string]any{"ciphertext": "vault:v1:AAAA"}, map[string]any{"ciphertext": "nope"}}, "partial_failure_response_code": 200}); a.status != 400 {
		t.Errorf("all-bad decrypt batch = %v", a)
	}
	if a := c.write(t, "transit/encrypt/batch", map[string]any{"batch_input": []any{}}); a.status != 400 ||
		!strings.Contains(a.errs(), "missing batch input") {
		t.Errorf("empty batch = %v", a)
	}
	if a := c.write(t, "transit/encrypt/batch", map[string]any{"batch_input": "x"}); a.status != 400 {
		t.Errorf("batch_input not an array = %v", a)
	}
}

func TestRewrapAndDataKey(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.root
	old := c.mustWrite(t, "transit/encrypt/r", map[string]any{"plaintext": b64("secret")}).str("ciphertext")
	c.mustWrite(t, "transit/keys/r/rotate", nil)
	rw := c.mustWrite(t, "transit/rewrap/r", map[string]any{"ciphertext": old})
	if !strings.HasPrefix(rw.str("ciphertext"), "vault:v2:") || rw.num(t, "key_version") != 2 {
		t.Fatalf("rewrap answered %v", rw.data)
	}
	if got := c.mustWrite(t, "transit/decrypt/r", map[string]any{"ciphertext": rw.str("ciphertext")}).str("plaintext"); got != b64("secret") {
		t.Errorf("decrypt of the rewrapped = %q", got)
	}
	batch := c.mustWrite(t, "transit/rewrap/r", map[string]any{"batch_input": []any{
		map[string]any{"ciphertext": old, "reference": "x"}, map[string]any{"ciphertext": old, "key_version": 1}}})
	items := batch.data["batch_results"].([]any)
	if !strings.HasPrefix(items[0].(map[string]any)["ciphertext"].(string), "vault:v2:") || items[0].(map[string]any)["reference"] != "x" ||
		!strings.HasPrefix(items[1].(map[string]any)["ciphertext"].(string), "vault:v1:") {
		t.Errorf("rewrap batch = %v", items)
	}
	if a := c.write(t, "transit/rewrap/r", map[string]any{"ciphertext": "vault:v1:xx"}); a.status != 400 {
		t.Errorf("rewrap of a bad ciphertext = %v", a)
	}

	for _, bits := range []int{0, 128, 256, 512} {
		data := map[string]any{}
		if bits != 0 {
			data["bits"] = bits
		}
		dk := c.mustWrite(t, "transit/datakey/plaintext/r", data)
		plain, err := base64.StdEncoding.DecodeString(dk.str("plaintext"))
		if want := max(bits, 256) / 8; bits == 128 && len(plain) != 16 || bits != 128 && len(plain) != want || err != nil {
			t.Errorf("datakey bits %d: plaintext of %d bytes (%v)", bits, len(plain), err)
		}
		// The ciphertext decrypts to the key itself, as Vault's does.
		if got := c.mustWrite(t, "transit/decrypt/r", map[string]any{"ciphertext": dk.str("ciphertext")}).str("plaintext"); got != dk.str("plaintext") {
			t.Errorf("decrypt of the data key = %q, want %q", got, dk.str("plaintext"))
		}
	}
	wrapped := c.mustWrite(t, "transit/datakey/wrapped/r", nil)
	if _, ok := wrapped.data["plaintext"]; ok || !strings.HasPrefix(wrapped.str("ciphertext"), "vault:v2:") || wrapped.num(t, "key_version") != 2 {
		t.Errorf("wrapped datakey answered %v", wrapped.data)
	}
	if a := c.write(t, "transit/datakey/plaintext/r", map[string]any{"bits": 100}); a.status != 400 || !strings.Contains(a.errs(), "bits") {
		t.Errorf("datakey of 100 bits = %v", a)
	}
	if a := c.write(t, "transit/datakey/other/r", nil); a.status != 400 || !strings.Contains(a.errs(), "invalid type") {
		t.Errorf("datakey of type other = %v", a)
	}
	if a := c.write(t, "transit/datakey/plaintext/none", nil); a.status != 400 || !strings.Contains(a.errs(), "not found") {
		t.Errorf("datakey of an unknown key = %v", a)
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
