//go:build cgo

package headersign_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"

	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hsm"
	"github.com/ringkms/kms/internal/hsmtest/hsmkey"
)

// TestSignInToken signs batches with a key pair in a SoftHSM2 token: the
// tails verify as those of a key held here do; when the token fails,
// every header of the batch is left unsigned, and Sign says why.
func TestSignInToken(t *testing.T) {
	tk, key := hsmkey.Signing(t)
	g, err := headersign.New(key)
	if err != nil {
		t.Fatalf("New(token key) = %v", err)
	}
	pub := key.Public().(ed25519.PublicKey)
	if g.ID != headersign.KeyID(pub) {
		t.Fatalf("New(token key).ID = %x, want %x", g.ID, headersign.KeyID(pub))
	}
	batch := func(n int) []*headersign.Req {
		reqs := make([]*headersign.Req, n)
		for i := range reqs {
			reqs[i] = &headersign.Req{Body: fmt.Appendf(make([]byte, 10), "header body %d", i)}
		}
		return reqs
	}
	for _, n := range []int{1, 5, headersign.MaxBatch + 3} {
		reqs := batch(n)
		if err := g.Sign(reqs); err != nil {
			t.Fatalf("Sign(%d headers) = %v", n, err)
		}
		for i, r := range reqs {
			d := int(r.Proof[0])
			if [8]byte(r.Body[2:10]) != g.ID || !headersign.Verify(pub, r.Body, int(r.Proof[1]), r.Proof[2:2+32*d], r.Proof[2+32*d:]) {
				t.Fatalf("header %d of %d signed in the token does not verify", i, n)
			}
		}
	}

	tk.Close()
	reqs := batch(3)
	if err := g.Sign(reqs); !errors.Is(err, hsm.ErrClosed) {
		t.Fatalf("Sign() with a closed token = %v, want ErrClosed", err)
	}
	for i, r := range reqs {
		if r.Proof != nil {
			t.Errorf("header %d after a failed signature has the tail %x, want none", i, r.Proof)
		}
	}
	var none *headersign.Signer
	if err := none.Sign(reqs); !errors.Is(err, headersign.ErrNoKey) || reqs[0].Proof != nil {
		t.Errorf("nil Signer: Sign() = %v, tail %x; want ErrNoKey and none", err, reqs[0].Proof)
	}
}
