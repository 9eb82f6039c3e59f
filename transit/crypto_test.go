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
	c := e.vault
	// Encrypt makes the key on first use.
	enc := mustWrite(t, c, "transit/encrypt/orders", map[string]any{"plaintext": b64("the quick brown fox")})
	ct := str(enc, "ciphertext")
	if !strings.HasPrefix(ct, "vault:v1:") || num(t, enc, "key_version") != 1 {
		t.Fatalf("encrypt answered %v", enc.Data)
	}
	blob, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ct, "vault:v1:"))
	if err != nil || len(blob) != 12+len("the quick brown fox")+16 {
		t.Errorf("ciphertext %q: %d bytes (%v), want nonce, ciphertext and tag", ct, len(blob), err)
	}
	dec := mustWrite(t, c, "transit/decrypt/orders", map[string]any{"ciphertext": ct})
	if str(dec, "plaintext") != b64("the quick brown fox") {
		t.Errorf("decrypt answered %v", dec.Data)
	}
	// An empty plaintext is one.
	empty := mustWrite(t, c, "transit/encrypt/orders", map[string]any{"plaintext": ""})
	if got := str(mustWrite(t, c, "transit/decrypt/orders", map[string]any{"ciphertext": str(empty, "ciphertext")}), "plaintext"); got != "" {
		t.Errorf("decrypt of an empty plaintext = %q", got)
	}

	// Older versions decrypt; encrypt takes the latest unless told.
	mustWrite(t, c, "transit/keys/orders/rotate", nil)
	if got := str(mustWrite(t, c, "transit/decrypt/orders", map[string]any{"ciphertext": ct}), "plaintext"); got != b64("the quick brown fox") {
		t.Errorf("decrypt of v1 after rotation = %q", got)
	}
	v2 := mustWrite(t, c, "transit/encrypt/orders", map[string]any{"plaintext": b64("x")})
	if !strings.HasPrefix(str(v2, "ciphertext"), "vault:v2:") || num(t, v2, "key_version") != 2 {
		t.Errorf("encrypt after rotation answered %v", v2.Data)
	}
	v1 := mustWrite(t, c, "transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "key_version": 1})
	if !strings.HasPrefix(str(v1, "ciphertext"), "vault:v1:") {
		t.Errorf("encrypt with key_version 1 answered %v", v1.Data)
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
		{"other type on upsert", "transit/encrypt/new", map[string]any{"plaintext": b64("x"), "type": "chacha20-poly1305"}, 400, "aes256-gcm96"},
		{"garbage", "transit/decrypt/orders", map[string]any{"ciphertext": "garbage"}, 400, "invalid ciphertext: no prefix"},
		{"bad base64", "transit/decrypt/orders", map[string]any{"ciphertext": "vault:v1:***"}, 400, "could not decode base64"},
		{"tampered", "transit/decrypt/orders", map[string]any{"ciphertext": tampered}, 400, "message authentication failed"},
		{"too short", "transit/decrypt/orders", map[string]any{"ciphertext": "vault:v1:" + b64("short")}, 400, "too short"},
		{"version too new", "transit/decrypt/orders", map[string]any{"ciphertext": "vault:v9:" + strings.TrimPrefix(ct, "vault:v1:")}, 400, "version is too new"},
		{"another key's", "transit/decrypt/other", map[string]any{"ciphertext": ct}, 400, "not found"},
		{"no ciphertext", "transit/decrypt/orders", map[string]any{}, 400, "missing ciphertext"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Logical().Write(tc.path, tc.data)
			if status(err) != tc.status || !strings.Contains(errorsOf(err), tc.want) {
				t.Errorf("Write(%s, %v) = %v, want %d naming %q", tc.path, tc.data, err, tc.status, tc.want)
			}
		})
	}
	// A ciphertext of one key does not open with another.
	mustWrite(t, c, "transit/keys/other", nil)
	if _, err := c.Logical().Write("transit/decrypt/other", map[string]any{"ciphertext": ct}); status(err) != 400 ||
		!strings.Contains(errorsOf(err), "message authentication failed") {
		t.Errorf("decrypt with another key = %v", err)
	}

	// The minimum decryption version refuses older ciphertexts; the
	// minimum encryption version older key versions.
	mustWrite(t, c, "transit/keys/orders/config", map[string]any{"min_decryption_version": 2, "min_encryption_version": 2})
	if _, err := c.Logical().Write("transit/decrypt/orders", map[string]any{"ciphertext": ct}); status(err) != 400 || !strings.Contains(errorsOf(err), "too old") {
		t.Errorf("decrypt below min_decryption_version = %v", err)
	}
	if _, err := c.Logical().Write("transit/encrypt/orders", map[string]any{"plaintext": b64("x"), "key_version": 1}); status(err) != 400 ||
		!strings.Contains(errorsOf(err), "less than the minimum") {
		t.Errorf("encrypt below min_encryption_version = %v", err)
	}
}

