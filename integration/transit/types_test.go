package transit_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pubkeytest"
)

// keyTypes are the types of transit key kmsd makes, with the parameters
// they are made with and what their read answers.
var keyTypes = []struct {
	typ      string
	params   map[string]any
	encrypts bool
	pubName  string // the name of the public keys of an asymmetric type
	keySize  int64  // key_size, for hmac
	paramSet string // parameter_set, for ml-dsa
}{
	{typ: "aes256-gcm96", encrypts: true},
	{typ: "chacha20-poly1305", encrypts: true},
	{typ: "hmac", params: map[string]any{"key_size": 64}, keySize: 64},
	{typ: "ed25519", pubName: "ed25519"},
	{typ: "ecdsa-p256", pubName: "P-256"},
	{typ: "ecdsa-p384", pubName: "P-384"},
	{typ: "rsa-2048", pubName: "rsa-2048"},
	{typ: "rsa-3072", pubName: "rsa-3072"},
	{typ: "rsa-4096", pubName: "rsa-4096"},
	{typ: "ml-dsa", pubName: "ML-DSA-65", paramSet: "65"},
	{typ: "ml-dsa", params: map[string]any{"parameter_set": "44"}, pubName: "ML-DSA-44", paramSet: "44"},
	{typ: "ml-dsa", params: map[string]any{"parameter_set": "87"}, pubName: "ML-DSA-87", paramSet: "87"},
}

// TestKeyTypes: HashiCorp's and OpenBao's clients make a key of every
// type against the real kmsd -transit and read it in Vault's shape:
// type, key_size, parameter_set and supports_ fields as the type has
// them; the keys map by version with the creation time in Unix seconds
// for a symmetric type and, for an asymmetric one, {public_key, name,
// creation_time} whose public key Go's crypto parses as a key of the
// type (PEM of PKIX for ecdsa and rsa, base64 for ed25519 and ml-dsa).
// The AEAD types encrypt and decrypt with associated_data, single and
// batch, rewrap and datakey too; the other types refuse encrypt.
func TestKeyTypes(t *testing.T) {
	eachClient(t, func(t *testing.T, cl realClient, in *harness.Instance, p *kmsdtest.Proc) {
		c := cl.make(t, p, in.Bootstrap)
		for _, tc := range keyTypes {
			name := cl.key + "-" + strings.ReplaceAll(tc.typ, "-", "") + tc.paramSet
			data := map[string]any{"type": tc.typ}
			for k, v := range tc.params {
				data[k] = v
			}
			must(t, "create "+name)(c.write("transit/keys/"+name, data))
			key := must(t, "read "+name)(c.read("transit/keys/" + name))
			if key["type"] != tc.typ || key["supports_encryption"] != tc.encrypts || key["supports_decryption"] != tc.encrypts ||
				key["supports_signing"] != (tc.pubName != "") || key["supports_derivation"] != false {
				t.Errorf("%s: read = %v", tc.typ, key)
			}
			if tc.keySize != 0 && number(t, key["key_size"]) != tc.keySize {
				t.Errorf("%s: key_size = %v, want %d", tc.typ, key["key_size"], tc.keySize)
			}
			if tc.paramSet != "" && key["parameter_set"] != tc.paramSet {
				t.Errorf("%s: parameter_set = %v, want %s", tc.typ, key["parameter_set"], tc.paramSet)
			}
			v1 := key["keys"].(map[string]any)["1"]
			if tc.pubName == "" {
				if number(t, v1) <= 0 {
					t.Errorf("%s: keys[1] = %v, want its creation time in Unix seconds", tc.typ, v1)
				}
			} else {
				pub, _ := v1.(map[string]any)
				if pub["name"] != tc.pubName || pub["creation_time"] == nil {
					t.Errorf("%s: keys[1] = %v, want its public key named %s and its creation time", tc.typ, v1, tc.pubName)
				}
				if _, err := pubkeytest.Parse(tc.typ, tc.paramSet, text(pub, "public_key")); err != nil {
					t.Errorf("%s: keys[1].public_key: %v", tc.typ, err)
				}
			}
			if tc.encrypts {
				associatedData(t, c, name)
			} else if _, err := c.write("transit/encrypt/"+name, map[string]any{"plaintext": b64("x")}); !refused(c, err, 400, "does not support encryption") {
				t.Errorf("%s: encrypt = %v, want 400", tc.typ, err)
			}
		}
	})
}

