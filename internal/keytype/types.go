package keytype

import (
	"slices"

	"filippo.io/mldsa"
)

// Type is a key type, named as Vault's transit names it.
type Type string

// The key types.
const (
	AES256GCM96      Type = "aes256-gcm96"      // AES-256-GCM, 96-bit nonce: encrypts (the default)
	ChaCha20Poly1305 Type = "chacha20-poly1305" // ChaCha20-Poly1305 (RFC 8439): encrypts
	HMAC             Type = "hmac"              // an HMAC key and nothing else
	Ed25519          Type = "ed25519"           // Ed25519 (RFC 8032): signs
	ECDSAP256        Type = "ecdsa-p256"        // ECDSA on P-256: signs
	ECDSAP384        Type = "ecdsa-p384"        // ECDSA on P-384: signs
	RSA2048          Type = "rsa-2048"          // RSA, 2048-bit modulus: signs
	RSA3072          Type = "rsa-3072"          // RSA, 3072-bit modulus: signs
	RSA4096          Type = "rsa-4096"          // RSA, 4096-bit modulus: signs
	MLDSA            Type = "ml-dsa"            // ML-DSA of FIPS 204, pure, empty context: signs
)

// Default is the type of a key made without one, as Vault's.
const Default = AES256GCM96

// types lists the types in the order errors name them.
var types = []Type{AES256GCM96, ChaCha20Poly1305, HMAC, Ed25519, ECDSAP256, ECDSAP384, RSA2048, RSA3072, RSA4096, MLDSA}

// Types returns every key type.
func Types() []Type { return slices.Clone(types) }

// Parse returns the type named s; "" is Default, as Vault's type field
// defaults. An unknown name is ErrParameter, with the accepted names.
func Parse(s string) (Type, error) {
	if s == "" {
		return Default, nil
	}
	t := Type(s)
	if !t.valid() {
		return "", errorf(ErrParameter, "unknown key type %s; the key types are %s", quoted(s), names(types))
	}
	return t, nil
}

func (t Type) valid() bool { return slices.Contains(types, t) }

// String returns the type's name.
func (t Type) String() string { return string(t) }

// Encrypts reports whether keys of the type encrypt and decrypt (the AEAD
// types).
func (t Type) Encrypts() bool { return t == AES256GCM96 || t == ChaCha20Poly1305 }

// Signs reports whether keys of the type sign and verify.
func (t Type) Signs() bool { return t.Asymmetric() }

// Asymmetric reports whether keys of the type have a public key.
func (t Type) Asymmetric() bool {
	switch t {
	case Ed25519, ECDSAP256, ECDSAP384, RSA2048, RSA3072, RSA4096, MLDSA:
		return true
	}
	return false
}

// HMACOnly reports whether keys of the type do nothing but HMAC.
func (t Type) HMACOnly() bool { return t == HMAC }

// ecdsa and rsa group the types that share an algorithm.
func (t Type) ecdsa() bool { return t == ECDSAP256 || t == ECDSAP384 }
func (t Type) rsa() bool   { return t == RSA2048 || t == RSA3072 || t == RSA4096 }

// rsaBits is the modulus size of an RSA type.
func (t Type) rsaBits() int {
	switch t {
	case RSA3072:
		return 3072
	case RSA4096:
		return 4096
	}
	return 2048
}

// HMAC key sizes, in bytes, as Vault bounds its hmac keys' key_size.
const (
	DefaultHMACKeySize = 32
	MinHMACKeySize     = 32
	MaxHMACKeySize     = 512
)

// ParameterSet is an ML-DSA parameter set of FIPS 204, as Vault's
// parameter_set names it.
type ParameterSet string

// The ML-DSA parameter sets.
const (
	MLDSA44 ParameterSet = "44"
	MLDSA65 ParameterSet = "65" // the default
	MLDSA87 ParameterSet = "87"
)

var parameterSets = []ParameterSet{MLDSA44, MLDSA65, MLDSA87}

// params returns the mldsa parameters of p, which must be valid.
func (p ParameterSet) params() mldsa.Parameters {
	switch p {
	case MLDSA44:
		return mldsa.MLDSA44()
	case MLDSA87:
		return mldsa.MLDSA87()
	}
	return mldsa.MLDSA65()
}

// Params are a key type's parameters, as the caller asked for them; the
// zero value asks for the defaults. A parameter that does not apply to
// the type must be left zero.
type Params struct {
	// KeySize is an hmac key's size in bytes, MinHMACKeySize to
	// MaxHMACKeySize; 0 is DefaultHMACKeySize.
	KeySize int
	// ParameterSet is an ml-dsa key's parameter set; "" is MLDSA65.
	ParameterSet ParameterSet
}

// Spec is a key type with its checked parameters. The zero Spec is no
// type at all: every operation on it is ErrParameter.
type Spec struct {
	t      Type
	params Params
}

// NewSpec checks p against t and fills in the defaults. An unknown type,
// a parameter out of range, or one given to a type it does not apply to
// is ErrParameter.
func NewSpec(t Type, p Params) (Spec, error) {
	if !t.valid() {
		return Spec{}, errorf(ErrParameter, "unknown key type %s; the key types are %s", quoted(string(t)), names(types))
	}
	if p.KeySize != 0 && t != HMAC {
		return Spec{}, errorf(ErrParameter, "key_size applies only to hmac keys, not %s", t)
	}
	if p.ParameterSet != "" && t != MLDSA {
		return Spec{}, errorf(ErrParameter, "parameter_set applies only to ml-dsa keys, not %s", t)
	}
	switch t {
	case HMAC:
		if p.KeySize == 0 {
			p.KeySize = DefaultHMACKeySize
		}
		if p.KeySize < MinHMACKeySize || p.KeySize > MaxHMACKeySize {
			return Spec{}, errorf(ErrParameter, "key_size of an hmac key is %d to %d bytes, not %d", MinHMACKeySize, MaxHMACKeySize, p.KeySize)
		}
	case MLDSA:
		if p.ParameterSet == "" {
			p.ParameterSet = MLDSA65
		}
		if !slices.Contains(parameterSets, p.ParameterSet) {
			return Spec{}, errorf(ErrParameter, "unknown parameter_set %s; the parameter sets of ml-dsa are %s", quoted(string(p.ParameterSet)), names(parameterSets))
		}
	}
	return Spec{t: t, params: p}, nil
}

// Type returns the spec's type ("" for the zero Spec).
func (s Spec) Type() Type { return s.t }

// Params returns the spec's parameters with the defaults filled in: what
// the caller records, so that NewSpec gives the same Spec back.
func (s Spec) Params() Params { return s.params }

// check refuses the zero Spec.
func (s Spec) check() error {
	if s.t == "" {
		return errorf(ErrParameter, "no key type")
	}
	return nil
}
