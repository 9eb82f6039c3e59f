// Package wrap encrypts key material for a ring's public key, and parses
// and encodes the public and private keys of rings.
//
// Three schemes exist; docs/FORMAT.md describes each bit for bit:
//
//   - hpke-xwing: HPKE (RFC 9180) base mode, KEM MLKEM768-X25519 (X-Wing,
//     0x647a), KDF HKDF-SHA256, AEAD AES-256-GCM. The default.
//   - hpke-x25519: HPKE base mode, KEM DHKEM(X25519, HKDF-SHA256) (0x0020),
//     KDF HKDF-SHA256, AEAD AES-256-GCM.
//   - rsa-oaep-sha256: RSAES-OAEP with SHA-256 for hash and MGF1, for
//     caller-supplied RSA keys of 2048 to 8192 bits.
package wrap

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Scheme names a wrapping scheme. Its value is the keyData "encoding".
type Scheme string

const (
	XWing   Scheme = "hpke-xwing"
	X25519  Scheme = "hpke-x25519"
	RSAOAEP Scheme = "rsa-oaep-sha256"
)

// Sizes of the raw public keys of the HPKE schemes.
const (
	x25519PublicSize = 32
	xwingPublicSize  = 1216
	minRSABits       = 2048
	maxRSABits       = 8192
)

func (s Scheme) kem() hpke.KEM {
	switch s {
	case XWing:
		return hpke.MLKEM768X25519()
	case X25519:
		return hpke.DHKEM(ecdh.X25519())
	}
	return nil
}

// ParseScheme returns the HPKE scheme named by s ("xwing" or "x25519", with
// or without the "hpke-" prefix; empty means the default, X-Wing).
func ParseScheme(s string) (Scheme, error) {
	switch strings.ToLower(strings.TrimPrefix(strings.ToLower(s), "hpke-")) {
	case "", "xwing", "x-wing", "mlkem768x25519":
		return XWing, nil
	case "x25519":
		return X25519, nil
	}
	return "", fmt.Errorf("unknown key encapsulation %q: use xwing or x25519", s)
}

// PublicKey is a ring's public key in one of the three schemes.
type PublicKey struct {
	scheme Scheme
	hpke   hpke.PublicKey
	rsa    *rsa.PublicKey
}

// ParsePublicKey parses a caller-supplied public key. It accepts:
//   - standard base64 of a raw 32-byte X25519 public key (hpke-x25519);
//   - standard base64 of a raw 1216-byte X-Wing public key (hpke-xwing);
//   - a PEM "PUBLIC KEY" block (X.509 SubjectPublicKeyInfo) holding an
//     X25519 key (hpke-x25519) or an RSA key of 2048 to 8192 bits
//     (rsa-oaep-sha256).
func ParsePublicKey(text string) (*PublicKey, error) {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "-----BEGIN") {
		block, rest := pem.Decode([]byte(text))
		if block == nil || len(bytes.TrimSpace(rest)) != 0 {
			return nil, errors.New("publicKey is not a single PEM block")
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("publicKey PEM block is %q, want \"PUBLIC KEY\"", block.Type)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, errors.New("publicKey is not a valid SubjectPublicKeyInfo")
		}
		switch pub := pub.(type) {
		case *rsa.PublicKey:
			if bits := pub.N.BitLen(); bits < minRSABits || bits > maxRSABits {
				return nil, fmt.Errorf("RSA publicKey has %d bits, want %d to %d", bits, minRSABits, maxRSABits)
			}
			return &PublicKey{scheme: RSAOAEP, rsa: pub}, nil
		case *ecdh.PublicKey:
			if pub.Curve() != ecdh.X25519() {
				return nil, errors.New("publicKey curve is not supported: use X25519, X-Wing or RSA")
			}
			return newHPKEPublic(X25519, pub.Bytes())
		default:
			return nil, errors.New("publicKey type is not supported: use X25519, X-Wing or RSA")
		}
	}
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, errors.New("publicKey is neither PEM nor standard base64")
	}
	switch len(raw) {
	case x25519PublicSize:
		return newHPKEPublic(X25519, raw)
	case xwingPublicSize:
		return newHPKEPublic(XWing, raw)
	}
	return nil, fmt.Errorf("publicKey of %d bytes: want 32 (X25519) or 1216 (X-Wing)", len(raw))
}

