//go:build cgo

package hsm

import (
	"crypto"
	"crypto/ed25519"
	"fmt"
	"io"
	"strconv"

	"github.com/miekg/pkcs11"
)

// PKCS#11 3.0 names for EdDSA, which miekg/pkcs11 v1.1.2 (written against
// 2.40) does not define.
const (
	ckkECEdwards           = 0x00000040 // CKK_EC_EDWARDS
	ckmECEdwardsKeyPairGen = 0x00001055 // CKM_EC_EDWARDS_KEY_PAIR_GEN
	ckmEdDSA               = 0x00001057 // CKM_EDDSA
)

// Ed25519Key is an Ed25519 key pair whose private key stays in its token:
// the token signs (CKM_EDDSA), and the process holds only the public key.
// It implements crypto.Signer, is safe for concurrent use, and is valid
// until its Token is closed.
type Ed25519Key struct {
	t    *Token
	priv pkcs11.ObjectHandle
	pub  ed25519.PublicKey
	desc string
}

var _ crypto.Signer = (*Ed25519Key)(nil)

// Ed25519Key finds the Ed25519 private key (CKO_PRIVATE_KEY,
// CKK_EC_EDWARDS on edwards25519) that u's object and id name and the
// public key with the same label and id, from whose CKA_EC_POINT it takes
// the public key. The private key must be sensitive, not extractable and
// allowed to sign; a probe signature must verify under the public key.
func (t *Token) Ed25519Key(u URI) (*Ed25519Key, error) {
	priv, err := t.findKey(u, pkcs11.CKO_PRIVATE_KEY, "private", "a signing key is named by its private key (type=private, or no type)")
	if err != nil {
		return nil, err
	}
	pub, err := t.findOne(pkcs11.CKO_PUBLIC_KEY, u)
	if err != nil {
		return nil, err
	}
	return t.ed25519Key(priv, pub, fmt.Sprintf("the key pair %s on token %q", u.objectDesc(), t.label))
}

// ed25519Key checks the key pair of priv and pub and returns it.
func (t *Token) ed25519Key(priv, pub pkcs11.ObjectHandle, desc string) (*Ed25519Key, error) {
	a, err := t.attrs(priv, pkcs11.CKA_KEY_TYPE, pkcs11.CKA_EC_PARAMS, pkcs11.CKA_SENSITIVE, pkcs11.CKA_EXTRACTABLE, pkcs11.CKA_SIGN)
	if err != nil {
		return nil, err
	}
	if typ := ulong(a[0]); typ != ckkECEdwards {
		return nil, errorf(ReasonKeyType, nil, "%s is not an EdDSA key (CKA_KEY_TYPE %#x, want CKK_EC_EDWARDS)", desc, typ)
	}
	if !isEd25519Params(a[1]) {
		return nil, errorf(ReasonKeyType, nil, "%s is not on edwards25519 (CKA_EC_PARAMS %x)", desc, a[1])
	}
	if !boolean(a[2]) || boolean(a[3]) {
		return nil, errorf(ReasonKeyPolicy, nil, "%s has a private key that is not sensitive or is extractable: make a new one with CKA_SENSITIVE true and CKA_EXTRACTABLE false", desc)
	}
	if !boolean(a[4]) || !t.allowsMechanism(priv, ckmEdDSA) {
		return nil, errorf(ReasonKeyPolicy, nil, "%s may not sign with CKM_EDDSA (CKA_SIGN, CKA_ALLOWED_MECHANISMS)", desc)
	}
	b, err := t.attrs(pub, pkcs11.CKA_KEY_TYPE, pkcs11.CKA_EC_PARAMS, pkcs11.CKA_EC_POINT)
	if err != nil {
		return nil, err
	}
	if ulong(b[0]) != ckkECEdwards || !isEd25519Params(b[1]) {
		return nil, errorf(ReasonKeyType, nil, "%s has a public key that is not an Ed25519 key", desc)
	}
	point, ok := parseEd25519Point(b[2])
	if !ok {
		return nil, errorf(ReasonKeyType, nil, "%s has a CKA_EC_POINT of %d bytes that is not an Ed25519 public key", desc, len(b[2]))
	}
	k := &Ed25519Key{t: t, priv: priv, pub: point, desc: desc}
	probe := []byte("ringkms hsm probe")
	sig, err := k.Sign(nil, probe, crypto.Hash(0))
	if err != nil {
		return nil, err
	}
	if !ed25519.Verify(point, probe, sig) {
		return nil, errorf(ReasonKeyType, nil, "%s: the public key does not match the private key", desc)
	}
	return k, nil
}

// Public returns the ed25519.PublicKey.
func (k *Ed25519Key) Public() crypto.PublicKey {
	return ed25519.PublicKey(append([]byte(nil), k.pub...))
}

