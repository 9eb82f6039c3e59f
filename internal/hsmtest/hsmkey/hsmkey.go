// Package hsmkey makes, for a test, a token that holds a signing key
// (hsmtest), and opens the Ed25519 key pair that a PKCS#11 URI names in
// a token made by hsmtest, through internal/hsm as kmsd does (Signing
// does both). It is apart from hsmtest, which loads no PKCS#11 module.
package hsmkey

import (
	"crypto/ed25519"
	"encoding/hex"
	"testing"

	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hsm"
	"github.com/ringkms/kms/internal/hsmtest"
)

// NewToken makes a SoftHSM2 token labelled "kms" (hsmtest.New) with an
// Ed25519 key pair labelled "kms-signing" on it, as an operator makes one
// for kmsd's -signing-key-pkcs11, and returns the token and the key
// pair's URI.
func NewToken(t testing.TB) (*hsmtest.Token, string) {
	t.Helper()
	tok := hsmtest.New(t, "kms")
	tok.GenerateEd25519(t, "kms-signing", nil)
	return tok, tok.URI("kms-signing")
}

// Open opens the token of uri with the PIN its pin-source gives, and
// returns it, the Ed25519 key pair uri names on it, and the parsed URI.
// The token is closed at the end of the test (SoftHSM2 reads its
// configuration when the module is first loaded in a process: every
// token of a test is closed by its end); closing it sooner is harmless.
func Open(t testing.TB, uri string) (*hsm.Token, *hsm.Ed25519Key, hsm.URI) {
	t.Helper()
	u, err := hsm.ParseURI(uri)
	if err != nil {
		t.Fatalf("hsm.ParseURI(%s) = %v", uri, err)
	}
	pin, err := u.ReadPIN("")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := hsm.Open(u, pin)
	if err != nil {
		t.Fatalf("hsm.Open(%s) = %v", uri, err)
	}
	t.Cleanup(func() { tok.Close() })
	k, err := tok.Ed25519Key(u)
	if err != nil {
		t.Fatalf("Ed25519Key(%s) = %v", uri, err)
	}
	return tok, k, u
}

// Signing makes a token with its signing key (NewToken) and opens the
// key as Open does: it returns the open token and the key pair.
func Signing(t testing.TB) (*hsm.Token, *hsm.Ed25519Key) {
	t.Helper()
	_, uri := NewToken(t)
	tk, k, _ := Open(t, uri)
	return tk, k
}

// KeyID returns the signing key ID (headersign.KeyID, in hex) of the
// Ed25519 key pair uri names, read from its token, which it closes again
// at once.
func KeyID(t testing.TB, uri string) string {
	t.Helper()
	tok, k, _ := Open(t, uri)
	defer tok.Close()
	id := headersign.KeyID(k.Public().(ed25519.PublicKey))
	return hex.EncodeToString(id[:])
}
