package transit_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pubkeytest"
)

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
