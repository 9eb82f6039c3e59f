// Package hsmkey opens, for a test, the Ed25519 key pair that a PKCS#11
// URI names in a token made by hsmtest, through internal/hsm as kmsd
// does, or makes such a token and key pair and opens them (Signing). It
// is apart from hsmtest, which loads no PKCS#11 module.
package hsmkey

import (
	"crypto/ed25519"
	"encoding/hex"
	"testing"

	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hsm"
	"github.com/ringkms/kms/internal/hsmtest"
)

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

// Signing makes a token with hsmtest.New, generates in it the Ed25519
// key pair labelled "kms-signing", and opens that as Open does: it
// returns the open token and the key pair.
func Signing(t testing.TB) (*hsm.Token, *hsm.Ed25519Key) {
	t.Helper()
	tok := hsmtest.New(t, "kms")
	tok.GenerateEd25519(t, "kms-signing", nil)
	tk, k, _ := Open(t, tok.URI("kms-signing"))
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
