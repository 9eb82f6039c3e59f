package transit_test

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestRoutes: HashiCorp's and OpenBao's clients drive every route of the
// transit engine that kmsd serves, single and batch, against the real
// kmsd -transit, and read its refusals in their own error types: the
// answers have Vault's shapes where the clients and the programs on them
// look (numbers as numbers, the keys map by version, batch_results in
// order, errors as {"errors": [...]} with Vault's statuses).
func TestRoutes(t *testing.T) {
	eachClient(t, func(t *testing.T, cl realClient, in *harness.Instance, p *kmsdtest.Proc) {
		name := cl.key
		c := cl.make(t, p, in.Bootstrap)
		routeSuite(t, c, name)
		encOnly := cl.make(t, p, in.APIKey(t, p, "keyring."+name+".encrypt"))
		refusals(t, c, encOnly, name)
	})
}

// routeSuite runs every route on the key name with c, a credential that
// may do everything.
func routeSuite(t *testing.T, c api, name string) {
	if _, err := c.write("transit/keys/"+name, map[string]any{"type": "aes256-gcm96"}); err != nil {
		t.Fatalf("create = %v", err)
	}
	key := must(t, "read")(c.read("transit/keys/" + name))
	if key["type"] != "aes256-gcm96" || number(t, key["latest_version"]) != 1 || key["exportable"] != false ||
		key["supports_encryption"] != true || key["supports_decryption"] != true {
		t.Errorf("read = %v", key)
	}
	if versions, _ := key["keys"].(map[string]any); len(versions) != 1 || number(t, versions["1"]) <= 0 {
		t.Errorf("read keys = %#v, want version 1's creation time in Unix seconds", key["keys"])
	}
	list := must(t, "list")(c.list("transit/keys"))
	if names, _ := list["keys"].([]any); !slices.Contains(names, any(name)) {
		t.Errorf("list = %v, want %s in it", list, name)
	}

	enc := must(t, "encrypt")(c.write("transit/encrypt/"+name, map[string]any{"plaintext": b64("one")}))
	ct1, _ := enc["ciphertext"].(string)
	if !strings.HasPrefix(ct1, "vault:v1:") || number(t, enc["key_version"]) != 1 {
		t.Errorf("encrypt = %v", enc)
	}
	dec := must(t, "decrypt")(c.write("transit/decrypt/"+name, map[string]any{"ciphertext": ct1}))
	if dec["plaintext"] != b64("one") {
		t.Errorf("decrypt = %v", dec)
	}

	must(t, "rotate")(c.write("transit/keys/"+name+"/rotate", nil))
	batch := must(t, "batch encrypt")(c.write("transit/encrypt/"+name, map[string]any{"batch_input": []any{
		map[string]any{"plaintext": b64("two")}, map[string]any{"plaintext": b64("three"), "key_version": 1}}}))
	results := batchResults(t, batch, 2)
	ct2, _ := results[0]["ciphertext"].(string)
	ct3, _ := results[1]["ciphertext"].(string)
	if !strings.HasPrefix(ct2, "vault:v2:") || !strings.HasPrefix(ct3, "vault:v1:") {
		t.Errorf("batch encrypt = %v", results)
	}
	bdec := batchResults(t, must(t, "batch decrypt")(c.write("transit/decrypt/"+name, map[string]any{"batch_input": []any{
		map[string]any{"ciphertext": ct2}, map[string]any{"ciphertext": ct3}}})), 2)
	if bdec[0]["plaintext"] != b64("two") || bdec[1]["plaintext"] != b64("three") {
		t.Errorf("batch decrypt = %v", bdec)
	}

	rw := must(t, "rewrap")(c.write("transit/rewrap/"+name, map[string]any{"ciphertext": ct1}))
	if ct, _ := rw["ciphertext"].(string); !strings.HasPrefix(ct, "vault:v2:") {
		t.Errorf("rewrap = %v", rw)
	}
	brw := batchResults(t, must(t, "batch rewrap")(c.write("transit/rewrap/"+name, map[string]any{"batch_input": []any{
		map[string]any{"ciphertext": ct1}, map[string]any{"ciphertext": ct3}}})), 2)
	for _, r := range brw {
		if ct, _ := r["ciphertext"].(string); !strings.HasPrefix(ct, "vault:v2:") {
			t.Errorf("batch rewrap = %v", brw)
		}
	}

	dk := must(t, "datakey plaintext")(c.write("transit/datakey/plaintext/"+name, map[string]any{"bits": 256}))
	wrapped, _ := dk["ciphertext"].(string)
	if raw, err := base64.StdEncoding.DecodeString(dk["plaintext"].(string)); err != nil || len(raw) != 32 {
		t.Errorf("datakey plaintext = %v", dk)
	}
	if opened := must(t, "decrypt datakey")(c.write("transit/decrypt/"+name, map[string]any{"ciphertext": wrapped})); opened["plaintext"] != dk["plaintext"] {
		t.Errorf("the data key's ciphertext opens to %v, want its plaintext", opened["plaintext"])
	}
	if wk := must(t, "datakey wrapped")(c.write("transit/datakey/wrapped/"+name, nil)); wk["plaintext"] != nil || wk["ciphertext"] == nil {
		t.Errorf("datakey wrapped = %v, want a ciphertext only", wk)
	}

	must(t, "config")(c.write("transit/keys/"+name+"/config", map[string]any{"min_decryption_version": 2, "deletion_allowed": true}))
	if _, err := c.write("transit/decrypt/"+name, map[string]any{"ciphertext": ct1}); !refused(c, err, 400, "") {
		t.Errorf("decrypt below min_decryption_version = %v, want 400", err)
	}
	if err := c.delete("transit/keys/" + name); err != nil {
		t.Fatalf("delete = %v", err)
	}
	if k, err := c.read("transit/keys/" + name); k != nil || err != nil {
		t.Errorf("read after delete = %v, %v; want none", k, err)
	}
}

