//go:build cgo

package hsm_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/hsm"
	"github.com/ringkms/kms/internal/hsmtest"
)

// setup returns a SoftHSM2 token labelled "kms" with the key the service
// wants, labelled "kms-master", and its URI.
func setup(t *testing.T) (*hsmtest.Token, hsm.URI) {
	t.Helper()
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{ID: []byte{0x01}})
	return tok, parse(t, tok.URI("kms-master"))
}

func parse(t testing.TB, s string) hsm.URI {
	t.Helper()
	u, err := hsm.ParseURI(s)
	if err != nil {
		t.Fatalf("ParseURI(%q) = %v", s, err)
	}
	return u
}

// open opens the token u names with the PIN of its pin-source, closing it
// at the end of the test.
func open(t testing.TB, u hsm.URI) *hsm.Token {
	t.Helper()
	pin, err := u.ReadPIN("")
	if err != nil {
		t.Fatalf("ReadPIN() = %v", err)
	}
	tk, err := hsm.Open(u, pin)
	if err != nil {
		t.Fatalf("Open(%s) = %v", u, err)
	}
	t.Cleanup(func() {
		if err := tk.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return tk
}

// noSecret fails t when err's message holds the token's PIN.
// aesKey returns the AES key of a new token made by setup.
func aesKey(t *testing.T) *hsm.AESKey {
	t.Helper()
	_, u := setup(t)
	k, err := open(t, u).AESKey(u)
	if err != nil {
		t.Fatalf("AESKey() = %v", err)
	}
	return k
}

func noSecret(t testing.TB, tok *hsmtest.Token, err error) {
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), tok.PIN) || strings.Contains(err.Error(), tok.SOPIN)) {
		t.Errorf("error %q holds a PIN", err)
	}
}

func TestSealOpen(t *testing.T) {
	k := aesKey(t)
	root := bytes.Repeat([]byte{0x5a}, 32)
	aad := []byte("ringkms root secret v1")
	sealed, err := k.Seal(root, aad)
	if err != nil {
		t.Fatalf("Seal() = %v", err)
	}
	if len(sealed) != len(root)+hsm.SealOverhead || sealed[0] != 0x01 {
		t.Fatalf("Seal() = %d bytes, version %d; want %d bytes, version 1", len(sealed), sealed[0], len(root)+hsm.SealOverhead)
	}
	got, err := k.Open(sealed, aad)
	if err != nil || !bytes.Equal(got, root) {
		t.Fatalf("Open(Seal(root)) = %x, %v; want %x", got, err, root)
	}
	again, err := k.Seal(root, aad)
	if err != nil || bytes.Equal(again[1:13], sealed[1:13]) {
		t.Errorf("two seals share an IV (%x), err %v", sealed[1:13], err)
	}
	if _, err := k.Open(sealed, []byte("another aad")); !errors.Is(err, hsm.ErrOpen) {
		t.Errorf("Open(wrong aad) = %v, want ErrOpen", err)
	}
	if empty, err := k.Seal(nil, nil); err != nil {
		t.Errorf("Seal(nil, nil) = %v", err)
	} else if got, err := k.Open(empty, nil); err != nil || len(got) != 0 {
		t.Errorf("Open(Seal(nil, nil)) = %x, %v", got, err)
	}
}

// TestOpenTampered flips every bit of a sealed value and truncates it:
// each must fail with ErrOpen, and the key must go on working.
func TestOpenTampered(t *testing.T) {
	k := aesKey(t)
	root := bytes.Repeat([]byte{0xa5}, 32)
	sealed, err := k.Seal(root, []byte("aad"))
	if err != nil {
		t.Fatalf("Seal() = %v", err)
	}
	for i := range 8 * len(sealed) {
		bad := bytes.Clone(sealed)
		bad[i/8] ^= 1 << (i % 8)
		if got, err := k.Open(bad, []byte("aad")); !errors.Is(err, hsm.ErrOpen) {
			t.Fatalf("Open(bit %d flipped) = %x, %v; want ErrOpen", i, got, err)
		}
	}
	for n := range len(sealed) {
		if _, err := k.Open(sealed[:n], []byte("aad")); !errors.Is(err, hsm.ErrOpen) {
			t.Fatalf("Open(first %d bytes) = %v, want ErrOpen", n, err)
		}
	}
	if got, err := k.Open(sealed, []byte("aad")); err != nil || !bytes.Equal(got, root) {
		t.Fatalf("Open() after the tampered ones = %x, %v", got, err)
	}
}