func newHPKEPublic(s Scheme, raw []byte) (*PublicKey, error) {
	pk, err := s.kem().NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("publicKey is not a valid %s key", s)
	}
	// Some keys decode but cannot be encapsulated to (an X25519 point of
	// low order, say): one trial encapsulation refuses them here, as bad
	// input, rather than at the first wrap.
	if _, _, err := hpke.NewSender(pk, hpke.HKDFSHA256(), hpke.AES256GCM(), nil); err != nil {
		return nil, fmt.Errorf("publicKey is not a usable %s key", s)
	}
	return &PublicKey{scheme: s, hpke: pk}, nil
}

// Scheme returns the wrapping scheme the key is used with.
func (p *PublicKey) Scheme() Scheme { return p.scheme }

// String returns the canonical text of the key: standard base64 of the raw
// key for the HPKE schemes, a PEM SubjectPublicKeyInfo for RSA.
func (p *PublicKey) String() string {
	if p.rsa != nil {
		der, err := x509.MarshalPKIXPublicKey(p.rsa)
		if err != nil {
			panic("wrap: marshal RSA key: " + err.Error())
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	}
	return base64.StdEncoding.EncodeToString(p.hpke.Bytes())
}

// Wrap encrypts plaintext for the key, bound to info. For the HPKE schemes
// it returns the AEAD ciphertext and the encapsulated key enc; for RSA the
// OAEP ciphertext (with info as the label) and a nil enc.
func (p *PublicKey) Wrap(plaintext, info []byte) (ct, enc []byte, err error) {
	if p.rsa != nil {
		ct, err = rsa.EncryptOAEP(sha256.New(), rand.Reader, p.rsa, plaintext, info)
		return ct, nil, err
	}
	enc, sender, err := hpke.NewSender(p.hpke, hpke.HKDFSHA256(), hpke.AES256GCM(), info)
	if err != nil {
		return nil, nil, err
	}
	ct, err = sender.Seal(nil, plaintext)
	return ct, enc, err
}

// PrivateKey is the private half of a ring key pair of an HPKE scheme.
type PrivateKey struct {
	scheme Scheme
	hpke   hpke.PrivateKey
}

// Generate makes a new key pair of an HPKE scheme.
func Generate(s Scheme) (*PrivateKey, error) {
	kem := s.kem()
	if kem == nil {
		return nil, fmt.Errorf("cannot generate keys of scheme %q", s)
	}
	k, err := kem.GenerateKey()
	if err != nil {
		return nil, err
	}
	return &PrivateKey{scheme: s, hpke: k}, nil
}

// ParsePrivateKey parses the serialized private key of an HPKE scheme, as
// returned by Bytes.
func ParsePrivateKey(s Scheme, raw []byte) (*PrivateKey, error) {
	kem := s.kem()
	if kem == nil {
		return nil, fmt.Errorf("no private keys of scheme %q", s)
	}
	k, err := kem.NewPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("not a valid %s private key", s)
	}
	return &PrivateKey{scheme: s, hpke: k}, nil
}

// Scheme returns the key's scheme.
func (k *PrivateKey) Scheme() Scheme { return k.scheme }

// Bytes returns the RFC 9180 serialization of the private key: 32 bytes
// for X25519, the 32-byte seed for X-Wing. The caller must clear it.
func (k *PrivateKey) Bytes() []byte {
	b, err := k.hpke.Bytes()
	if err != nil {
		panic("wrap: serialize private key: " + err.Error())
	}
	return b
}

// Public returns the public half.
func (k *PrivateKey) Public() *PublicKey {
	return &PublicKey{scheme: k.scheme, hpke: k.hpke.PublicKey()}
}

