package kms

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"testing"
)

// TestSignBatch signs batches of every shape the tree takes and checks
// that each header's tail leads to a root the signature covers, and that
// no header's proof serves another header or survives a change.
func TestSignBatch(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	g := &headerSigner{key: priv}
	for _, n := range []int{1, 2, 3, 5, 8, 9, maxSignBatch} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			batch := make([]*signReq, n)
			for i := range batch {
				batch[i] = &signReq{body: []byte(fmt.Sprintf("header body %d", i))}
			}
			g.signBatch(batch)
			depth := 0
			for 1<<depth < n {
				depth++
			}
			verify := func(body []byte, tail []byte) bool {
				d, i := int(tail[0]), int(tail[1])
				proof, sig := tail[2:2+32*d], tail[2+32*d:]
				root := headerRoot(body, i, proof)
				return ed25519.Verify(pub, append([]byte(headerRootCtx), root[:]...), sig)
			}
			for i, r := range batch {
				if len(r.proof) != 2+32*depth+ed25519.SignatureSize || int(r.proof[0]) != depth || int(r.proof[1]) != i {
					t.Fatalf("tail of header %d: %d bytes, depth %d, index %d; want %d bytes, depth %d, index %d",
						i, len(r.proof), r.proof[0], r.proof[1], 2+32*depth+ed25519.SignatureSize, depth, i)
				}
				if !verify(r.body, r.proof) {
					t.Fatalf("header %d of %d does not verify", i, n)
				}
				if !verify(r.body, r.proof) || verify(append(bytes.Clone(r.body), 'x'), r.proof) {
					t.Fatalf("header %d verifies with another body", i)
				}
				if n > 1 {
					other := batch[(i+1)%n]
					if verify(other.body, r.proof) {
						t.Fatalf("header %d's proof verifies header %d", i, (i+1)%n)
					}
					moved := bytes.Clone(r.proof)
					moved[1] ^= 1
					if verify(r.body, moved) {
						t.Fatalf("header %d verifies at another index", i)
					}
				}
			}
		})
	}
}
