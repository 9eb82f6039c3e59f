package keytype

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	"filippo.io/mldsa"
)

// TestPublicKey: the name and public_key of keys[N], as Vault answers
// them, for every asymmetric type; the symmetric ones have none.
func TestPublicKey(t *testing.T) {
	wantName := map[string]string{
		"ed25519": "ed25519", "ecdsa-p256": "P-256", "ecdsa-p384": "P-384",
		"rsa-2048": "rsa-2048", "rsa-3072": "rsa-3072", "rsa-4096": "rsa-4096",
		"ml-dsa-44": "ML-DSA-44", "ml-dsa-65": "ML-DSA-65", "ml-dsa-87": "ML-DSA-87",
	}
	for _, s := range specs {
		t.Run(name(s), func(t *testing.T) {
			k := testKey(t, s)
			pk, err := k.PublicKey()
			if !s.t.Asymmetric() {
				wantErr(t, "PublicKey", err, ErrWrongType)
				return
			}
			if err != nil || pk.Name != wantName[name(s)] {
				t.Fatalf("PublicKey() = %q, %v; want name %q", pk.Name, err, wantName[name(s)])
			}
			pem := s.t.ecdsa() || s.t.rsa()
			if pem != strings.HasPrefix(pk.Key, "-----BEGIN PUBLIC KEY-----\n") || pem != strings.HasSuffix(pk.Key, "-----END PUBLIC KEY-----\n") {
				t.Errorf("public_key %.40q...: PEM with a final newline for ecdsa and rsa only", pk.Key)
			}
			pub := offlinePublic(t, k)
			if !pub.(interface {
				Equal(crypto.PublicKey) bool
			}).Equal(k.signer.Public()) {
				t.Error("the public key answered is not the key's")
			}
		})
	}
}

// exports is which kinds each type exports.
func exports(t Type) map[ExportKind]bool {
	return map[ExportKind]bool{
		ExportHMACKey:       true,
		ExportEncryptionKey: t.Encrypts() || t.rsa(),
		ExportSigningKey:    t.Signs(),
		ExportPublicKey:     t.Asymmetric(),
	}
}

// TestExport: every kind every type exports decodes, as Vault's export
// encodes it, to the key's own material; the others are ErrWrongType.
func TestExport(t *testing.T) {
	for _, s := range specs {
		t.Run(name(s), func(t *testing.T) {
			k := testKey(t, s)
			for kind, ok := range exports(s.t) {
				got, err := k.Export(kind)
				if !ok {
					wantErr(t, "Export("+string(kind)+")", err, ErrWrongType)
					if got != "" {
						t.Errorf("Export(%s) failed and answered %q", kind, got)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Export(%s) = %v", kind, err)
				}
				checkExport(t, k, kind, got)
			}
			_, err := k.Export("private-key")
			wantErr(t, "Export(private-key)", err, ErrParameter)
		})
	}
}

func checkExport(t *testing.T, k *Key, kind ExportKind, got string) {
	t.Helper()
	ty := k.spec.t
	b64 := func() []byte {
		b, err := base64.StdEncoding.DecodeString(got)
		if err != nil {
			t.Fatalf("Export(%s) is not base64: %v", kind, err)
		}
		return b
	}
	onePEM := func(blockType string, finalNewline bool) []byte {
		if strings.HasSuffix(got, "\n") != finalNewline {
			t.Errorf("Export(%s): final newline %v, want %v (as Vault)", kind, !finalNewline, finalNewline)
		}
		block, rest := pem.Decode([]byte(got))
		if block == nil || block.Type != blockType || len(bytes.TrimSpace(rest)) != 0 {
			t.Fatalf("Export(%s) = %.60q..., want one PEM %s", kind, got, blockType)
		}
		return block.Bytes
	}
	switch {
	case kind == ExportHMACKey:
		if !bytes.Equal(b64(), k.hmacKey) {
			t.Error("hmac-key is not the HMAC key")
		}
		if ty == HMAC && !bytes.Equal(b64(), k.material) {
			t.Error("an hmac key's hmac-key is not the key")
		}
	case kind == ExportPublicKey:
		pk, _ := k.PublicKey()
		want := pk.Key
		if ty.ecdsa() {
			want = strings.TrimSuffix(want, "\n")
		}
		if got != want {
			t.Errorf("public-key = %.60q..., want %.60q...", got, want)
		}
	case ty.Encrypts():
		if !bytes.Equal(b64(), k.material) {
			t.Error("encryption-key is not the key")
		}
	case ty == Ed25519:
		b := b64()
		if !bytes.Equal(b, k.signer.(ed25519.PrivateKey)) || len(b) != 64 {
			t.Error("signing-key is not the 64-byte private key")
		}
	case ty == MLDSA:
		priv, err := mldsa.NewPrivateKey(k.spec.params.ParameterSet.params(), b64())
		if err != nil || !priv.Equal(k.signer) {
			t.Errorf("signing-key is not the seed: %v", err)
		}
	case ty.ecdsa():
		priv, err := x509.ParseECPrivateKey(onePEM("EC PRIVATE KEY", false))
		if err != nil || !priv.Equal(k.signer.(*ecdsa.PrivateKey)) {
			t.Errorf("signing-key is not the SEC 1 private key: %v", err)
		}
	case ty.rsa():
		priv, err := x509.ParsePKCS1PrivateKey(onePEM("RSA PRIVATE KEY", true))
		if err != nil || !priv.Equal(k.signer) {
			t.Errorf("%s is not the PKCS #1 private key: %v", kind, err)
		}
	default:
		t.Fatalf("no check for %s of %s", kind, ty)
	}
}

func TestParseExportKind(t *testing.T) {
	for _, e := range exportKinds {
		if got, err := ParseExportKind(string(e)); got != e || err != nil {
			t.Errorf("ParseExportKind(%q) = %q, %v", e, got, err)
		}
	}
	for _, bad := range []string{"", "certificate-chain", "Public-Key"} {
		_, err := ParseExportKind(bad)
		wantErr(t, "ParseExportKind("+bad+")", err, ErrParameter)
		if err != nil && !strings.Contains(err.Error(), "encryption-key, signing-key, hmac-key, public-key") {
			t.Errorf("ParseExportKind(%q) = %v: want the accepted names", bad, err)
		}
	}
}

// TestPublicKeyName: a type's name field is what its keys' PublicKey
// answers, and none for the symmetric types.
func TestPublicKeyName(t *testing.T) {
	for _, typ := range Types() {
		spec, err := NewSpec(typ, Params{})
		if err != nil {
			t.Fatal(err)
		}
		if !typ.Asymmetric() {
			if got := spec.PublicKeyName(); got != "" {
				t.Errorf("%s: PublicKeyName = %q, want none", typ, got)
			}
			continue
		}
		material, err := Generate(spec)
		if err != nil {
			t.Fatal(err)
		}
		k, err := Load(spec, material)
		if err != nil {
			t.Fatal(err)
		}
		pk, err := k.PublicKey()
		if err != nil || pk.Name != spec.PublicKeyName() || pk.Name == "" {
			t.Errorf("%s: PublicKey().Name = %q (%v), PublicKeyName = %q", typ, pk.Name, err, spec.PublicKeyName())
		}
	}
}