func TestBatch(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.vault
	mustWrite(t, c, "transit/keys/batch", nil)
	in := []any{
		map[string]any{"plaintext": b64("one"), "reference": "a"},
		map[string]any{"plaintext": b64("two"), "reference": "b"},
		map[string]any{"plaintext": b64("three")},
	}
	enc := mustWrite(t, c, "transit/encrypt/batch", map[string]any{"batch_input": in})
	results, _ := enc.Data["batch_results"].([]any)
	if len(results) != 3 {
		t.Fatalf("batch_results = %v", enc.Data)
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
	dec := mustWrite(t, c, "transit/decrypt/batch", map[string]any{"batch_input": cts})
	for i, want := range []string{"one", "two", "three"} {
		if got := dec.Data["batch_results"].([]any)[i].(map[string]any)["plaintext"]; got != b64(want) {
			t.Errorf("decrypted item %d = %v, want %q", i, got, b64(want))
		}
	}

	// One bad item fails itself, not the others, and the batch answers
	// 400 with every item's result, as Vault answers; with a
	// partial_failure_response_code, that code.
	bad := []any{map[string]any{"plaintext": b64("ok")}, map[string]any{"plaintext": "%%%", "reference": "bad"}}
	code, body := rawWrite(t, c, "transit/encrypt/batch", map[string]any{"batch_input": bad})
	items := body["data"].(map[string]any)["batch_results"].([]any)
	if code != 400 || !strings.HasPrefix(items[0].(map[string]any)["ciphertext"].(string), "vault:v1:") ||
		!strings.Contains(items[1].(map[string]any)["error"].(string), "illegal base64") || items[1].(map[string]any)["reference"] != "bad" {
		t.Errorf("partly bad batch = %d %v", code, body)
	}
	code, _ = rawWrite(t, c, "transit/encrypt/batch", map[string]any{"batch_input": bad, "partial_failure_response_code": 207})
	if code != 207 {
		t.Errorf("partly bad batch with partial_failure_response_code 207 = %d", code)
	}
	code, body = rawWrite(t, c, "transit/decrypt/batch", map[string]any{"batch_input": []any{
		map[string]any{"ciphertext": "vault:v1:AAAA"}, map[string]any{"ciphertext": "nope"}}, "partial_failure_response_code": 200})
	if code != 400 { // every item failed: the override does not apply
		t.Errorf("all-bad decrypt batch = %d %v", code, body)
	}
	if _, err := c.Logical().Write("transit/encrypt/batch", map[string]any{"batch_input": []any{}}); status(err) != 400 ||
		!strings.Contains(errorsOf(err), "missing batch input") {
		t.Errorf("empty batch = %v", err)
	}
	if _, err := c.Logical().Write("transit/encrypt/batch", map[string]any{"batch_input": "x"}); status(err) != 400 {
		t.Errorf("batch_input not an array = %v", err)
	}
}

func TestRewrapAndDataKey(t *testing.T) {
	e := newEnv(t, kms.Options{})
	c := e.vault
	old := str(mustWrite(t, c, "transit/encrypt/r", map[string]any{"plaintext": b64("secret")}), "ciphertext")
	mustWrite(t, c, "transit/keys/r/rotate", nil)
	rw := mustWrite(t, c, "transit/rewrap/r", map[string]any{"ciphertext": old})
	if !strings.HasPrefix(str(rw, "ciphertext"), "vault:v2:") || num(t, rw, "key_version") != 2 {
		t.Fatalf("rewrap answered %v", rw.Data)
	}
	if got := str(mustWrite(t, c, "transit/decrypt/r", map[string]any{"ciphertext": str(rw, "ciphertext")}), "plaintext"); got != b64("secret") {
		t.Errorf("decrypt of the rewrapped = %q", got)
	}
	batch := mustWrite(t, c, "transit/rewrap/r", map[string]any{"batch_input": []any{
		map[string]any{"ciphertext": old, "reference": "x"}, map[string]any{"ciphertext": old, "key_version": 1}}})
	items := batch.Data["batch_results"].([]any)
	if !strings.HasPrefix(items[0].(map[string]any)["ciphertext"].(string), "vault:v2:") || items[0].(map[string]any)["reference"] != "x" ||
		!strings.HasPrefix(items[1].(map[string]any)["ciphertext"].(string), "vault:v1:") {
		t.Errorf("rewrap batch = %v", items)
	}
	if _, err := c.Logical().Write("transit/rewrap/r", map[string]any{"ciphertext": "vault:v1:xx"}); status(err) != 400 {
		t.Errorf("rewrap of a bad ciphertext = %v", err)
	}

	for _, bits := range []int{0, 128, 256, 512} {
		data := map[string]any{}
		if bits != 0 {
			data["bits"] = bits
		}
		dk := mustWrite(t, c, "transit/datakey/plaintext/r", data)
		plain, err := base64.StdEncoding.DecodeString(str(dk, "plaintext"))
		if want := max(bits, 256) / 8; bits == 128 && len(plain) != 16 || bits != 128 && len(plain) != want || err != nil {
			t.Errorf("datakey bits %d: plaintext of %d bytes (%v)", bits, len(plain), err)
		}
		// The ciphertext decrypts to the key itself, as Vault's does.
		if got := str(mustWrite(t, c, "transit/decrypt/r", map[string]any{"ciphertext": str(dk, "ciphertext")}), "plaintext"); got != str(dk, "plaintext") {
			t.Errorf("decrypt of the data key = %q, want %q", got, str(dk, "plaintext"))
		}
	}
	wrapped := mustWrite(t, c, "transit/datakey/wrapped/r", nil)
	if _, ok := wrapped.Data["plaintext"]; ok || !strings.HasPrefix(str(wrapped, "ciphertext"), "vault:v2:") || num(t, wrapped, "key_version") != 2 {
		t.Errorf("wrapped datakey answered %v", wrapped.Data)
	}
	if _, err := c.Logical().Write("transit/datakey/plaintext/r", map[string]any{"bits": 100}); status(err) != 400 || !strings.Contains(errorsOf(err), "bits") {
		t.Errorf("datakey of 100 bits = %v", err)
	}
	if _, err := c.Logical().Write("transit/datakey/other/r", nil); status(err) != 400 || !strings.Contains(errorsOf(err), "invalid type") {
		t.Errorf("datakey of type other = %v", err)
	}
	if _, err := c.Logical().Write("transit/datakey/plaintext/none", nil); status(err) != 400 || !strings.Contains(errorsOf(err), "not found") {
		t.Errorf("datakey of an unknown key = %v", err)
	}
}