// TestOpenOtherKey opens a value sealed under another key of the token.
func TestOpenOtherKey(t *testing.T) {
	tok, u := setup(t)
	tok.GenerateAESKey(t, "kms-master-2", hsmtest.AESKeyOptions{})
	tk := open(t, u)
	k1, err := tk.AESKey(u)
	if err != nil {
		t.Fatalf("AESKey() = %v", err)
	}
	k2, err := tk.AESKey(parse(t, tok.URI("kms-master-2")))
	if err != nil {
		t.Fatalf("AESKey(kms-master-2) = %v", err)
	}
	sealed, err := k1.Seal([]byte("secret"), nil)
	if err != nil {
		t.Fatalf("Seal() = %v", err)
	}
	if _, err := k2.Open(sealed, nil); !errors.Is(err, hsm.ErrOpen) {
		t.Errorf("Open(under another key) = %v, want ErrOpen", err)
	}
}

// TestAESKeyRefused: each key the service must not take is refused with
// its reason, and a message naming the key.
func TestAESKeyRefused(t *testing.T) {
	tok, u := setup(t)
	tok.GenerateAESKey(t, "extractable", hsmtest.AESKeyOptions{Extractable: true})
	tok.GenerateAESKey(t, "not-sensitive", hsmtest.AESKeyOptions{NotSensitive: true})
	tok.GenerateAESKey(t, "aes-128", hsmtest.AESKeyOptions{Size: 16})
	tok.GenerateAESKey(t, "twice", hsmtest.AESKeyOptions{ID: []byte{0x10}})
	tok.GenerateAESKey(t, "twice", hsmtest.AESKeyOptions{ID: []byte{0x11}})
	tok.GenerateEd25519(t, "signing", nil)
	tk := open(t, u)
	for _, tc := range []struct {
		name, uri string
		want      error
		says      string
	}{
		{"extractable", tok.URI("extractable"), hsm.ErrKeyPolicy, "extractable"},
		{"not sensitive", tok.URI("not-sensitive"), hsm.ErrKeyPolicy, "not sensitive"},
		{"AES-128", tok.URI("aes-128"), hsm.ErrKeyType, "AES-128"},
		{"no such object", tok.URI("missing"), hsm.ErrNoObject, `no secret key labelled "missing"`},
		{"more than one", tok.URI("twice"), hsm.ErrAmbiguous, "more than one"},
		{"a key pair", tok.URI("signing"), hsm.ErrKeyType, "is a public key and a private key, not a secret key"},
		{"vendor attribute", tok.URI("kms-master") + "&x-vendor=1", nil, ""},
		{"no such id", strings.Replace(tok.URI("kms-master"), "object=kms-master", "id=%02", 1), hsm.ErrNoObject, "with id %02"},
		{"by id", strings.Replace(tok.URI("kms-master"), "object=kms-master", "id=%01", 1), nil, ""},
		{"by label and id", strings.Replace(tok.URI("twice"), "object=twice", "object=twice;id=%11", 1), nil, ""},
		{"another token", strings.Replace(tok.URI("kms-master"), "token=kms", "token=other", 1), hsm.ErrInvalid, `not token "kms"`},
		{"wrong type attribute", strings.Replace(tok.URI("kms-master"), "object=kms-master", "object=kms-master;type=private", 1), hsm.ErrInvalid, "type=private"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := tk.AESKey(parse(t, tc.uri))
			if tc.want == nil {
				if err != nil || k == nil {
					t.Fatalf("AESKey(%s) = %v", tc.uri, err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("AESKey(%s) = %v, want %v saying %q", tc.uri, err, tc.want, tc.says)
			}
			t.Log(err)
			noSecret(t, tok, err)
		})
	}
}

// TestOpenRefused: each way Open fails has its reason, and no message
// holds the PIN.
func TestOpenRefused(t *testing.T) {
	tok, u := setup(t)
	junk := t.TempDir() + "/libjunk.so"
	if err := os.WriteFile(junk, []byte("not a library"), 0o600); err != nil {
		t.Fatal(err)
	}
	withModule := func(path string) hsm.URI {
		v := u
		v.ModulePath = path
		return v
	}
	withToken := func(label string) hsm.URI {
		v := u
		v.Token = label
		return v
	}
	for _, tc := range []struct {
		name string
		u    hsm.URI
		pin  string
		want error
		says string
	}{
		{"wrong PIN", u, "0000" + tok.PIN, hsm.ErrPINIncorrect, `wrong PIN for token "kms"`},
		{"no PIN", u, "", hsm.ErrNoPIN, "no PIN"},
		{"no such token", withToken("other"), tok.PIN, hsm.ErrNoToken, `no token matches token="other"`},
		{"no such module", withModule("/nonexistent/libpkcs11.so"), tok.PIN, hsm.ErrModule, "/nonexistent/libpkcs11.so"},
		{"not a module", withModule(junk), tok.PIN, hsm.ErrModule, "not a PKCS#11 library"},
		{"no such slot", func() hsm.URI { v := u; n := uint(4242); v.SlotID = &n; return v }(), tok.PIN, hsm.ErrNoToken, "slot-id=4242"},
		{"other library", func() hsm.URI { v := u; v.LibraryManufacturer = "Acme"; return v }(), tok.PIN, hsm.ErrNoToken, "library-*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := hsm.Open(tc.u, tc.pin)
			if err == nil {
				tk.Close()
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Open() = %v, want %v saying %q", err, tc.want, tc.says)
			}
			t.Log(err)
			noSecret(t, tok, err)
		})
	}
	// The token itself is fine: the failures above left nothing behind.
	open(t, u)
}

