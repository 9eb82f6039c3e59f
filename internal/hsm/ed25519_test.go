//go:build cgo

package hsm_test

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/sha512"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ringkms/kms/internal/hsm"
)

func verify(t testing.TB, k crypto.Signer, msg []byte) {
	t.Helper()
	sig, err := k.Sign(nil, msg, crypto.Hash(0))
	if err != nil {
		t.Fatalf("Sign() = %v", err)
	}
	pub, ok := k.Public().(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		t.Fatalf("Public() = %T %x, want an ed25519.PublicKey", k.Public(), k.Public())
	}
	if !ed25519.Verify(pub, msg, sig) {
		t.Fatalf("ed25519.Verify(Sign(%q)) = false", msg)
	}
}

// TestGenerateEd25519 makes a key pair in the token, signs with it, and
// finds it again by its label and by its id after reopening the token.
func TestGenerateEd25519(t *testing.T) {
	tok, u := setup(t)
	tk := open(t, u)
	k, err := tk.GenerateEd25519("signing-1", []byte{0x51})
	if err != nil {
		t.Fatalf("GenerateEd25519() = %v", err)
	}
	verify(t, k, []byte("ringkms-header-root-v1 and a root"))
	pub := k.Public().(ed25519.PublicKey)
	if _, err := tk.GenerateEd25519("signing-1", []byte{0x52}); !errors.Is(err, hsm.ErrExists) {
		t.Errorf("GenerateEd25519(same label) = %v, want ErrExists", err)
	}
	if _, err := tk.GenerateEd25519("signing-2", []byte{0x51}); !errors.Is(err, hsm.ErrExists) {
		t.Errorf("GenerateEd25519(same id) = %v, want ErrExists", err)
	}
	if _, err := tk.GenerateEd25519("", nil); !errors.Is(err, hsm.ErrInvalid) {
		t.Errorf("GenerateEd25519(no label) = %v, want ErrInvalid", err)
	}
	if err := tk.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}

	for _, uri := range []string{
		tok.URI("signing-1"),
		strings.Replace(tok.URI("signing-1"), "object=signing-1", "id=%51", 1),
		strings.Replace(tok.URI("signing-1"), "object=signing-1", "object=signing-1;type=private", 1),
	} {
		v := parse(t, uri)
		again, err := open(t, v).Ed25519Key(v)
		if err != nil {
			t.Fatalf("Ed25519Key(%s) after reopening = %v", uri, err)
		}
		if got := again.Public().(ed25519.PublicKey); !got.Equal(pub) {
			t.Fatalf("Ed25519Key(%s).Public() = %x, want %x", uri, got, pub)
		}
		verify(t, again, []byte("after reopening"))
	}
}

// TestEd25519MadeByTool finds a key pair the operator made with
// pkcs11-tool, which names the curve by the PrintableString.
func TestEd25519MadeByTool(t *testing.T) {
	tok, u := setup(t)
	tok.GenerateEd25519(t, "from-tool", []byte{0x77})
	v := parse(t, tok.URI("from-tool"))
	k, err := open(t, u).Ed25519Key(v)
	if err != nil {
		t.Fatalf("Ed25519Key() = %v", err)
	}
	verify(t, k, []byte("made by the token's tools"))
}

func TestEd25519Refused(t *testing.T) {
	tok, u := setup(t)
	tk := open(t, u)
	if _, err := tk.GenerateEd25519("signing", nil); err != nil {
		t.Fatalf("GenerateEd25519() = %v", err)
	}
	for _, tc := range []struct {
		name, uri string
		want      error
	}{
		{"a secret key", tok.URI("kms-master"), hsm.ErrKeyType},
		{"no such key", tok.URI("missing"), hsm.ErrNoObject},
		{"type public", strings.Replace(tok.URI("signing"), "object=signing", "object=signing;type=public", 1), hsm.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tk.Ed25519Key(parse(t, tc.uri)); !errors.Is(err, tc.want) {
				t.Fatalf("Ed25519Key(%s) = %v, want %v", tc.uri, err, tc.want)
			}
		})
	}
	k, err := tk.Ed25519Key(parse(t, tok.URI("signing")))
	if err != nil {
		t.Fatalf("Ed25519Key() = %v", err)
	}
	digest := sha512.Sum512([]byte("m"))
	for _, opts := range []crypto.SignerOpts{crypto.SHA512, &ed25519.Options{Hash: crypto.SHA512}, &ed25519.Options{Context: "ctx"}} {
		if _, err := k.Sign(nil, digest[:], opts); !errors.Is(err, hsm.ErrInvalid) {
			t.Errorf("Sign(opts %#v) = %v, want ErrInvalid", opts, err)
		}
	}
	for _, opts := range []crypto.SignerOpts{nil, &ed25519.Options{}} {
		if _, err := k.Sign(nil, []byte("m"), opts); err != nil {
			t.Errorf("Sign(opts %#v) = %v", opts, err)
		}
	}
}

// TestSignConcurrently signs from 16 goroutines at once through the
// Token's few sessions; every signature must verify. Run it with -race.
func TestSignConcurrently(t *testing.T) {
	_, u := setup(t)
	tk := open(t, u)
	k, err := tk.GenerateEd25519("signing", nil)
	if err != nil {
		t.Fatalf("GenerateEd25519() = %v", err)
	}
	aes, err := tk.AESKey(u)
	if err != nil {
		t.Fatalf("AESKey() = %v", err)
	}
	pub := k.Public().(ed25519.PublicKey)
	const goroutines, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				msg := fmt.Appendf(nil, "batch %d of goroutine %d", i, g)
				sig, err := k.Sign(nil, msg, crypto.Hash(0))
				if err != nil {
					errs <- err
					return
				}
				if !ed25519.Verify(pub, msg, sig) {
					errs <- fmt.Errorf("signature of %q does not verify", msg)
					return
				}
				if g%4 == 0 { // seal now and then, on the same sessions
					sealed, err := aes.Seal(msg, nil)
					if err != nil {
						errs <- err
						return
					}
					if got, err := aes.Open(sealed, nil); err != nil || !bytes.Equal(got, msg) {
						errs <- fmt.Errorf("Open(Seal(%q)) = %q, %v", msg, got, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCloseWhileSigning closes the Token under signers: those in flight
// finish, the later ones fail with ErrClosed, none with anything else.
func TestCloseWhileSigning(t *testing.T) {
	tok, u := setup(t)
	pin, _ := u.ReadPIN("")
	tk, err := hsm.Open(u, pin)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	k, err := tk.GenerateEd25519("signing", nil)
	if err != nil {
		t.Fatalf("GenerateEd25519() = %v", err)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			for {
				_, err := k.Sign(nil, []byte("m"), crypto.Hash(0))
				if errors.Is(err, hsm.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Sign() = %v", err)
					noSecret(t, tok, err)
					return
				}
			}
		})
	}
	close(start)
	if err := tk.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	wg.Wait()
}
