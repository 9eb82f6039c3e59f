package keytype

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"slices"
	"strings"

	"filippo.io/mldsa"
)

// PublicKey is a key version's public key as Vault answers it in
// keys[N] of a transit key's read.
type PublicKey struct {
	// Name is the key's name field: the curve's (P-256, P-384) for
	// ecdsa, the type's for ed25519 and rsa (ed25519, rsa-2048, ...),
	// and the parameter set's FIPS 204 name for ml-dsa (ML-DSA-65...).
	Name string
	// Key is the public_key field: the PEM of the PKIX public key
	// ("PUBLIC KEY", ending in a newline) for ecdsa and rsa; standard
	// base64 of the raw key (32 bytes for ed25519, FIPS 204's encoding
	// for ml-dsa).
	Key string
}

// PublicKey returns the public key of an asymmetric key; another type is
// ErrWrongType.
func (k *Key) PublicKey() (PublicKey, error) {
	if k.signer == nil {
		return PublicKey{}, errorf(ErrWrongType, "%s keys have no public key", k.spec.t)
	}
	key, err := k.publicKey(false)
	if err != nil {
		return PublicKey{}, err
	}
	return PublicKey{Name: k.publicName(), Key: key}, nil
}

// publicName is the name field of an asymmetric key.
func (k *Key) publicName() string { return k.spec.PublicKeyName() }

// PublicKeyName is the name field (PublicKey.Name) of the public keys of
// an asymmetric type: the curve's for ecdsa (P-256, P-384), the
// parameter set's FIPS 204 name for ml-dsa (ML-DSA-65...), the type's
// own for ed25519 and rsa; empty for the symmetric types.
func (s Spec) PublicKeyName() string {
	switch {
	case !s.t.Asymmetric():
		return ""
	case s.t.ecdsa():
		return curve(s.t).Params().Name
	case s.t == MLDSA:
		return s.params.ParameterSet.params().String()
	}
	return string(s.t)
}

// publicKey encodes the public key of an asymmetric key. Vault trims the
// newline after the PEM of an ECDSA public key in an export, not in
// keys[N]; trimECDSA says which it is.
func (k *Key) publicKey(trimECDSA bool) (string, error) {
	switch pub := k.pub.(type) {
	case ed25519.PublicKey:
		return base64.StdEncoding.EncodeToString(pub), nil
	case *mldsa.PublicKey:
		return base64.StdEncoding.EncodeToString(pub.Bytes()), nil
	}
	der, err := x509.MarshalPKIXPublicKey(k.pub)
	if err != nil {
		return "", err
	}
	return pemText("PUBLIC KEY", der, trimECDSA && k.spec.t.ecdsa()), nil
}

// pemText is the PEM of der, with or without its final newline.
func pemText(blockType string, der []byte, trim bool) string {
	s := string(pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}))
	if trim {
		s = strings.TrimSpace(s)
	}
	return s
}

// ExportKind is what an export answers, as Vault's transit/export/:type
// names it.
type ExportKind string

// The export kinds.
const (
	// ExportEncryptionKey: standard base64 of the key of an AEAD type;
	// for an rsa key, as Vault, its PKCS #1 PEM ("RSA PRIVATE KEY",
	// ending in a newline).
	ExportEncryptionKey ExportKind = "encryption-key"
	// ExportSigningKey: ed25519, standard base64 of the 64-byte private
	// key (seed | public key); ecdsa, the PEM of the SEC 1 private key
	// ("EC PRIVATE KEY", without a final newline); rsa, the PEM of the
	// PKCS #1 private key ("RSA PRIVATE KEY", ending in a newline);
	// ml-dsa, standard base64 of the 32-byte seed (the private key format
	// FIPS 204 and RFC 9881 recommend; its parameter set is the key's).
	ExportSigningKey ExportKind = "signing-key"
	// ExportHMACKey: standard base64 of the version's HMAC key, for every
	// type.
	ExportHMACKey ExportKind = "hmac-key"
	// ExportPublicKey: an asymmetric key's public key as PublicKey's Key,
	// except that Vault trims the newline after an ECDSA key's PEM here.
	ExportPublicKey ExportKind = "public-key"
)

var exportKinds = []ExportKind{ExportEncryptionKey, ExportSigningKey, ExportHMACKey, ExportPublicKey}

// ParseExportKind returns the export kind named s; an unknown one is
// ErrParameter, with the accepted names.
func ParseExportKind(s string) (ExportKind, error) {
	e := ExportKind(s)
	if !slices.Contains(exportKinds, e) {
		return "", errorf(ErrParameter, "unknown export type %s; the export types are %s", quoted(s), names(exportKinds))
	}
	return e, nil
}

// Export answers the key as Vault's transit/export of kind answers it
// (see the kinds). A kind the key's type has not is ErrWrongType; an
// unknown kind, ErrParameter. Whether the key may be exported at all is
// the caller's rule.
func (k *Key) Export(kind ExportKind) (string, error) {
	if _, err := ParseExportKind(string(kind)); err != nil {
		return "", err
	}
	t := k.spec.t
	switch {
	case kind == ExportHMACKey:
		return base64.StdEncoding.EncodeToString(k.hmacKey), nil
	case kind == ExportPublicKey && k.signer != nil:
		return k.publicKey(true)
	case kind == ExportEncryptionKey && t.Encrypts():
		return base64.StdEncoding.EncodeToString(k.material), nil
	case kind == ExportEncryptionKey && t.rsa(), kind == ExportSigningKey && k.signer != nil:
		return k.privateKey()
	}
	return "", errorf(ErrWrongType, "%s keys have no %s to export", t, kind)
}

// privateKey encodes an asymmetric key's private key for export.
func (k *Key) privateKey() (string, error) {
	switch priv := k.signer.(type) {
	case ed25519.PrivateKey:
		return base64.StdEncoding.EncodeToString(priv), nil
	case *mldsa.PrivateKey:
		return base64.StdEncoding.EncodeToString(priv.Bytes()), nil
	case *rsa.PrivateKey:
		return pemText("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(priv), false), nil
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(priv)
		if err != nil {
			return "", err
		}
		return pemText("EC PRIVATE KEY", der, true), nil
	}
	panic("keytype: a signing key of no known kind") // Load makes only the kinds above
}
