package headersign

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"testing"
)

// TestSignBatch signs batches of every shape the tree takes and checks
// that each header's tail leads to a root the signature covers, and that
// no header's proof serves another header or survives a change.
func TestSignBatch(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	g := &Signer{Key: priv}
	for _, n := range []int{1, 2, 3, 5, 8, 9, MaxBatch} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			batch := make([]*Req, n)
			for i := range batch {
				batch[i] = &Req{Body: []byte(fmt.Sprintf("header body %d", i))}
			}
			g.signBatch(batch)
			depth := 0
			for 1<<depth < n {
				depth++
			}
			verify := func(body []byte, tail []byte) bool {
				d, i := int(tail[0]), int(tail[1])
				proof, sig := tail[2:2+32*d], tail[2+32*d:]
				root := Root(body, i, proof)
				return ed25519.Verify(pub, append([]byte(rootCtx), root[:]...), sig)
			}
			for i, r := range batch {
				if len(r.Proof) != 2+32*depth+ed25519.SignatureSize || int(r.Proof[0]) != depth || int(r.Proof[1]) != i {
					t.Fatalf("tail of header %d: %d bytes, depth %d, index %d; want %d bytes, depth %d, index %d",
						i, len(r.Proof), r.Proof[0], r.Proof[1], 2+32*depth+ed25519.SignatureSize, depth, i)
				}
				if !verify(r.Body, r.Proof) {
					t.Fatalf("header %d of %d does not verify", i, n)
				}
				if !verify(r.Body, r.Proof) || verify(append(bytes.Clone(r.Body), 'x'), r.Proof) {
					t.Fatalf("header %d verifies with another body", i)
				}
				if n > 1 {
					other := batch[(i+1)%n]
					if verify(other.Body, r.Proof) {
						t.Fatalf("header %d's proof verifies header %d", i, (i+1)%n)
					}
					moved := bytes.Clone(r.Proof)
					moved[1] ^= 1
					if verify(r.Body, moved) {
						t.Fatalf("header %d verifies at another index", i)
					}
				}
			}
		})
	}
}

// TestNew: a Signer's ID is KeyID of its public key, and a key that is
// not an Ed25519 one is refused.
func TestNew(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	g, err := New(priv)
	if err != nil || g.ID != KeyID(pub) || !g.Public().Equal(pub) {
		t.Fatalf("New(ed25519 key) = %+v, %v; want ID %x", g, err, KeyID(pub))
	}
	sum := sha256.Sum256(pub)
	if KeyID(pub) != [8]byte(sum[:8]) {
		t.Errorf("KeyID() = %x, want the first 8 bytes of SHA-256 of the public key, %x", KeyID(pub), sum[:8])
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, err := New(ec); err == nil {
		t.Errorf("New(ECDSA key) = nil error, want a refusal")
	}
}
