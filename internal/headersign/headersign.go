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
//
// # Keys
//
// The key is an ed25519.PrivateKey the process holds, which signs here,
// or any other crypto.Signer whose public key is an ed25519.PublicKey: a
// key in a PKCS#11 token, which signs there (internal/hsm). Only a key
// held elsewhere can fail to sign; the headers of a tree it failed are
// left unsigned (no Proof), and Sign returns why.
package headersign

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
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
	Proof []byte // depth, index, siblings, signature: the header's tail, set by Sign; nil when it failed
}

// Signer signs headers with one signing key. It is immutable: a rotation
// replaces it, and a batch signs every header with the signer it loaded,
// whose ID it writes into each body, so a header always names the key
// that signed it.
type Signer struct {
	ID [8]byte
	// Key is an ed25519.PrivateKey, which signs in the process, or a
	// crypto.Signer held elsewhere (a token) whose Public is an
	// ed25519.PublicKey and which signs pure Ed25519 (crypto.Hash(0)).
	Key crypto.Signer
}

// ErrNoKey is what a nil Signer answers, signing nothing.
var ErrNoKey = errors.New("no header signing key")

// New returns the Signer of key, whose ID is KeyID of its public key. It
// fails when that public key is not an Ed25519 one.
func New(key crypto.Signer) (*Signer, error) {
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("the header signing key is a %T, not an Ed25519 key", key.Public())
	}
	return &Signer{ID: KeyID(pub), Key: key}, nil
}

// KeyID is the ID of a signing key, as headers carry it: the first 8
// bytes of SHA-256 of its public key.
func KeyID(pub ed25519.PublicKey) [8]byte {
	sum := sha256.Sum256(pub)
	return [8]byte(sum[:8])
}

// Public returns the signer's public key.
func (g *Signer) Public() ed25519.PublicKey {
	return g.Key.Public().(ed25519.PublicKey)
}

// Sign gives each request its tail, signing the batch in trees of up to
// MaxBatch headers. When the key fails to sign a tree, the requests of
// that tree get no tail (a nil Proof), and Sign returns the first error
// after trying the other trees. A nil Signer signs nothing and answers
// ErrNoKey.
func (g *Signer) Sign(reqs []*Req) error {
	if g == nil {
		for _, r := range reqs {
			r.Proof = nil
		}
		return ErrNoKey
	}
	var first error
	for len(reqs) > 0 {
		n := min(len(reqs), MaxBatch)
		if err := g.signBatch(reqs[:n]); err != nil && first == nil {
			first = err
		}
		reqs = reqs[n:]
	}
	return first
}

// signElsewhere has a key held elsewhere sign msg, asking a second time
// when it fails once (a token that dropped a session answers on a new
// one).
func (g *Signer) signElsewhere(msg []byte) ([]byte, error) {
	sig, err := g.Key.Sign(nil, msg, crypto.Hash(0))
	if err != nil {
		sig, err = g.Key.Sign(nil, msg, crypto.Hash(0))
	}
	if err == nil && len(sig) != ed25519.SignatureSize {
		err = fmt.Errorf("the header signing key answered %d bytes, not an Ed25519 signature", len(sig))
	}
	return sig, err
}

// signBatch builds the tree of the batch's headers, signs its root and
// gives each request its tail, or returns the error that kept the key
// from signing, the requests left without a tail.
func (g *Signer) signBatch(batch []*Req) error {
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
	msg := append([]byte(rootCtx), root[:]...)
	var sig []byte
	var err error
	if priv, ok := g.Key.(ed25519.PrivateKey); ok {
		// The key held here signs with neither an interface call nor
		// an allocation more than before keys could be held elsewhere.
		sig = ed25519.Sign(priv, msg)
	} else {
		sig, err = g.signElsewhere(bytes.Clone(msg)) // msg stays on the stack
	}
	if err != nil {
		for _, r := range batch {
			r.Proof = nil
		}
		return err
	}
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
	return nil
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