// must returns a check of a call's answer: its data, failing the test
// on an error or no data.
func must(t *testing.T, what string) func(data map[string]any, err error) map[string]any {
	return func(data map[string]any, err error) map[string]any {
		t.Helper()
		if err != nil || data == nil {
			t.Fatalf("%s = %v, %v", what, data, err)
		}
		return data
	}
}

// refusals checks the error answers: what the clients read in their own
// error types.
func refusals(t *testing.T, root, encOnly api, name string) {
	if _, err := root.write("transit/keys/"+name, nil); err != nil {
		t.Fatal(err)
	}
	enc, err := encOnly.write("transit/encrypt/"+name, map[string]any{"plaintext": b64("x")})
	if err != nil {
		t.Fatalf("encrypt with keyring.%s.encrypt = %v", name, err)
	}
	for _, tc := range []struct {
		what   string
		call   func() error
		status int
		says   string
	}{
		{"decrypt with an encrypt-only credential", func() error {
			_, err := encOnly.write("transit/decrypt/"+name, map[string]any{"ciphertext": enc["ciphertext"]})
			return err
		}, 403, "missing permission flag"},
		{"read with an encrypt-only credential", func() error { _, err := encOnly.read("transit/keys/" + name); return err }, 403, "missing permission flag"},
		{"decrypt of a malformed ciphertext", func() error {
			_, err := root.write("transit/decrypt/"+name, map[string]any{"ciphertext": "vault:v1:%%%"})
			return err
		}, 400, ""},
		{"encrypt of plaintext that is not base64", func() error {
			_, err := root.write("transit/encrypt/"+name, map[string]any{"plaintext": "%%%"})
			return err
		}, 400, "base64"},
		{"an empty batch", func() error {
			_, err := root.write("transit/encrypt/"+name, map[string]any{"batch_input": []any{}})
			return err
		}, 400, ""},
		{"delete without deletion_allowed", func() error { return root.delete("transit/keys/" + name) }, 400, "deletion"},
		{"rotate of a key that does not exist", func() error { _, err := root.write("transit/keys/none-"+name+"/rotate", nil); return err }, 400, ""},
	} {
		if err := tc.call(); !refused(root, err, tc.status, tc.says) {
			status, msgs := root.refusal(err)
			t.Errorf("%s = %v (status %d, errors %q), want %d saying %q", tc.what, err, status, msgs, tc.status, tc.says)
		}
	}
}

// refused reports whether err is an error answer of status whose
// messages say says.
func refused(c api, err error, status int, says string) bool {
	got, msgs := c.refusal(err)
	return got == status && strings.Contains(strings.ToLower(strings.Join(msgs, " ")), says)
}

// batchResults returns the n batch_results of an answer.
func batchResults(t *testing.T, data map[string]any, n int) []map[string]any {
	t.Helper()
	raw, _ := data["batch_results"].([]any)
	if len(raw) != n {
		t.Fatalf("batch_results = %v, want %d", data, n)
	}
	out := make([]map[string]any, n)
	for i, r := range raw {
		out[i], _ = r.(map[string]any)
		if e, _ := out[i]["error"].(string); e != "" {
			t.Fatalf("batch item %d failed: %s", i, e)
		}
	}
	return out
}

// number returns a JSON number of an answer (the clients decode numbers
// as json.Number), failing the test for anything else.
func number(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%#v is no number", v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}