// associatedData checks that the AEAD key name binds associated_data to
// what it encrypts, single and batch, and on rewrap and datakey: decrypt
// opens a ciphertext only with the same data (400, that the message authentication failed, as Vault says; in a batch
// with a partial_failure_response_code, the item's error).
func associatedData(t *testing.T, c api, name string) {
	t.Helper()
	ad, other := b64("tenant=1"), b64("tenant=2")
	ct, _ := must(t, "encrypt with associated_data")(c.write("transit/encrypt/"+name,
		map[string]any{"plaintext": b64("secret"), "associated_data": ad}))["ciphertext"].(string)
	if dec := must(t, "decrypt with associated_data")(c.write("transit/decrypt/"+name,
		map[string]any{"ciphertext": ct, "associated_data": ad})); dec["plaintext"] != b64("secret") {
		t.Errorf("%s: decrypt with its associated data = %v", name, dec)
	}
	for _, wrong := range []map[string]any{{"ciphertext": ct, "associated_data": other}, {"ciphertext": ct}} {
		if _, err := c.write("transit/decrypt/"+name, wrong); !refused(c, err, 400, "message authentication failed") {
			t.Errorf("%s: decrypt with associated data %v = %v, want 400", name, wrong["associated_data"], err)
		}
	}

	enc := batchResults(t, must(t, "batch encrypt with associated_data")(c.write("transit/encrypt/"+name, map[string]any{"batch_input": []any{
		map[string]any{"plaintext": b64("one"), "associated_data": ad}, map[string]any{"plaintext": b64("two"), "associated_data": other}}})), 2)
	dec := batchResults(t, must(t, "batch decrypt with associated_data")(c.write("transit/decrypt/"+name, map[string]any{"batch_input": []any{
		map[string]any{"ciphertext": enc[0]["ciphertext"], "associated_data": ad},
		map[string]any{"ciphertext": enc[1]["ciphertext"], "associated_data": other}}})), 2)
	if dec[0]["plaintext"] != b64("one") || dec[1]["plaintext"] != b64("two") {
		t.Errorf("%s: batch decrypt = %v", name, dec)
	}
	mixed := must(t, "batch decrypt with swapped associated_data")(c.write("transit/decrypt/"+name, map[string]any{
		"partial_failure_response_code": 207, "batch_input": []any{
			map[string]any{"ciphertext": enc[0]["ciphertext"], "associated_data": ad},
			map[string]any{"ciphertext": enc[1]["ciphertext"], "associated_data": ad}}}))
	r, _ := mixed["batch_results"].([]any)
	if len(r) != 2 || r[0].(map[string]any)["plaintext"] != b64("one") || text(r[1], "plaintext") != "" || text(r[1], "error") == "" {
		t.Errorf("%s: batch decrypt of an item with other associated data = %v, want its error beside the other's plaintext", name, mixed)
	}

	must(t, "rotate")(c.write("transit/keys/"+name+"/rotate", nil))
	rw, _ := must(t, "rewrap with associated_data")(c.write("transit/rewrap/"+name,
		map[string]any{"ciphertext": ct, "associated_data": ad}))["ciphertext"].(string)
	if dec := must(t, "decrypt of the rewrapped")(c.write("transit/decrypt/"+name,
		map[string]any{"ciphertext": rw, "associated_data": ad})); !strings.HasPrefix(rw, "vault:v2:") || dec["plaintext"] != b64("secret") {
		t.Errorf("%s: the rewrapped %q decrypts to %v", name, rw, dec)
	}
	if _, err := c.write("transit/rewrap/"+name, map[string]any{"ciphertext": ct, "associated_data": other}); !refused(c, err, 400, "") {
		t.Errorf("%s: rewrap with other associated data = %v, want 400", name, err)
	}
	dk := must(t, "datakey with associated_data")(c.write("transit/datakey/plaintext/"+name, map[string]any{"associated_data": ad}))
	if dec := must(t, "decrypt of the data key")(c.write("transit/decrypt/"+name,
		map[string]any{"ciphertext": dk["ciphertext"], "associated_data": ad})); dec["plaintext"] != dk["plaintext"] || dk["plaintext"] == nil {
		t.Errorf("%s: the data key %v decrypts to %v", name, dk, dec)
	}
	if _, err := c.write("transit/encrypt/"+name, map[string]any{"plaintext": b64("x"), "associated_data": "%%%"}); !refused(c, err, 400, "associated_data") {
		t.Errorf("%s: associated_data that is not base64 = %v, want 400 naming it", name, err)
	}
}