// Sign signs msg itself (pure Ed25519, RFC 8032) in the token. opts must
// be crypto.Hash(0) (or nil, or an *ed25519.Options without hash and
// context): the token does neither Ed25519ph nor Ed25519ctx here. rand is
// not used.
func (k *Ed25519Key) Sign(_ io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts != nil && opts.HashFunc() != crypto.Hash(0) {
		return nil, invalid("sign with %s: Ed25519 signs the message itself; pass crypto.Hash(0), not %v", k.desc, opts.HashFunc())
	}
	if o, ok := opts.(*ed25519.Options); ok && o.Context != "" {
		return nil, invalid("sign with %s: Ed25519ctx (a context string) is not supported", k.desc)
	}
	var sig []byte
	err := k.t.do(func(sh pkcs11.SessionHandle) error {
		if err := k.t.mod.ctx.SignInit(sh, []*pkcs11.Mechanism{pkcs11.NewMechanism(ckmEdDSA, nil)}, k.priv); err != nil {
			return err
		}
		s, err := k.t.mod.ctx.Sign(sh, msg)
		sig = s
		return err
	})
	if err != nil {
		return nil, k.t.fail(err, "sign with %s", k.desc)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, errorf(ReasonDevice, nil, "sign with %s: the token answered %d bytes, not an Ed25519 signature", k.desc, len(sig))
	}
	return sig, nil
}

// GenerateEd25519 makes a new Ed25519 key pair in the token
// (CKM_EC_EDWARDS_KEY_PAIR_GEN), both halves token objects with the given
// label and id (no CKA_ID when id is nil), the private key sensitive, not
// extractable and allowed only to sign. It refuses a label or id that an
// object on the token already has, so that the new pair is the only one
// its URI names.
func (t *Token) GenerateEd25519(label string, id []byte) (*Ed25519Key, error) {
	if label == "" {
		return nil, invalid("a new key pair needs a label")
	}
	u := URI{Object: label, ID: id}
	if err := t.unused(pkcs11.NewAttribute(pkcs11.CKA_LABEL, label), "labelled "+strconv.Quote(label)); err != nil {
		return nil, err
	}
	if id != nil {
		if err := t.unused(pkcs11.NewAttribute(pkcs11.CKA_ID, id), "with id "+escapeAll(id)); err != nil {
			return nil, err
		}
	}
	var pub, priv pkcs11.ObjectHandle
	var err error
	// PKCS#11 3.0 names the curve by its OID; tokens written against its
	// drafts (and the tools for them) by the PrintableString.
	for _, params := range [][]byte{ed25519OID, ed25519Printable} {
		pubT := edwardsTemplate(pkcs11.CKO_PUBLIC_KEY, label, id,
			pkcs11.NewAttribute(pkcs11.CKA_PRIVATE, false),
			pkcs11.NewAttribute(pkcs11.CKA_VERIFY, true),
			pkcs11.NewAttribute(pkcs11.CKA_EC_PARAMS, params))
		privT := edwardsTemplate(pkcs11.CKO_PRIVATE_KEY, label, id,
			pkcs11.NewAttribute(pkcs11.CKA_PRIVATE, true),
			pkcs11.NewAttribute(pkcs11.CKA_SENSITIVE, true),
			pkcs11.NewAttribute(pkcs11.CKA_EXTRACTABLE, false),
			pkcs11.NewAttribute(pkcs11.CKA_SIGN, true),
			pkcs11.NewAttribute(pkcs11.CKA_DECRYPT, false),
			pkcs11.NewAttribute(pkcs11.CKA_UNWRAP, false),
			pkcs11.NewAttribute(pkcs11.CKA_DERIVE, false))
		err = t.do(func(sh pkcs11.SessionHandle) (err error) {
			pub, priv, err = t.mod.ctx.GenerateKeyPair(sh, []*pkcs11.Mechanism{pkcs11.NewMechanism(ckmECEdwardsKeyPairGen, nil)}, pubT, privT)
			return err
		})
		if !isCode(err, pkcs11.CKR_ATTRIBUTE_VALUE_INVALID) && !isCode(err, pkcs11.CKR_CURVE_NOT_SUPPORTED) && !isCode(err, pkcs11.CKR_DOMAIN_PARAMS_INVALID) {
			break
		}
	}
	if err != nil {
		if isCode(err, pkcs11.CKR_MECHANISM_INVALID) {
			return nil, errorf(ReasonDevice, err, "token %q cannot make Ed25519 keys (CKM_EC_EDWARDS_KEY_PAIR_GEN)", t.label)
		}
		return nil, t.fail(err, "generate an Ed25519 key pair %s on token %q", u.objectDesc(), t.label)
	}
	return t.ed25519Key(priv, pub, fmt.Sprintf("the key pair %s on token %q", u.objectDesc(), t.label))
}

// edwardsTemplate is the template of a new token object of class, of an
// Ed25519 key pair labelled label (and with the CKA_ID id when it is not
// nil): the attributes both halves have, with those of its half, attrs.
func edwardsTemplate(class uint, label string, id []byte, attrs ...*pkcs11.Attribute) []*pkcs11.Attribute {
	t := append([]*pkcs11.Attribute{
		pkcs11.NewAttribute(pkcs11.CKA_CLASS, class),
		pkcs11.NewAttribute(pkcs11.CKA_KEY_TYPE, ckkECEdwards),
		pkcs11.NewAttribute(pkcs11.CKA_TOKEN, true),
	}, attrs...)
	t = append(t, pkcs11.NewAttribute(pkcs11.CKA_LABEL, label))
	if id != nil {
		t = append(t, pkcs11.NewAttribute(pkcs11.CKA_ID, id))
	}
	return t
}

// unused fails with ErrExists when an object of the token has attr.
func (t *Token) unused(attr *pkcs11.Attribute, desc string) error {
	hs, err := t.find([]*pkcs11.Attribute{attr}, 1)
	if err != nil {
		return err
	}
	if len(hs) > 0 {
		return errorf(ReasonExists, nil, "token %q already has an object %s", t.label, desc)
	}
	return nil
}
