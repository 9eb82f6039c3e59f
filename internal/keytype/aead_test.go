package keytype

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
	"errors"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/ringkms/kms/internal/vaultct"
)

func stdAEAD(t testing.TB, ty Type, key []byte) cipher.AEAD {
	t.Helper()
	if ty == ChaCha20Poly1305 {
		a, err := chacha20poly1305.New(key)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAEADKnownAnswer: a ciphertext built by hand from a key, a nonce,
// associated data and the algorithm of the standard library (or
// x/crypto) opens, so the framing is nonce | ciphertext | tag as Vault
// lays it out; and what Encrypt makes opens by hand the same way.
func TestAEADKnownAnswer(t *testing.T) {
	key, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	nonce, _ := hex.DecodeString("0a0b0c0d0e0f101112131415")
	plain, ad := []byte("the quick brown fox"), []byte("context")
	for _, ty := range []Type{AES256GCM96, ChaCha20Poly1305} {
		t.Run(string(ty), func(t *testing.T) {
			k, err := Load(mustSpec(ty, Params{}), key)
			if err != nil {
				t.Fatal(err)
			}
			std := stdAEAD(t, ty, key)
			blob := std.Seal(bytes.Clone(nonce), nonce, plain, ad)
			got, err := k.Decrypt(blob, ad)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("Decrypt(hand-made) = %q, %v; want %q", got, err, plain)
			}
			ct, err := k.Encrypt(plain, ad)
			if err != nil {
				t.Fatal(err)
			}
			if len(ct) != 12+len(plain)+16 {
				t.Fatalf("Encrypt: %d bytes, want %d", len(ct), 12+len(plain)+16)
			}
			got, err = std.Open(nil, ct[:12], ct[12:], ad)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("open Encrypt's answer by hand = %q, %v", got, err)
			}
		})
	}
}

// TestAEADRoundTrip encrypts and decrypts sizes and associated data with
// both types, and refuses every altered byte, other associated data,
// truncation and the other key.
func TestAEADRoundTrip(t *testing.T) {
	for _, ty := range []Type{AES256GCM96, ChaCha20Poly1305} {
		t.Run(string(ty), func(t *testing.T) {
			s := mustSpec(ty, Params{})
			k := testKey(t, s)
			m, _ := Generate(s)
			other, _ := Load(s, m)
			for _, plain := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("abc"), 1000)} {
				for _, ad := range [][]byte{nil, []byte("tenant-1")} {
					ct, err := k.Encrypt(plain, ad)
					if err != nil {
						t.Fatal(err)
					}
					got, err := k.Decrypt(ct, ad)
					if err != nil || !bytes.Equal(got, plain) {
						t.Fatalf("Decrypt(Encrypt(%d bytes)) = %d bytes, %v", len(plain), len(got), err)
					}
					if _, err := other.Decrypt(ct, ad); !errors.Is(err, vaultct.ErrAuthFailed) || !errors.Is(err, ErrInput) {
						t.Errorf("Decrypt under another key: err = %v, want ErrInput and ErrAuthFailed", err)
					}
					if _, err := k.Decrypt(ct, []byte("tenant-2")); !errors.Is(err, ErrInput) {
						t.Errorf("Decrypt with other associated data: err = %v", err)
					}
					if len(plain) > 100 {
						continue
					}
					for i := range ct {
						for bit := 0; bit < 8; bit++ {
							bad := bytes.Clone(ct)
							bad[i] ^= 1 << bit
							if _, err := k.Decrypt(bad, ad); !errors.Is(err, ErrInput) {
								t.Fatalf("Decrypt with byte %d bit %d flipped: err = %v", i, bit, err)
							}
						}
					}
					for n := 0; n < len(ct); n++ {
						if _, err := k.Decrypt(ct[:n], ad); !errors.Is(err, ErrInput) {
							t.Fatalf("Decrypt of %d of %d bytes: err = %v", n, len(ct), err)
						}
					}
				}
			}
			if _, err := k.Decrypt(make([]byte, 27), nil); !errors.Is(err, vaultct.ErrTooShort) {
				t.Errorf("Decrypt(27 bytes): err = %v, want ErrTooShort", err)
			}
		})
	}
}

// TestAEADTypesDiffer: the same key bytes under the two AEAD types make
// ciphertexts the other does not open.
func TestAEADTypesDiffer(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	a, _ := Load(mustSpec(AES256GCM96, Params{}), key)
	c, _ := Load(mustSpec(ChaCha20Poly1305, Params{}), key)
	ct, _ := a.Encrypt([]byte("secret"), nil)
	if _, err := c.Decrypt(ct, nil); !errors.Is(err, ErrInput) {
		t.Errorf("chacha20-poly1305 opened an aes256-gcm96 ciphertext: err = %v", err)
	}
}

// TestAEADWrongType: only the AEAD types encrypt.
func TestAEADWrongType(t *testing.T) {
	for _, s := range specs {
		if s.t.Encrypts() || (s.t.rsa() && s.t != RSA2048) {
			continue
		}
		k := testKey(t, s)
		_, err := k.Encrypt([]byte("x"), nil)
		wantErr(t, name(s)+" Encrypt", err, ErrWrongType)
		_, err = k.Decrypt(make([]byte, 64), nil)
		wantErr(t, name(s)+" Decrypt", err, ErrWrongType)
	}
}
