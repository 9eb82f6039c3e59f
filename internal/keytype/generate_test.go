package keytype

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"testing"

	"filippo.io/mldsa"
)

// TestGenerateEncoding: the material of each type is what the package
// comment says, and two generations differ.
func TestGenerateEncoding(t *testing.T) {
	for _, s := range specs {
		t.Run(name(s), func(t *testing.T) {
			if s.t.rsa() && s.t != RSA2048 && testing.Short() {
				t.Skip("large RSA keys take long to make")
			}
			m1, err := Generate(s)
			if err != nil {
				t.Fatal(err)
			}
			switch t_ := s.t; {
			case t_.Encrypts():
				if len(m1) != 32 {
					t.Errorf("%d bytes, want 32", len(m1))
				}
			case t_ == HMAC:
				if len(m1) != s.params.KeySize {
					t.Errorf("%d bytes, want %d", len(m1), s.params.KeySize)
				}
			case t_ == MLDSA:
				if len(m1) != mldsa.PrivateKeySize {
					t.Errorf("%d bytes, want %d", len(m1), mldsa.PrivateKeySize)
				}
			default:
				priv, err := x509.ParsePKCS8PrivateKey(m1)
				if err != nil {
					t.Fatalf("not PKCS #8: %v", err)
				}
				if !matches(t_, priv) {
					t.Errorf("PKCS #8 of %T, not a %s key", priv, t_)
				}
			}
			if s.t.rsa() {
				return // one RSA key is enough
			}
			m2, _ := Generate(s)
			if bytes.Equal(m1, m2) {
				t.Error("two generations gave the same material")
			}
		})
	}
}

// TestLoadRefuses: material that does not match its spec is ErrMaterial.
func TestLoadRefuses(t *testing.T) {
	pkcs8 := func(k any) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	_, edPriv, _ := ed25519.GenerateKey(nil)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsa2048 := testKey(t, mustSpec(RSA2048, Params{})).material
	tests := []struct {
		name     string
		spec     Spec
		material []byte
	}{
		{"aes short", mustSpec(AES256GCM96, Params{}), make([]byte, 16)},
		{"aes long", mustSpec(AES256GCM96, Params{}), make([]byte, 64)},
		{"chacha short", mustSpec(ChaCha20Poly1305, Params{}), make([]byte, 31)},
		{"hmac other size", mustSpec(HMAC, Params{KeySize: 64}), make([]byte, 32)},
		{"hmac empty", mustSpec(HMAC, Params{}), nil},
		{"mldsa short", mustSpec(MLDSA, Params{}), make([]byte, 31)},
		{"mldsa expanded", mustSpec(MLDSA, Params{}), make([]byte, 4032)},
		{"ed25519 garbage", mustSpec(Ed25519, Params{}), []byte("not a key")},
		{"ed25519 raw seed", mustSpec(Ed25519, Params{}), edPriv.Seed()},
		{"ed25519 given ecdsa", mustSpec(Ed25519, Params{}), pkcs8(p256)},
		{"p256 given p384", mustSpec(ECDSAP256, Params{}), pkcs8(p384)},
		{"p384 given p256", mustSpec(ECDSAP384, Params{}), pkcs8(p256)},
		{"p256 given ed25519", mustSpec(ECDSAP256, Params{}), pkcs8(edPriv)},
		{"rsa-3072 given rsa-2048", mustSpec(RSA3072, Params{}), rsa2048},
		{"rsa-2048 given p256", mustSpec(RSA2048, Params{}), pkcs8(p256)},
		{"rsa truncated", mustSpec(RSA2048, Params{}), rsa2048[:len(rsa2048)-1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := Load(tt.spec, tt.material)
			wantErr(t, "Load", err, ErrMaterial)
			if k != nil {
				t.Error("Load failed and answered a key")
			}
		})
	}
}

// TestLoadCopies: Load keeps its own copy of the material.
func TestLoadCopies(t *testing.T) {
	s := mustSpec(AES256GCM96, Params{})
	m, _ := Generate(s)
	k, err := Load(s, m)
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := k.Encrypt([]byte("x"), nil)
	clear(m)
	if _, err := k.Decrypt(ct, nil); err != nil {
		t.Fatalf("Decrypt after the caller cleared its material = %v", err)
	}
}

// TestLoadRSAKeyOfOtherSize covers matches for each RSA size.
func TestMatchesRSA(t *testing.T) {
	k := testKey(t, mustSpec(RSA2048, Params{})).signer.(*rsa.PrivateKey)
	for _, ty := range []Type{RSA2048, RSA3072, RSA4096} {
		if got, want := matches(ty, k), ty == RSA2048; got != want {
			t.Errorf("matches(%s, 2048-bit key) = %v, want %v", ty, got, want)
		}
	}
}
