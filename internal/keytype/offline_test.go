package keytype

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strconv"
	"testing"

	"filippo.io/mldsa"
)

// offlinePublic parses the public key a key answers (PublicKey's Key),
// as a client of Vault would: PEM of PKIX for ecdsa and rsa, base64 of
// the raw key for ed25519 and ml-dsa.
func offlinePublic(t testing.TB, k *Key) crypto.PublicKey {
	t.Helper()
	pk, err := k.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	switch k.spec.t {
	case Ed25519:
		b, err := base64.StdEncoding.DecodeString(pk.Key)
		if err != nil || len(b) != ed25519.PublicKeySize {
			t.Fatalf("ed25519 public_key %q: %v", pk.Key, err)
		}
		return ed25519.PublicKey(b)
	case MLDSA:
		b, err := base64.StdEncoding.DecodeString(pk.Key)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := mldsa.NewPublicKey(k.spec.params.ParameterSet.params(), b)
		if err != nil {
			t.Fatal(err)
		}
		return pub
	}
	block, rest := pem.Decode([]byte(pk.Key))
	if block == nil || block.Type != "PUBLIC KEY" || len(rest) != 0 {
		t.Fatalf("public_key is not one PEM PUBLIC KEY: %q", pk.Key)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// offlineVerify checks sig with the standard library (and
// filippo.io/mldsa) alone, following the options as Vault documents
// them, not through the package's Verify.
func offlineVerify(t testing.TB, pub crypto.PublicKey, input, sig []byte, o SignOptions) bool {
	t.Helper()
	h := o.Hash
	if h == "" {
		h = SHA2_256
	}
	ch := cryptoHashes[h]
	digest := input
	if !o.Prehashed && ch != 0 {
		hh := ch.New()
		hh.Write(input)
		digest = hh.Sum(nil)
	}
	switch pub := pub.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(pub, input, sig)
	case *mldsa.PublicKey:
		return mldsa.Verify(pub, input, sig, &mldsa.Options{}) == nil
	case *ecdsa.PublicKey:
		if o.Marshaling != JWS {
			return ecdsa.VerifyASN1(pub, digest, sig)
		}
		w := (pub.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*w {
			t.Fatalf("a JWS signature of %s has %d bytes, want %d", pub.Curve.Params().Name, len(sig), 2*w)
		}
		return ecdsa.Verify(pub, digest, new(big.Int).SetBytes(sig[:w]), new(big.Int).SetBytes(sig[w:]))
	case *rsa.PublicKey:
		if o.Algorithm == PKCS1v15 {
			return rsa.VerifyPKCS1v15(pub, ch, digest, sig) == nil
		}
		// Vault's salt lengths, spelt out: auto signs with the largest.
		salt := pub.Size() - 2 - ch.Size()
		switch o.SaltLength {
		case "", SaltAuto, "AUTO", "0":
		case SaltHash, "-1":
			salt = ch.Size()
		default:
			n, err := strconv.Atoi(string(o.SaltLength))
			if err != nil {
				t.Fatal(err)
			}
			salt = n
		}
		return rsa.VerifyPSS(pub, ch, digest, sig, &rsa.PSSOptions{SaltLength: salt}) == nil
	}
	t.Fatalf("public key of %T", pub)
	return false
}