// TestExportKinds: through HashiCorp's and OpenBao's clients, the
// export routes by kind: an asymmetric key's public-key to a credential
// that may only read it, exportable or not, equal to the read's; an
// exportable ed25519 key's signing-key with keyring.<name>.export, the
// private key of the public key read (it signs what the public key
// verifies); an hmac-key of an exportable key; and the refusals: a key
// that is not exportable 400, a credential without the export flag 403.
func TestExportKinds(t *testing.T) {
	eachClient(t, func(t *testing.T, cl realClient, in *harness.Instance, p *kmsdtest.Proc) {
		root := cl.make(t, p, in.Bootstrap)
		sealed, open, mac := cl.key+"-sealed", cl.key+"-open", cl.key+"-mac"
		must(t, "create")(root.write("transit/keys/"+sealed, map[string]any{"type": "ecdsa-p256"}))
		must(t, "create")(root.write("transit/keys/"+open, map[string]any{"type": "ed25519", "exportable": true}))
		must(t, "create")(root.write("transit/keys/"+mac, map[string]any{"type": "hmac", "key_size": 48, "exportable": true}))
		reader := cl.make(t, p, in.APIKey(t, p, "keyring."+sealed+".read", "keyring."+open+".read"))
		exporter := cl.make(t, p, in.APIKey(t, p, "keyring."+sealed+".export", "keyring."+open+".export", "keyring."+mac+".export"))

		for _, tc := range []struct{ name, typ string }{{sealed, "ecdsa-p256"}, {open, "ed25519"}} {
			read := must(t, "read")(root.read("transit/keys/" + tc.name))
			want, err := pubkeytest.Parse(tc.typ, "", text(read["keys"].(map[string]any)["1"], "public_key"))
			if err != nil {
				t.Fatal(err)
			}
			exp := must(t, "export public-key")(reader.read("transit/export/public-key/" + tc.name + "/1"))
			got, err := pubkeytest.Parse(tc.typ, "", exportedKey(exp, "1"))
			if err != nil || exp["type"] != tc.typ || exp["name"] != tc.name || !want.(interface{ Equal(crypto.PublicKey) bool }).Equal(got) {
				t.Errorf("public-key of %s = %v (%v), want the public key read", tc.name, exp, err)
			}
		}

		pubText := text(must(t, "read")(root.read("transit/keys/" + open))["keys"].(map[string]any)["1"], "public_key")
		pub, _ := pubkeytest.Parse("ed25519", "", pubText)
		sk := must(t, "export signing-key")(exporter.read("transit/export/signing-key/" + open))
		raw, err := base64.StdEncoding.DecodeString(exportedKey(sk, "1"))
		if err != nil || len(raw) != ed25519.PrivateKeySize {
			t.Fatalf("signing-key of an ed25519 key = %v, want base64 of %d bytes", sk, ed25519.PrivateKeySize)
		}
		priv := ed25519.PrivateKey(raw)
		if msg := []byte("signed offline"); !priv.Public().(ed25519.PublicKey).Equal(pub) || !ed25519.Verify(pub.(ed25519.PublicKey), msg, ed25519.Sign(priv, msg)) {
			t.Errorf("the exported signing-key is not the private key of the public key read")
		}
		hk := must(t, "export hmac-key")(exporter.read("transit/export/hmac-key/" + mac + "/latest"))
		if raw, err := base64.StdEncoding.DecodeString(exportedKey(hk, "1")); err != nil || len(raw) != 48 || hk["type"] != "hmac" {
			t.Errorf("hmac-key of an hmac key of key_size 48 = %v", hk)
		}
		if hk := must(t, "export hmac-key")(exporter.read("transit/export/hmac-key/" + open)); exportedKey(hk, "1") == "" {
			t.Errorf("hmac-key of an exportable ed25519 key = %v", hk)
		}

		for _, tc := range []struct {
			c      api
			path   string
			status int
			says   string
		}{
			{exporter, "transit/export/signing-key/" + sealed, 400, "not exportable"},
			{exporter, "transit/export/hmac-key/" + sealed, 400, "not exportable"},
			{reader, "transit/export/signing-key/" + open, 403, "keyring." + open + ".export"},
			{reader, "transit/export/hmac-key/" + open, 403, "keyring." + open + ".export"},
			{exporter, "transit/export/encryption-key/" + open, 400, ""},
			{root, "transit/export/public-key/" + mac, 400, "has no public key"},
		} {
			if _, err := tc.c.read(tc.path); !refused(tc.c, err, tc.status, strings.ToLower(tc.says)) {
				status, msgs := tc.c.refusal(err)
				t.Errorf("GET %s = %v (status %d, errors %q), want %d saying %q", tc.path, err, status, msgs, tc.status, tc.says)
			}
		}
	})
}

// text returns the string at key of item, an object of an answer ("" if
// none).
func text(item any, key string) string {
	m, _ := item.(map[string]any)
	s, _ := m[key].(string)
	return s
}

// exportedKey returns version v's key of an export's answer.
func exportedKey(data map[string]any, v string) string {
	return text(data["keys"], v)
}

