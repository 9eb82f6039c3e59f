//go:build !cgo

package hsm

import (
	"crypto"
	"crypto/ed25519"
	"io"
)

// This build has no cgo, so no PKCS#11: the API is the same, and every
// constructor answers ErrNoSupport, whose message says how to build one
// that has it. No value of these types can exist, so their methods only
// answer the same.

// Token is a logged-in connection to one token; this build cannot make one.
type Token struct{}

// AESKey is an AES-256 key in a token; this build cannot make one.
type AESKey struct{}

// Ed25519Key is an Ed25519 key pair in a token; this build cannot make one.
type Ed25519Key struct{}

var _ crypto.Signer = (*Ed25519Key)(nil)

func noSupport() error { return ErrNoSupport }

// Open answers ErrNoSupport.
func Open(URI, string) (*Token, error) { return nil, noSupport() }

// String names the token.
func (t *Token) String() string { return "pkcs11 token (unsupported)" }

// Close does nothing.
func (t *Token) Close() error { return nil }

// AESKey answers ErrNoSupport.
func (t *Token) AESKey(URI) (*AESKey, error) { return nil, noSupport() }

// Ed25519Key answers ErrNoSupport.
func (t *Token) Ed25519Key(URI) (*Ed25519Key, error) { return nil, noSupport() }

// GenerateEd25519 answers ErrNoSupport.
func (t *Token) GenerateEd25519(string, []byte) (*Ed25519Key, error) { return nil, noSupport() }

// Seal answers ErrNoSupport.
func (k *AESKey) Seal(_, _ []byte) ([]byte, error) { return nil, noSupport() }

// Open answers ErrNoSupport.
func (k *AESKey) Open(_, _ []byte) ([]byte, error) { return nil, noSupport() }

// Public returns a nil ed25519.PublicKey.
func (k *Ed25519Key) Public() crypto.PublicKey { return ed25519.PublicKey(nil) }

// Sign answers ErrNoSupport.
func (k *Ed25519Key) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, noSupport()
}
