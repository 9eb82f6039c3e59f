// Package headersign signs headers in batches. An Ed25519 signature costs
// as much CPU as the rest of an encrypt call, so the journal, which
// gathers the encrypt calls of a batch anyway, makes their headers the
// leaves of Merkle trees (of up to MaxBatch leaves) and signs each root
// once. Each header carries its leaf's index and the sibling digests on
// the way up, from which anyone with the public key can recompute the root
// and check the signature (docs/FORMAT.md section 4):
//
//	leaf = SHA-256(0x00 || "ringkms-header-v1" || header body)
//	node = SHA-256(0x01 || left || right)
//	signature = Ed25519(signing key, "ringkms-header-root-v1" || root)
//
// A tree of n leaves has depth ceil(log2 n); leaves past n are 32 zero
// bytes. A header signed alone has depth 0: the root is its leaf.
package headersign

import (
	"crypto/ed25519"
	"crypto/sha256"
)

// MaxDepth bounds the tree: up to MaxBatch headers per signature,
// MaxDepth sibling digests (128 bytes) per header.
const (
	MaxDepth = 4
	MaxBatch = 1 << MaxDepth

	leafCtx = "ringkms-header-v1"
	rootCtx = "ringkms-header-root-v1"
)

// Req is one header to sign.
type Req struct {
	Body  []byte // the header's body; the signer writes its key ID into bytes 2..9
	Proof []byte // depth, index, siblings, signature: the header's tail, set by Sign
}

// Signer signs headers with one signing key. It is immutable: a rotation
// replaces it, and a batch signs every header with the signer it loaded,
// whose ID it writes into each body, so a header always names the key
// that signed it.
type Signer struct {
	ID  [8]byte
	Key ed25519.PrivateKey
}

// Sign gives each request its tail, signing the batch in trees of up to
// MaxBatch headers.
func (g *Signer) Sign(reqs []*Req) {
	for len(reqs) > 0 {
		n := min(len(reqs), MaxBatch)
		g.signBatch(reqs[:n])
		reqs = reqs[n:]
	}
}

// signBatch builds the tree of the batch's headers, signs its root and
// gives each request its tail.
func (g *Signer) signBatch(batch []*Req) {
	depth := 0
	for 1<<depth < len(batch) {
		depth++
	}
	// levels[0] are the leaves, padded with zero digests; levels[depth]
	// is the root.
	levels := make([][][32]byte, depth+1)
	levels[0] = make([][32]byte, 1<<depth)
	for i, r := range batch {
		copy(r.Body[2:10], g.ID[:])
		levels[0][i] = leaf(r.Body)
	}
	for l := 1; l <= depth; l++ {
		below := levels[l-1]
		levels[l] = make([][32]byte, len(below)/2)
		for i := range levels[l] {
			levels[l][i] = node(&below[2*i], &below[2*i+1])
		}
	}
	root := levels[depth][0]
	sig := ed25519.Sign(g.Key, append([]byte(rootCtx), root[:]...))
	// The tails share one allocation.
	tailLen := 2 + 32*depth + ed25519.SignatureSize
	tails := make([]byte, len(batch)*tailLen)
	for i, r := range batch {
		p := tails[i*tailLen : i*tailLen : (i+1)*tailLen]
		p = append(p, byte(depth), byte(i))
		for l, at := 0, i; l < depth; l, at = l+1, at/2 {
			p = append(p, levels[l][at^1][:]...)
		}
		r.Proof = append(p, sig...)
	}
}

// Verify reports whether sig, the signature of the root that the header
// body at index and the sibling digests of proof lead to, verifies under
// pub.
func Verify(pub ed25519.PublicKey, body []byte, index int, proof, sig []byte) bool {
	root := Root(body, index, proof)
	return ed25519.Verify(pub, append([]byte(rootCtx), root[:]...), sig)
}

// Root climbs from the leaf of body at index to the root, with the
// sibling digests of proof (32 bytes each, from the leaf up).
func Root(body []byte, index int, proof []byte) [32]byte {
	h := leaf(body)
	for l := 0; len(proof) >= 32; l, proof = l+1, proof[32:] {
		sib := [32]byte(proof[:32])
		if index>>l&1 == 0 {
			h = node(&h, &sib)
		} else {
			h = node(&sib, &h)
		}
	}
	return h
}

func leaf(body []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write([]byte(leafCtx))
	h.Write(body)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func node(left, right *[32]byte) [32]byte {
	var b [65]byte
	b[0] = 1
	copy(b[1:], left[:])
	copy(b[33:], right[:])
	return sha256.Sum256(b[:])
}
