package transit_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/kms/hashivault"
	"github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/pubkeytest"
)

// TestSigstore: sigstore's Vault signer (pkg/signature/kms/hashivault),
// on a reference hashivault://<name> against the real kmsd -transit, for
// an ecdsa-p256, an ed25519 and an rsa-2048 key: CreateKey makes the key
// and answers its public key, equal to PublicKey's and to the key's read;
// SignMessage signs through kmsd, and Go's crypto verifies the signature
// offline with that public key (ECDSA ASN.1 over SHA-256, Ed25519 over
// the message itself, RSASSA-PKCS1-v1_5 over SHA-256, which sigstore
// asks for); VerifySignature through kmsd, with a credential that may
// only read and verify, accepts it and refuses it over another message,
// and that credential's SignMessage is refused 403; sigstore's ed25519
// signer with SHA-512, which asks for a prehashed (Ed25519ph) signature,
// is refused 400 rather than answered a signature of the digest as a
// message. sigstore's RSA verification sends no signature_algorithm, so
// kmsd verifies with Vault's default, PSS: the PKCS#1 v1.5 signature it
// signed is not valid there (as Vault answers it), while verify with
// signature_algorithm pkcs1v15 accepts it and a PSS signature of kmsd's
// default verifies through sigstore. The signer is configured through VAULT_ADDR,
// VAULT_TOKEN and TRANSIT_SECRET_ENGINE_PATH, the verifier through
// sigstore's options.
func TestSigstore(t *testing.T) {
	in := harness.New(t)
	p := in.Start(t, "-transit")
	root := vaultAPI{vaultClient(t, p, in.Bootstrap)}
	msg := []byte("an artifact to sign")
	digest := sha256.Sum256(msg)
	for _, tc := range []struct {
		typ  string
		hash crypto.Hash // sigstore's hash function: none for ed25519, which signs the message itself
	}{{"ecdsa-p256", crypto.SHA256}, {"ed25519", 0}, {"rsa-2048", crypto.SHA256}} {
		t.Run(tc.typ, func(t *testing.T) {
			name := "sigstore-" + strings.ReplaceAll(tc.typ, "-", "")
			flag := "keyring." + name + "."
			ref := hashivault.ReferenceScheme + name
			sigstoreEnv(t, "VAULT_ADDR="+p.URL, "VAULT_TOKEN="+in.APIKey(t, p, flag+"create", flag+"read", flag+"sign"),
				"TRANSIT_SECRET_ENGINE_PATH=transit")
			signer := loadSigstore(t, ref, tc.hash)
			verifier := loadSigstore(t, ref, tc.hash, options.WithRPCAuthOpts(options.RPCAuth{
				Address: p.URL, Token: in.APIKey(t, p, flag+"read", flag+"verify"), Path: "transit"}))

			created, err := signer.CreateKey(context.Background(), tc.typ)
			if err != nil {
				t.Fatalf("CreateKey(%s) = %v", tc.typ, err)
			}
			read, err := pubkeytest.Parse(tc.typ, "", text(must(t, "read")(root.read("transit/keys/" + name))["keys"].(map[string]any)["1"], "public_key"))
			if err != nil {
				t.Fatal(err)
			}
			pub, err := verifier.PublicKey()
			if err != nil || !read.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) ||
				!read.(interface{ Equal(crypto.PublicKey) bool }).Equal(created) {
				t.Fatalf("PublicKey = %v, %v and CreateKey's %v; want both the read's %v", pub, err, created, read)
			}

			sig, err := signer.SignMessage(bytes.NewReader(msg))
			if err != nil {
				t.Fatalf("SignMessage = %v", err)
			}
			var offline error
			switch k := pub.(type) {
			case *ecdsa.PublicKey:
				if !ecdsa.VerifyASN1(k, digest[:], sig) {
					offline = errInvalid
				}
			case ed25519.PublicKey:
				if !ed25519.Verify(k, msg, sig) {
					offline = errInvalid
				}
			case *rsa.PublicKey:
				offline = rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig)
				if rsa.VerifyPSS(k, crypto.SHA256, digest[:], sig, nil) == nil {
					t.Errorf("sigstore's RSA signature verifies as PSS; it asks for PKCS#1 v1.5")
				}
			}
			if offline != nil {
				t.Errorf("Go's crypto does not verify the signature %x of %s offline: %v", sig, tc.typ, offline)
			}

			verified := verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg))
			if _, ok := pub.(*rsa.PublicKey); ok {
				rsaDefaultPSS(t, root, verifier, name, sig, digest[:], msg, verified)
			} else if verified != nil {
				t.Errorf("VerifySignature through kmsd = %v, want nil", verified)
			}
			if err := verifier.VerifySignature(bytes.NewReader(sig), strings.NewReader("another artifact")); err == nil ||
				!strings.Contains(err.Error(), "failed vault verification") {
				t.Errorf("VerifySignature over another message = %v, want kmsd's valid: false", err)
			}
			if _, err := verifier.SignMessage(bytes.NewReader(msg)); !refused(root, err, 403, flag+"sign") {
				t.Errorf("SignMessage with a credential that may only read and verify = %v, want 403 naming %ssign", err, flag)
			}
			if tc.typ == "ed25519" {
				// With SHA-512 sigstore asks for Ed25519ph (prehashed):
				// refused, as Vault's community edition refuses it.
				if _, err := loadSigstore(t, ref, crypto.SHA512).SignMessage(bytes.NewReader(msg)); !refused(root, err, 400, "prehashed") {
					t.Errorf("SignMessage of an ed25519 key with SHA-512 = %v, want 400 naming prehashed", err)
				}
			}
		})
	}
	p.Stop(t)
	in.VerifyAudit(t)
}