// TestOpenTwice: two Tokens of one process on one token share its
// login; closing one leaves the other working, and a second Open must
// give the same PIN.
func TestOpenTwice(t *testing.T) {
	tok, u := setup(t)
	a := open(t, u)
	b, err := hsm.Open(u, tok.PIN)
	if err != nil {
		t.Fatalf("second Open() = %v", err)
	}
	if _, err := hsm.Open(u, tok.PIN+"x"); !errors.Is(err, hsm.ErrPINIncorrect) {
		t.Errorf("Open(another PIN) while open = %v, want ErrPINIncorrect", err)
	}
	kb, err := b.AESKey(u)
	if err != nil {
		t.Fatalf("AESKey() = %v", err)
	}
	sealed, err := kb.Seal([]byte("root"), nil)
	if err != nil {
		t.Fatalf("Seal() = %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if _, err := kb.Seal([]byte("root"), nil); !errors.Is(err, hsm.ErrClosed) || errors.Is(err, hsm.ErrDevice) {
		t.Errorf("Seal() after Close = %v, want ErrClosed", err)
	}
	ka, err := a.AESKey(u)
	if err != nil {
		t.Fatalf("AESKey() on the Token left open = %v", err)
	}
	if got, err := ka.Open(sealed, nil); err != nil || string(got) != "root" {
		t.Errorf("Open() on the Token left open = %q, %v", got, err)
	}
}

// TestTokenSelection: the token is found by any of its attributes, and
// two tokens that the URI does not tell apart are refused.
func TestTokenSelection(t *testing.T) {
	tok, u := setup(t)
	tok.InitToken(t, "other")
	tok.InitToken(t, "other")
	for _, tc := range []struct {
		name string
		edit func(*hsm.URI)
		want error
	}{
		{"by label", func(*hsm.URI) {}, nil},
		{"by label and model", func(v *hsm.URI) { v.Model = "SoftHSM v2"; v.Manufacturer = "SoftHSM project" }, nil},
		{"wrong model", func(v *hsm.URI) { v.Model = "SoftHSM v3" }, hsm.ErrNoToken},
		{"two alike", func(v *hsm.URI) { v.Token = "other" }, hsm.ErrNoToken},
		{"any of three", func(v *hsm.URI) { v.Token = "" }, hsm.ErrNoToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := u
			tc.edit(&v)
			tk, err := hsm.Open(v, tok.PIN)
			if err == nil {
				tk.Close()
			}
			if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Fatalf("Open(%s) = %v, want %v", v, err, tc.want)
			}
		})
	}
}