// TestSignRoutes: HashiCorp's and OpenBao's clients sign, verify and
// compute HMACs through kmsd, single and batch: each signature verifies
// offline with Go's crypto (filippo.io/mldsa for ML-DSA) from the public
// key the key's read answers, and through kmsd; an HMAC is the one the
// exported hmac-key computes; an altered input verifies false, a
// credential without the operation's flag is refused 403.
func TestSignRoutes(t *testing.T) {
	eachClient(t, func(t *testing.T, cl realClient, in *harness.Instance, p *kmsdtest.Proc) {
		c := cl.make(t, p, in.Bootstrap)
		msg := []byte("artifact digest list")
		input := base64.StdEncoding.EncodeToString(msg)
		for _, typ := range []string{"ed25519", "ecdsa-p256", "ml-dsa"} {
			name := cl.key + "-" + strings.ReplaceAll(typ, "-", "")
			must(t, "create "+typ)(c.write("transit/keys/"+name, map[string]any{"type": typ}))
			read := must(t, "read "+typ)(c.read("transit/keys/" + name))
			v1, _ := read["keys"].(map[string]any)["1"].(map[string]any)
			pub, _ := v1["public_key"].(string)

			signed := must(t, "sign "+typ)(c.write("transit/sign/"+name, map[string]any{"input": input}))
			sigText, _ := signed["signature"].(string)
			raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sigText, "vault:v1:"))
			if err != nil || !strings.HasPrefix(sigText, "vault:v1:") {
				t.Fatalf("%s: signature %q", typ, sigText)
			}
			if pk, err := pubkeytest.Parse(typ, "", pub); err != nil || !pubkeytest.Verify(pk, msg, raw) {
				t.Errorf("%s: the signature does not verify offline with the read's public key", typ)
			}
			ok := must(t, "verify "+typ)(c.write("transit/verify/"+name, map[string]any{"input": input, "signature": sigText}))
			bad := must(t, "verify "+typ)(c.write("transit/verify/"+name, map[string]any{"input": base64.StdEncoding.EncodeToString([]byte("x")), "signature": sigText}))
			if ok["valid"] != true || bad["valid"] != false {
				t.Errorf("%s: verify = %v, of another input %v", typ, ok, bad)
			}

			batch := must(t, "batch sign "+typ)(c.write("transit/sign/"+name, map[string]any{"batch_input": []any{
				map[string]any{"input": input, "reference": "a"}, map[string]any{"input": input, "reference": "b"}}}))
			results := batchResults(t, batch, 2)
			checks := []any{}
			for _, r := range results {
				checks = append(checks, map[string]any{"input": input, "signature": r["signature"]})
			}
			verified := batchResults(t, must(t, "batch verify "+typ)(c.write("transit/verify/"+name, map[string]any{"batch_input": checks})), 2)
			if results[1]["reference"] != "b" || verified[0]["valid"] != true || verified[1]["valid"] != true {
				t.Errorf("%s: batch sign %v, verify %v", typ, results, verified)
			}
		}

		// HMAC with an exportable hmac key: the exported key computes it.
		name := cl.key + "-mac"
		must(t, "create hmac")(c.write("transit/keys/"+name, map[string]any{"type": "hmac", "exportable": true}))
		mac, _ := must(t, "hmac")(c.write("transit/hmac/"+name, map[string]any{"input": input}))["hmac"].(string)
		exported := must(t, "export hmac-key")(c.read("transit/export/hmac-key/" + name + "/1"))
		key, _ := base64.StdEncoding.DecodeString(exported["keys"].(map[string]any)["1"].(string))
		h := hmac.New(sha256.New, key)
		h.Write(msg)
		if want := "vault:v1:" + base64.StdEncoding.EncodeToString(h.Sum(nil)); mac != want {
			t.Errorf("hmac = %s, want %s", mac, want)
		}
		if ok := must(t, "verify hmac")(c.write("transit/verify/"+name, map[string]any{"input": input, "hmac": mac})); ok["valid"] != true {
			t.Errorf("verify of the hmac = %v", ok)
		}

		// Each operation its own flag.
		signer := cl.make(t, p, in.APIKey(t, p, "keyring."+cl.key+"-ed25519.sign"))
		if _, err := signer.write("transit/verify/"+cl.key+"-ed25519", map[string]any{"input": input, "signature": "vault:v1:AAAA"}); !refused(signer, err, 403, "keyring."+cl.key+"-ed25519.verify") {
			t.Errorf("verify with keyring.<name>.sign only = %v, want 403", err)
		}
		if _, err := signer.write("transit/hmac/"+cl.key+"-ed25519", map[string]any{"input": input}); !refused(signer, err, 403, "keyring."+cl.key+"-ed25519.hmac") {
			t.Errorf("hmac with keyring.<name>.sign only = %v, want 403", err)
		}
	})
}
