package keytype

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/asn1"
	"errors"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"filippo.io/mldsa"
)

// Marshaling is how an ECDSA signature is laid out, as Vault's
// marshaling_algorithm names it.
type Marshaling string

// The marshalings. The zero Marshaling is ASN1.
const (
	// ASN1 is the DER SEQUENCE of r and s (RFC 3279), as OpenSSL and
	// X.509 lay out ECDSA signatures.
	ASN1 Marshaling = "asn1"
	// JWS is r || s, each big-endian and as wide as the curve's order
	// (32 bytes for P-256, 48 for P-384), as JWS (RFC 7518) lays them
	// out. For the other types it changes nothing of the bytes; the text
	// encoding it also implies (URL-safe base64 without padding instead
	// of standard base64) is the protocol's business.
	JWS Marshaling = "jws"
)

var marshalings = []Marshaling{ASN1, JWS}

// SignatureAlgorithm is an RSA signature scheme, as Vault's
// signature_algorithm names it; the other types ignore it.
type SignatureAlgorithm string

// The RSA signature schemes. The zero SignatureAlgorithm is PSS.
const (
	PSS      SignatureAlgorithm = "pss"      // RSASSA-PSS with MGF1 of the same hash (RFC 8017)
	PKCS1v15 SignatureAlgorithm = "pkcs1v15" // RSASSA-PKCS1-v1_5 (RFC 8017)
)

var signatureAlgorithms = []SignatureAlgorithm{PSS, PKCS1v15}

// SaltLength is an RSA-PSS salt length, as Vault's salt_length gives it
// (case-insensitive): "auto" (the zero SaltLength: as long as the key
// allows when signing, whatever the signature has when verifying), "hash"
// (the hash's size), or a number of bytes in decimal, at most the
// modulus's bytes less the hash's size less 2; as in Vault, "0" is "auto"
// and "-1" "hash". Only PSS uses it.
type SaltLength string

// The named salt lengths.
const (
	SaltAuto SaltLength = "auto"
	SaltHash SaltLength = "hash"
)

// SignOptions are a signature's parameters, as Vault's sign and verify
// take them. The zero value is Vault's defaults: sha2-256, input not
// prehashed, asn1, pss, auto salt.
type SignOptions struct {
	// Hash hashes the input for ecdsa and rsa keys (or names the hash
	// of a prehashed input); ed25519 and ml-dsa sign the input itself
	// and ignore it, as Vault does. HashNone: see its comment.
	Hash Hash
	// Prehashed says the input is already a digest of Hash, which ecdsa
	// and rsa keys sign as it is; it must be as long as Hash's digests.
	// ed25519 and ml-dsa refuse it: they sign the message itself, and a
	// digest signed as a message would verify only as that.
	Prehashed bool
	// Marshaling lays out ECDSA signatures.
	Marshaling Marshaling
	// Algorithm is the RSA signature scheme.
	Algorithm SignatureAlgorithm
	// SaltLength is the RSA-PSS salt length.
	SaltLength SaltLength
}

// signing is SignOptions checked against a key, with the digest or
// message to sign.
type signing struct {
	hash    crypto.Hash // 0 for HashNone, ed25519, ml-dsa
	marshal Marshaling
	alg     SignatureAlgorithm
	salt    int // rsa.PSSSaltLengthAuto, rsa.PSSSaltLengthEqualsHash, or bytes
	data    []byte
}

// prepare checks o against the key and hashes input as the options say.
func (k *Key) prepare(op string, o SignOptions, input []byte) (signing, error) {
	t := k.spec.t
	if k.signer == nil {
		return signing{}, errorf(ErrWrongType, "%s keys do not %s; the key types that do are %s", t, op, names(slices.DeleteFunc(Types(), func(t Type) bool { return !t.Signs() })))
	}
	h, ch, err := o.Hash.resolve()
	if err != nil {
		return signing{}, err
	}
	s := signing{hash: ch, marshal: o.Marshaling, alg: o.Algorithm}
	if s.marshal == "" {
		s.marshal = ASN1
	}
	if !slices.Contains(marshalings, s.marshal) {
		return signing{}, errorf(ErrParameter, "unknown marshaling_algorithm %s; the marshaling algorithms are %s", quoted(string(s.marshal)), names(marshalings))
	}
	if s.alg == "" {
		s.alg = PSS
	}
	if !slices.Contains(signatureAlgorithms, s.alg) {
		return signing{}, errorf(ErrParameter, "unknown signature_algorithm %s; the signature algorithms are %s", quoted(string(s.alg)), names(signatureAlgorithms))
	}
	if s.salt, err = parseSalt(o.SaltLength); err != nil {
		return signing{}, err
	}
	if h == HashNone && (!t.rsa() || !o.Prehashed || s.alg != PKCS1v15) {
		return signing{}, errorf(ErrParameter, "hash_algorithm=none requires an rsa key, prehashed=true and signature_algorithm=pkcs1v15")
	}
	switch {
	case t == Ed25519 || t == MLDSA:
		if o.Prehashed {
			return signing{}, errorf(ErrParameter, "%s keys sign the message itself: prehashed input is not supported", t)
		}
		s.hash, s.data = 0, input
	case o.Prehashed:
		if ch != 0 && len(input) != ch.Size() {
			return signing{}, errorf(ErrInput, "prehashed input has %d bytes; a %s digest has %d", len(input), h, ch.Size())
		}
		s.data = input
	default:
		hh := ch.New()
		hh.Write(input)
		s.data = hh.Sum(nil)
	}
	if t.rsa() && s.alg == PSS {
		// As Vault: from the hash's size (-1, rsa.PSSSaltLengthEqualsHash)
		// to the largest the modulus leaves.
		max := (t.rsaBits()+6)/8 - 2 - ch.Size()
		if s.salt < rsa.PSSSaltLengthEqualsHash || s.salt > max {
			return signing{}, errorf(ErrParameter, "salt_length %d is out of range for %s with %s (at most %d)", s.salt, t, h, max)
		}
	}
	return s, nil
}

