package keytype

import (
	"crypto"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"

	"filippo.io/mldsa"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/ringkms/kms/internal/vaultct"
)

// aeadKeySize is the key size of both AEAD types.
const aeadKeySize = 32

// Generate makes the material of a new key version of spec, in the
// encoding the package comment gives: the caller seals and stores it, and
// hands it back to Load.
func Generate(spec Spec) ([]byte, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	switch t := spec.t; {
	case t.Encrypts():
		return randomBytes(aeadKeySize), nil
	case t == HMAC:
		return randomBytes(spec.params.KeySize), nil
	case t == MLDSA:
		return randomBytes(mldsa.PrivateKeySize), nil
	}
	var priv crypto.Signer
	var err error
	switch t := spec.t; {
	case t == Ed25519:
		_, priv, err = ed25519.GenerateKey(nil)
	case t.ecdsa():
		priv, err = ecdsa.GenerateKey(curve(t), rand.Reader)
	case t.rsa():
		priv, err = rsa.GenerateKey(rand.Reader, t.rsaBits())
	}
	if err != nil {
		return nil, err
	}
	return x509.MarshalPKCS8PrivateKey(priv)
}

// randomBytes returns n bytes of crypto/rand, which never fails.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// curve is the curve of an ECDSA type.
func curve(t Type) elliptic.Curve {
	if t == ECDSAP384 {
		return elliptic.P384()
	}
	return elliptic.P256()
}

// Key is a loaded key version: its material parsed once, for the
// operations of its type. It is safe for concurrent use.
type Key struct {
	spec     Spec
	material []byte        // as stored; the HMAC key derives from it
	aead     cipher.AEAD   // AEAD types
	hmacKey  []byte        // every type
	signer   crypto.Signer // asymmetric types
	pub      crypto.PublicKey
}

// Load parses material (as Generate made it) under spec. Material that
// does not match its spec (length, algorithm, curve, modulus) is
// ErrMaterial. Load keeps its own copy of material.
func Load(spec Spec, material []byte) (*Key, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	k := &Key{spec: spec, material: append([]byte(nil), material...)}
	t := spec.t
	switch {
	case t.Encrypts():
		if len(material) != aeadKeySize {
			return nil, errorf(ErrMaterial, "%s key material has %d bytes; it must have %d", t, len(material), aeadKeySize)
		}
		var err error
		if t == AES256GCM96 {
			k.aead, err = vaultct.NewAEAD(k.material)
		} else {
			k.aead, err = chacha20poly1305.New(k.material)
		}
		if err != nil {
			return nil, errorf(ErrMaterial, "%s key: %v", t, err)
		}
	case t == HMAC:
		if len(material) != spec.params.KeySize {
			return nil, errorf(ErrMaterial, "hmac key material has %d bytes; its key_size is %d", len(material), spec.params.KeySize)
		}
	case t == MLDSA:
		priv, err := mldsa.NewPrivateKey(spec.params.ParameterSet.params(), k.material)
		if err != nil {
			return nil, errorf(ErrMaterial, "ml-dsa key material has %d bytes; a seed has %d", len(material), mldsa.PrivateKeySize)
		}
		k.signer = priv
	default:
		priv, err := x509.ParsePKCS8PrivateKey(k.material)
		if err != nil {
			return nil, errorf(ErrMaterial, "%s key material is not a PKCS #8 private key", t)
		}
		if !matches(t, priv) {
			return nil, errorf(ErrMaterial, "%s key material is a PKCS #8 key of another algorithm, curve or size", t)
		}
		k.signer = priv.(crypto.Signer)
	}
	if k.signer != nil {
		k.pub = k.signer.Public() // made once: ML-DSA's copies its key
	}
	k.hmacKey = hmacKey(t, k.material)
	return k, nil
}

// matches reports whether priv, parsed from PKCS #8, is a key of type t.
func matches(t Type, priv any) bool {
	switch p := priv.(type) {
	case ed25519.PrivateKey:
		return t == Ed25519
	case *ecdsa.PrivateKey:
		return t.ecdsa() && p.Curve == curve(t)
	case *rsa.PrivateKey:
		return t.rsa() && p.N.BitLen() == t.rsaBits()
	}
	return false
}

// Spec returns the key's spec.
func (k *Key) Spec() Spec { return k.spec }

// Type returns the key's type.
func (k *Key) Type() Type { return k.spec.t }
