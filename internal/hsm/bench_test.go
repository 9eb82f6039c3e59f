//go:build cgo

package hsm_test

import (
	"crypto"
	"testing"

	"github.com/ringkms/kms/internal/hsmtest"
)

// The costs of the token's operations, on SoftHSM2: a header batch's
// signature, and the seal and open of a 32-byte root secret (done at
// start and at rekey only).

func BenchmarkEd25519Sign(b *testing.B) {
	tok := hsmtest.New(b, "kms")
	tok.GenerateAESKey(b, "kms-master", hsmtest.AESKeyOptions{})
	tk := open(b, parse(b, tok.URI("kms-master")))
	k, err := tk.GenerateEd25519("signing", nil)
	if err != nil {
		b.Fatalf("GenerateEd25519() = %v", err)
	}
	msg := make([]byte, 22+32) // what headersign signs: a context and a Merkle root
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := k.Sign(nil, msg, crypto.Hash(0)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := k.Sign(nil, msg, crypto.Hash(0)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkAESSeal(b *testing.B) {
	tok := hsmtest.New(b, "kms")
	tok.GenerateAESKey(b, "kms-master", hsmtest.AESKeyOptions{})
	u := parse(b, tok.URI("kms-master"))
	k, err := open(b, u).AESKey(u)
	if err != nil {
		b.Fatalf("AESKey() = %v", err)
	}
	root := make([]byte, 32)
	aad := []byte("ringkms root secret")
	sealed, _ := k.Seal(root, aad)
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			if _, err := k.Seal(root, aad); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			if _, err := k.Open(sealed, aad); err != nil {
				b.Fatal(err)
			}
		}
	})
}
