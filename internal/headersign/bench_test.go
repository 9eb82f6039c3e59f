package headersign

import (
	"crypto/ed25519"
	"fmt"
	"testing"
)

// BenchmarkSign is the journal's signing of one batch's headers with a
// key held in the process: one Merkle tree and one signature per
// MaxBatch headers.
func BenchmarkSign(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(nil)
	g := &Signer{Key: priv}
	for _, n := range []int{1, MaxBatch, 4 * MaxBatch} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			reqs := make([]*Req, n)
			for i := range reqs {
				reqs[i] = &Req{Body: make([]byte, 83)}
			}
			b.ReportAllocs()
			for b.Loop() {
				g.Sign(reqs)
			}
		})
	}
}
