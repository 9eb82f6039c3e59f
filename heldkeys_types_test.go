package kms_test

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"testing"

	"filippo.io/mldsa"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/keytype"
	"github.com/ringkms/kms/internal/pubkeytest"
)

// heldTypes are the held key types whose material no /asym route may
// answer: every type, with one rsa size of the three (they differ only
// in size).
var heldTypes = []keytype.Type{keytype.AES256GCM96, keytype.ChaCha20Poly1305, keytype.HMAC, keytype.Ed25519,
	keytype.ECDSAP256, keytype.ECDSAP384, keytype.RSA2048, keytype.MLDSA}

// heldProof is what shows that a byte string is the material of a
// version of a held key, as its holder would use it without the
// service: a ciphertext of each version that the material opens (AEAD
// types), an HMAC of each version that it computes (every type), and
// the public key of each version that its private key signs for
// (asymmetric types).
type heldProof struct {
	typ    keytype.Type
	sealed map[int]kms.HeldSealed
	macs   map[int][]byte
	pubs   map[int]crypto.PublicKey
}

// heldProofInput is what heldProof's HMACs are of.
var heldProofInput = []byte("what only the key's holder can authenticate")

// proveHeldKey makes, through the service, the proof of every version
// of the held key name.
func proveHeldKey(t *testing.T, e *env, name string) *heldProof {
	t.Helper()
	k, err := e.svc.GetHeldKey(e.root, name)
	if err != nil {
		t.Fatal(err)
	}
	p := &heldProof{typ: keytype.Type(k.Type), sealed: map[int]kms.HeldSealed{}, macs: map[int][]byte{}, pubs: map[int]crypto.PublicKey{}}
	for v := 1; v <= k.LatestVersion; v++ {
		if k.Encrypts {
			out, err := e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: name,
				Items: []kms.HeldPlaintext{{Plaintext: []byte("sealed"), KeyVersion: v, AssociatedData: []byte("ad")}}})
			if err != nil || out[0].Err != nil {
				t.Fatalf("EncryptWithHeldKey(%s, v%d) = %+v, %v", name, v, out, err)
			}
			p.sealed[v] = kms.HeldSealed{KeyVersion: v, Ciphertext: out[0].Ciphertext, AssociatedData: []byte("ad")}
		}
		mac, err := e.svc.HMACWithHeldKey(e.root, kms.HeldSignInput{Name: name, KeyVersion: v,
			Options: kms.HeldSignOptions{Hash: "sha2-256"}, Inputs: [][]byte{heldProofInput}})
		if err != nil || mac[0].Err != nil {
			t.Fatalf("HMACWithHeldKey(%s, v%d) = %+v, %v", name, v, mac, err)
		}
		p.macs[v] = mac[0].Signature
		if k.Asymmetric {
			pub, err := pubkeytest.Parse(k.Type, k.ParameterSet, k.PublicKeys[v])
			if err != nil {
				t.Fatalf("public key of %s: %v", k.Name, err)
			}
			p.pubs[v] = pub
		}
	}
	return p
}

var mldsaParams = []mldsa.Parameters{mldsa.MLDSA44(), mldsa.MLDSA65(), mldsa.MLDSA87()}

// signersOf returns every private key that b could encode: PKCS #8,
// SEC 1 and PKCS #1 DER, an Ed25519 seed or private key, an ML-DSA seed
// of any parameter set.
func signersOf(b []byte) []crypto.Signer {
	var out []crypto.Signer
	if k, err := x509.ParsePKCS8PrivateKey(b); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			out = append(out, s)
		}
	}
	if k, err := x509.ParseECPrivateKey(b); err == nil {
		out = append(out, k)
	}
	if k, err := x509.ParsePKCS1PrivateKey(b); err == nil {
		out = append(out, k)
	}
	switch len(b) {
	case ed25519.SeedSize:
		out = append(out, ed25519.NewKeyFromSeed(b))
		for _, params := range mldsaParams {
			if k, err := mldsa.NewPrivateKey(params, b); err == nil {
				out = append(out, k)
			}
		}
	case ed25519.PrivateKeySize:
		out = append(out, ed25519.PrivateKey(bytes.Clone(b)))
	}
	return out
}