// rsaDefaultPSS checks the RSA key name's verification as Vault does
// it: sigstore's VerifySignature of sig, its PKCS#1 v1.5 signature of
// msg, sends no signature_algorithm and kmsd verifies PSS, Vault's
// default, so that verified is kmsd's valid: false; verify with
// signature_algorithm pkcs1v15 accepts sig, and a signature of the
// digest with kmsd's default (PSS) verifies through sigstore.
func rsaDefaultPSS(t *testing.T, root api, verifier *hashivault.SignerVerifier, name string, sig, digest, msg []byte, verified error) {
	t.Helper()
	if verified == nil || !strings.Contains(verified.Error(), "failed vault verification") {
		t.Errorf("VerifySignature of a PKCS#1 v1.5 signature, sent without signature_algorithm = %v; want valid: false, as Vault verifies PSS by default", verified)
	}
	input := base64.StdEncoding.EncodeToString(digest)
	v := must(t, "verify pkcs1v15")(root.write("transit/verify/"+name+"/sha2-256", map[string]any{"input": input, "prehashed": true,
		"signature_algorithm": "pkcs1v15", "signature": "vault:v1:" + base64.StdEncoding.EncodeToString(sig)}))
	if v["valid"] != true {
		t.Errorf("verify of sigstore's signature with signature_algorithm pkcs1v15 = %v, want valid", v)
	}
	pss, _ := must(t, "sign")(root.write("transit/sign/"+name+"/sha2-256", map[string]any{"input": input, "prehashed": true}))["signature"].(string)
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(pss, "vault:v1:"))
	if err != nil {
		t.Fatalf("signature %q: %v", pss, err)
	}
	if err := verifier.VerifySignature(bytes.NewReader(raw), bytes.NewReader(msg)); err != nil {
		t.Errorf("VerifySignature of kmsd's default (PSS) signature = %v, want nil", err)
	}
}

// errInvalid is an offline verification's failure.
var errInvalid = errors.New("the signature is not valid")

// sigstoreEnv sets, for the test, the variables of kv (NAME=value), and
// empties the other variables sigstore's signer and Vault's client read
// (VAULT_*, BAO_*, TRANSIT_SECRET_ENGINE_PATH), so that the machine's do
// not count.
func sigstoreEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, e := range os.Environ() {
		if k, _, _ := strings.Cut(e, "="); strings.HasPrefix(k, "VAULT_") || strings.HasPrefix(k, "BAO_") || k == "TRANSIT_SECRET_ENGINE_PATH" {
			t.Setenv(k, "")
		}
	}
	for _, e := range kv {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
}

// loadSigstore loads sigstore's Vault SignerVerifier of ref with hash.
func loadSigstore(t *testing.T, ref string, hash crypto.Hash, opts ...signature.RPCOption) *hashivault.SignerVerifier {
	t.Helper()
	sv, err := hashivault.LoadSignerVerifier(ref, hash, opts...)
	if err != nil {
		t.Fatalf("LoadSignerVerifier(%s) = %v", ref, err)
	}
	return sv
}
