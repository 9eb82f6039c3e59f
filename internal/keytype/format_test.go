package keytype

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/docblock"
)

// TestFormatExampleHeldKeys checks the worked example of docs/FORMAT.md
// section 12.1 byte for byte, so the document and the code cannot drift.
func TestFormatExampleHeldKeys(t *testing.T) {
	block := docblock.Fenced(t, "docs/FORMAT.md", "json format-example-held-keys")
	var ex map[string]string
	if err := json.Unmarshal([]byte(block), &ex); err != nil {
		t.Fatal(err)
	}
	unhex := func(name string) []byte {
		b, err := hex.DecodeString(ex[name])
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %q is not hex: %v", name, ex[name], err)
		}
		return b
	}
	unb64 := func(name string) []byte {
		b, err := base64.StdEncoding.DecodeString(ex[name])
		if err != nil || len(b) == 0 {
			t.Fatalf("%s is not base64: %v", name, err)
		}
		return b
	}
	key, nonce := unhex("key"), unhex("nonce")
	ad, input := []byte(ex["associatedData"]), []byte(ex["input"])

	for _, ty := range []Type{AES256GCM96, ChaCha20Poly1305} {
		k, err := Load(mustSpec(ty, Params{}), key)
		if err != nil {
			t.Fatal(err)
		}
		want := unhex(string(ty))
		if got := k.aead.Seal(bytes.Clone(nonce), nonce, input, ad); !bytes.Equal(got, want) {
			t.Errorf("%s with the example's nonce = %x, want %x", ty, got, want)
		}
		if got, err := k.Decrypt(want, ad); err != nil || !bytes.Equal(got, input) {
			t.Errorf("%s: Decrypt(example) = %q, %v", ty, got, err)
		}
	}

	hk, _ := Load(mustSpec(HMAC, Params{}), key)
	if got, _ := hk.HMAC("", input); !bytes.Equal(got, unhex("hmacSHA256")) {
		t.Errorf("hmac = %x, want %s", got, ex["hmacSHA256"])
	}

	ed, err := Load(mustSpec(Ed25519, Params{}), unb64("ed25519Material"))
	if err != nil {
		t.Fatal(err)
	}
	if pk, _ := ed.PublicKey(); pk.Key != ex["ed25519PublicKey"] || pk.Name != "ed25519" {
		t.Errorf("ed25519 public key = %+v, want %s", pk, ex["ed25519PublicKey"])
	}
	if sig, _ := ed.Sign(input, SignOptions{}); !bytes.Equal(sig, unhex("ed25519Signature")) {
		t.Errorf("ed25519 signature = %x, want %s", sig, ex["ed25519Signature"])
	}
	if got, _ := ed.Export(ExportHMACKey); got != base64.StdEncoding.EncodeToString(unhex("ed25519HMACKey")) {
		t.Errorf("ed25519 hmac-key = %s, want base64 of %s", got, ex["ed25519HMACKey"])
	}
	if got, _ := ed.HMAC(SHA2_256, input); !bytes.Equal(got, unhex("ed25519HMACSHA256")) {
		t.Errorf("ed25519 HMAC = %x, want %s", got, ex["ed25519HMACSHA256"])
	}

	ec, err := Load(mustSpec(ECDSAP256, Params{}), unb64("ecdsaP256Material"))
	if err != nil {
		t.Fatal(err)
	}
	if pk, _ := ec.PublicKey(); pk.Key != ex["ecdsaP256PublicKey"] || pk.Name != "P-256" {
		t.Errorf("ecdsa-p256 public key = %+v, want %q", pk, ex["ecdsaP256PublicKey"])
	}
	if got, _ := ec.Export(ExportPublicKey); got != strings.TrimSuffix(ex["ecdsaP256PublicKey"], "\n") {
		t.Errorf("ecdsa-p256 public-key export = %q", got)
	}
	if got, _ := ec.Export(ExportSigningKey); got != ex["ecdsaP256SigningKey"] {
		t.Errorf("ecdsa-p256 signing-key = %q, want %q", got, ex["ecdsaP256SigningKey"])
	}
	if ok, err := ec.Verify(input, unhex("ecdsaP256SignatureJWS"), SignOptions{Marshaling: JWS}); !ok || err != nil {
		t.Errorf("ecdsa-p256 example signature: Verify = %v, %v", ok, err)
	}

	ml, err := Load(mustSpec(MLDSA, Params{ParameterSet: MLDSA65}), key)
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := ml.PublicKey()
	raw, _ := base64.StdEncoding.DecodeString(pk.Key)
	if sum := sha256.Sum256(raw); pk.Name != ex["mldsaName"] || !bytes.Equal(sum[:], unhex("mldsaPublicKeySHA256")) {
		t.Errorf("ml-dsa public key %s, SHA-256 %x; want %s, %s", pk.Name, sum, ex["mldsaName"], ex["mldsaPublicKeySHA256"])
	}
	if got, _ := ml.Export(ExportSigningKey); got != base64.StdEncoding.EncodeToString(key) {
		t.Errorf("ml-dsa signing-key = %s, want base64 of the seed", got)
	}
}