// found says which version's material, and by what, among secrets
// (secretsIn); empty when none is.
func (p *heldProof) found(secrets [][]byte) string {
	for _, b := range secrets {
		for v, ct := range p.sealed {
			if _, ok := openOffline(p.typ, ct, b); ok {
				return fmt.Sprintf("a key that opens version %d's ciphertext", v)
			}
		}
		for v, mac := range p.macs {
			m := hmac.New(sha256.New, b)
			m.Write(heldProofInput)
			if hmac.Equal(m.Sum(nil), mac) {
				return fmt.Sprintf("a key that computes version %d's HMAC", v)
			}
		}
		for _, s := range signersOf(b) {
			for v, pub := range p.pubs {
				if eq, ok := s.Public().(interface{ Equal(crypto.PublicKey) bool }); ok && eq.Equal(pub) {
					return fmt.Sprintf("the private key of version %d", v)
				}
			}
		}
	}
	return ""
}

// TestHeldKeysOfEveryTypeNotHandedOut: TestHeldKeysNotHandedOut for
// every key type. A credential that may read, rotate, create, configure
// and manage the keys of an exportable held key, but not export them,
// gets from no /asym route, nor from the export of its public keys,
// anything that opens the key's ciphertexts, computes its HMACs or signs
// for its public keys, in any encoding; the export of each version, with
// keyring.<name>.export, answers just that (which shows the search finds
// the material where it is).
func TestHeldKeysOfEveryTypeNotHandedOut(t *testing.T) {
	e := newEnv(t)
	for _, typ := range heldTypes {
		t.Run(string(typ), func(t *testing.T) {
			name := "held-" + string(typ)
			k, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: name, Type: string(typ), Exportable: true})
			if err != nil || k.Type != string(typ) {
				t.Fatalf("CreateHeldKey(%s) = %+v, %v", typ, k, err)
			}
			snoop := e.as(t, kms.Flags{"keyring." + name + ".read": true, "keyring." + name + ".rotate": true,
				"keyring." + name + ".create": true, "keyring." + name + ".config": true, "keyring." + name + ".keys": true})
			answers := askEveryAsymRoute(t, e, snoop, name, k.KeyIDs[1])
			proof := proveHeldKey(t, e, name)
			if what := proof.found(secretsIn(t, answers...)); what != "" {
				t.Fatalf("the answers of the /asym routes hold %s", what)
			}
			if typ.Asymmetric() {
				// The public keys are no secret, for a caller that may read
				// the key: their export answers nothing else.
				pub, err := e.svc.ExportHeldKey(snoop, kms.ExportHeldKeyInput{Name: name, Kind: kms.ExportPublicKey})
				if err != nil || len(pub.Keys) != 2 {
					t.Fatalf("ExportHeldKey(public-key) = %+v, %v", pub, err)
				}
				if what := proof.found(secretsIn(t, pub)); what != "" {
					t.Fatalf("the export of the public keys holds %s", what)
				}
			}

			exporter := e.as(t, kms.Flags{"keyring." + name + ".export": true})
			held, err := e.svc.GetHeldKey(e.root, name)
			if err != nil {
				t.Fatal(err)
			}
			for v := 1; v <= held.LatestVersion; v++ {
				out, err := e.svc.ExportAsymKey(exporter, kms.RingRef{Name: name}, held.KeyIDs[v])
				if err != nil || out.KeyData.Key == "" || out.Version != v {
					t.Fatalf("ExportAsymKey of version %d = %+v, %v", v, out, err)
				}
				one := &heldProof{typ: proof.typ, sealed: pick(proof.sealed, v), macs: pick(proof.macs, v), pubs: pick(proof.pubs, v)}
				if what := one.found(secretsIn(t, out)); what == "" {
					t.Fatalf("ExportAsymKey of version %d answers nothing that is its material", v)
				}
			}
		})
	}
}

// pick returns the entry of m at v alone, if any.
func pick[V any](m map[int]V, v int) map[int]V {
	out := map[int]V{}
	if e, ok := m[v]; ok {
		out[v] = e
	}
	return out
}
