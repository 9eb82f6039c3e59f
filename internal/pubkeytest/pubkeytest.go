// Package pubkeytest reads, for tests, the public key of a held key's
// version as the service answers it (PEM of the PKIX key for ecdsa and
// rsa, base64 of the raw key for ed25519 and ml-dsa, as Vault's transit
// engine writes them), with Go's crypto alone and filippo.io/mldsa, apart
// from the code that wrote it, and checks signatures with it offline.
package pubkeytest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"

	"filippo.io/mldsa"
)

// MLDSAParams are ML-DSA's parameter sets by the names the service
// gives them ("44", "65", "87"); "" is the default, 65.
var MLDSAParams = map[string]mldsa.Parameters{"": mldsa.MLDSA65(), "44": mldsa.MLDSA44(), "65": mldsa.MLDSA65(), "87": mldsa.MLDSA87()}

// Parse reads text, the public key of a key of type typ (ed25519,
// ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096, ml-dsa with
// parameter set paramSet), and checks that it is a key of that type: the
// curve, the modulus's size, the parameter set.
func Parse(typ, paramSet, text string) (crypto.PublicKey, error) {
	if strings.HasPrefix(typ, "ecdsa") || strings.HasPrefix(typ, "rsa") {
		block, _ := pem.Decode([]byte(text))
		if block == nil || block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("%q is no PEM of a PUBLIC KEY", text)
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		switch k := k.(type) {
		case *ecdsa.PublicKey:
			if curve := map[string]elliptic.Curve{"ecdsa-p256": elliptic.P256(), "ecdsa-p384": elliptic.P384()}[typ]; k.Curve != curve {
				return nil, fmt.Errorf("an ecdsa key on %s, want %s", k.Curve.Params().Name, typ)
			}
		case *rsa.PublicKey:
			if got := fmt.Sprintf("rsa-%d", k.N.BitLen()); got != typ {
				return nil, fmt.Errorf("an %s key, want %s", got, typ)
			}
		default:
			return nil, fmt.Errorf("a %T, want %s", k, typ)
		}
		return k, nil
	}
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ed25519":
		if len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%d bytes, want %d", len(raw), ed25519.PublicKeySize)
		}
		return ed25519.PublicKey(raw), nil
	case "ml-dsa":
		params, ok := MLDSAParams[paramSet]
		if !ok {
			return nil, fmt.Errorf("no ML-DSA parameter set %q", paramSet)
		}
		return mldsa.NewPublicKey(params, raw)
	}
	return nil, fmt.Errorf("%s keys have no public key", typ)
}

// Verify reports whether sig is a signature of msg under pub as the
// service signs by default: Ed25519 and ML-DSA (empty context) of msg
// itself, ECDSA in ASN.1 and RSA with PSS of msg's SHA-256.
func Verify(pub crypto.PublicKey, msg, sig []byte) bool {
	digest := sha256.Sum256(msg)
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(k, msg, sig)
	case *mldsa.PublicKey:
		return mldsa.Verify(k, msg, sig, nil) == nil
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(k, digest[:], sig)
	case *rsa.PublicKey:
		return rsa.VerifyPSS(k, crypto.SHA256, digest[:], sig, nil) == nil
	}
	return false
}