// Unwrap opens a value made by Wrap for this key's public half.
func (k *PrivateKey) Unwrap(ct, enc, info []byte) ([]byte, error) {
	r, err := hpke.NewRecipient(enc, k.hpke, hpke.HKDFSHA256(), hpke.AES256GCM(), info)
	if err != nil {
		return nil, err
	}
	return r.Open(nil, ct)
}

// Opener opens wrapped values with a ring's private key in any of the
// forms a holder keeps it: standard base64 of the 32-byte RFC 9180
// serialization (the X-Wing seed or the X25519 private key, as the service
// returns them at ring creation), or a PEM "PRIVATE KEY" (PKCS #8, X25519
// or RSA) or "RSA PRIVATE KEY" (PKCS #1) block. A raw 32-byte key is the
// same text for both HPKE schemes; which one it is follows from the scheme
// of the value opened, and each is parsed once.
type Opener struct {
	raw []byte          // base64 form or a PKCS #8 X25519 key
	rsa *rsa.PrivateKey // PEM RSA forms

	mu   sync.Mutex
	hpke map[Scheme]*PrivateKey
}

// ParseOpener parses a ring's private key; see Opener for the forms.
// Errors never quote the text.
func ParseOpener(text []byte) (*Opener, error) {
	text = bytes.TrimSpace(text)
	if bytes.HasPrefix(text, []byte("-----BEGIN")) {
		block, rest := pem.Decode(text)
		if block == nil || len(bytes.TrimSpace(rest)) != 0 {
			return nil, errors.New("private key is not a single PEM block")
		}
		defer clear(block.Bytes)
		switch block.Type {
		case "RSA PRIVATE KEY":
			k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
			if err != nil {
				return nil, errors.New("private key is not a valid PKCS #1 RSA key")
			}
			return &Opener{rsa: k}, nil
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, errors.New("private key is not a valid PKCS #8 key")
			}
			switch k := k.(type) {
			case *rsa.PrivateKey:
				return &Opener{rsa: k}, nil
			case *ecdh.PrivateKey:
				if k.Curve() != ecdh.X25519() {
					return nil, errors.New("private key curve is not supported: use X25519, X-Wing or RSA")
				}
				return &Opener{raw: k.Bytes()}, nil
			}
			return nil, errors.New("private key type is not supported: use X25519, X-Wing or RSA")
		}
		return nil, fmt.Errorf("private key PEM block is %q, want \"PRIVATE KEY\" or \"RSA PRIVATE KEY\"", block.Type)
	}
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	n, err := base64.StdEncoding.Decode(raw, text)
	if err != nil || n != 32 {
		clear(raw)
		return nil, errors.New("private key is neither PEM nor standard base64 of 32 bytes")
	}
	return &Opener{raw: raw[:n]}, nil
}

// Unwrap opens ct (with the encapsulated key enc for the HPKE schemes),
// made by Wrap for the public half of this key under scheme s and bound
// to info.
func (o *Opener) Unwrap(s Scheme, ct, enc, info []byte) ([]byte, error) {
	if s == RSAOAEP {
		if o.rsa == nil {
			return nil, errors.New("the key is wrapped with RSA-OAEP and the private key is not an RSA key")
		}
		return rsa.DecryptOAEP(sha256.New(), nil, o.rsa, ct, info)
	}
	if s.kem() == nil {
		return nil, fmt.Errorf("unknown wrapping scheme %q", s)
	}
	if o.raw == nil {
		return nil, fmt.Errorf("the key is wrapped with %s and the private key is an RSA key", s)
	}
	o.mu.Lock()
	k := o.hpke[s]
	if k == nil {
		var err error
		if k, err = ParsePrivateKey(s, o.raw); err != nil {
			o.mu.Unlock()
			return nil, err
		}
		if o.hpke == nil {
			o.hpke = make(map[Scheme]*PrivateKey, 1)
		}
		o.hpke[s] = k
	}
	o.mu.Unlock()
	return k.Unwrap(ct, enc, info)
}