// parseSalt reads a SaltLength as Vault reads salt_length.
func parseSalt(sl SaltLength) (int, error) {
	switch strings.ToLower(string(sl)) {
	case "", string(SaltAuto):
		return rsa.PSSSaltLengthAuto, nil
	case string(SaltHash):
		return rsa.PSSSaltLengthEqualsHash, nil
	}
	n, err := strconv.Atoi(string(sl))
	if err != nil || n < rsa.PSSSaltLengthEqualsHash {
		return 0, errorf(ErrParameter, "salt_length %s is neither auto, hash, nor a number of bytes", quoted(string(sl)))
	}
	return n, nil
}

// Sign signs input with an asymmetric key as o says, and returns the
// signature's bytes (their base64 and "vault:vN:" prefix are the
// protocol's). ECDSA and ML-DSA signatures are randomized (ML-DSA's
// hedged, FIPS 204's default), RSA-PSS ones salted; Ed25519 and
// PKCS #1 v1.5 ones are deterministic. A symmetric key is ErrWrongType;
// options that do not apply are ErrParameter; a prehashed input of the
// wrong length, or one too long for hash none, is ErrInput.
func (k *Key) Sign(input []byte, o SignOptions) ([]byte, error) {
	s, err := k.prepare("sign", o, input)
	if err != nil {
		return nil, err
	}
	switch priv := k.signer.(type) {
	case ed25519.PrivateKey:
		return ed25519.Sign(priv, s.data), nil
	case *mldsa.PrivateKey:
		return priv.Sign(nil, s.data, nil)
	case *ecdsa.PrivateKey:
		sig, err := ecdsa.SignASN1(rand.Reader, priv, s.data)
		if err != nil || s.marshal == ASN1 {
			return sig, err
		}
		var rs ecdsaSignature
		if _, err := asn1.Unmarshal(sig, &rs); err != nil {
			return nil, err
		}
		w := orderBytes(k.spec.t)
		out := make([]byte, 2*w)
		rs.R.FillBytes(out[:w])
		rs.S.FillBytes(out[w:])
		return out, nil
	case *rsa.PrivateKey:
		var sig []byte
		if s.alg == PSS {
			sig, err = rsa.SignPSS(rand.Reader, priv, s.hash, s.data, &rsa.PSSOptions{SaltLength: s.salt})
		} else {
			sig, err = rsa.SignPKCS1v15(nil, priv, s.hash, s.data)
		}
		if errors.Is(err, rsa.ErrMessageTooLong) {
			return nil, errorf(ErrInput, "prehashed input is too long for %s keys", k.spec.t)
		}
		return sig, err
	}
	panic("keytype: a signing key of no known kind") // Load makes only the kinds above
}

// ecdsaSignature is the ASN.1 layout of an ECDSA signature.
type ecdsaSignature struct{ R, S *big.Int }

// orderBytes is the width of r and s in a JWS signature of an ECDSA type.
func orderBytes(t Type) int { return (curve(t).Params().BitSize + 7) / 8 }

// Verify reports whether sig is input's signature by the key, under the
// same options as Sign. A wrong signature is false with no error; errors
// are for a wrong request only: a symmetric key (ErrWrongType), options
// that do not apply (ErrParameter), a prehashed input of the wrong
// length, or an ASN.1 ECDSA signature that does not decode (ErrInput, as
// Vault answers "supplied signature is invalid").
func (k *Key) Verify(input, sig []byte, o SignOptions) (bool, error) {
	s, err := k.prepare("verify", o, input)
	if err != nil {
		return false, err
	}
	switch pub := k.pub.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(pub, s.data, sig), nil
	case *mldsa.PublicKey:
		return mldsa.Verify(pub, s.data, sig, nil) == nil, nil
	case *ecdsa.PublicKey:
		var rs ecdsaSignature
		if s.marshal == ASN1 {
			rest, err := asn1.Unmarshal(sig, &rs)
			if err != nil || len(rest) != 0 {
				return false, errorf(ErrInput, "supplied signature is invalid: not an ASN.1 ECDSA signature")
			}
		} else {
			w := orderBytes(k.spec.t)
			if len(sig) != 2*w {
				return false, nil
			}
			rs.R = new(big.Int).SetBytes(sig[:w])
			rs.S = new(big.Int).SetBytes(sig[w:])
		}
		return ecdsa.Verify(pub, s.data, rs.R, rs.S), nil
	case *rsa.PublicKey:
		if s.alg == PSS {
			return rsa.VerifyPSS(pub, s.hash, s.data, sig, &rsa.PSSOptions{SaltLength: s.salt}) == nil, nil
		}
		return rsa.VerifyPKCS1v15(pub, s.hash, s.data, sig) == nil, nil
	}
	panic("keytype: a signing key of no known kind") // Load makes only the kinds above
}
