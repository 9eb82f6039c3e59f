package kms

import (
	"crypto/ed25519"
	"crypto/sha256"
)

// Headers are signed in batches. An Ed25519 signature costs as much CPU as
// the rest of an encrypt call, so the journal, which gathers the encrypt
// calls of a batch anyway, makes their headers the leaves of Merkle trees
// (of up to maxSignBatch leaves) and signs each root once. Each header
// carries its leaf's index and the sibling digests on the way up, from
// which anyone with the public key can recompute the root and check the
// signature (docs/FORMAT.md section 4):
//
//	leaf = SHA-256(0x00 || "ringkms-header-v1" || header body)
//	node = SHA-256(0x01 || left || right)
//	signature = Ed25519(signing key, "ringkms-header-root-v1" || root)
//
// A tree of n leaves has depth ceil(log2 n); leaves past n are 32 zero
// bytes. A header signed alone has depth 0: the root is its leaf.

// maxSignDepth bounds the tree: up to 16 headers per signature, 4
// sibling digests (128 bytes) per header.
const (
	maxSignDepth = 4
	maxSignBatch = 1 << maxSignDepth

	headerLeafCtx = "ringkms-header-v1"
	headerRootCtx = "ringkms-header-root-v1"
)

type signReq struct {
	body  []byte // the header's body; the signer writes its key ID into bytes 2..9
	proof []byte // depth, index, siblings, signature: the header's tail
}

// headerSigner signs the headers of a journal batch with one signing key.
// It is immutable: a rotation replaces it (signingkeys.go), and a batch
// signs every header with the signer it loaded, whose ID it writes into
// each body, so a header always names the key that signed it.
type headerSigner struct {
	id  [8]byte
	key ed25519.PrivateKey
}

// sign gives each request its tail, signing the batch in trees of up to
// maxSignBatch headers.
func (g *headerSigner) sign(reqs []*signReq) {
	for len(reqs) > 0 {
		n := min(len(reqs), maxSignBatch)
		g.signBatch(reqs[:n])
		reqs = reqs[n:]
	}
}

// signBatch builds the tree of the batch's headers, signs its root and
// gives each request its tail.
func (g *headerSigner) signBatch(batch []*signReq) {
	depth := 0
	for 1<<depth < len(batch) {
		depth++
	}
	// levels[0] are the leaves, padded with zero digests; levels[depth]
	// is the root.
	levels := make([][][32]byte, depth+1)
	levels[0] = make([][32]byte, 1<<depth)
	for i, r := range batch {
		copy(r.body[2:10], g.id[:])
		levels[0][i] = headerLeaf(r.body)
	}
	for l := 1; l <= depth; l++ {
		below := levels[l-1]
		levels[l] = make([][32]byte, len(below)/2)
		for i := range levels[l] {
			levels[l][i] = headerNode(&below[2*i], &below[2*i+1])
		}
	}
	root := levels[depth][0]
	sig := ed25519.Sign(g.key, append([]byte(headerRootCtx), root[:]...))
	// The tails share one allocation.
	tailLen := 2 + 32*depth + ed25519.SignatureSize
	tails := make([]byte, len(batch)*tailLen)
	for i, r := range batch {
		p := tails[i*tailLen : i*tailLen : (i+1)*tailLen]
		p = append(p, byte(depth), byte(i))
		for l, at := 0, i; l < depth; l, at = l+1, at/2 {
			p = append(p, levels[l][at^1][:]...)
		}
		r.proof = append(p, sig...)
	}
}

func headerLeaf(body []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write([]byte(headerLeafCtx))
	h.Write(body)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func headerNode(left, right *[32]byte) [32]byte {
	var b [65]byte
	b[0] = 1
	copy(b[1:], left[:])
	copy(b[33:], right[:])
	return sha256.Sum256(b[:])
}

// headerRoot climbs from the leaf of body at index to the root, with the
// sibling digests of proof (32 bytes each, from the leaf up).
func headerRoot(body []byte, index int, proof []byte) [32]byte {
	h := headerLeaf(body)
	for l := 0; len(proof) >= 32; l, proof = l+1, proof[32:] {
		sib := [32]byte(proof[:32])
		if index>>l&1 == 0 {
			h = headerNode(&h, &sib)
		} else {
			h = headerNode(&sib, &h)
		}
	}
	return h
}
