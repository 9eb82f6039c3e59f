package kms

import (
	"context"

	"github.com/ringkms/kms/internal/barrier"
)

// RootKey is the root of trust: the key that seals the store's root
// secret, the 32 bytes from which every key of the service is derived
// (docs/FORMAT.md section 8). The service asks it to seal or open that
// secret when it starts and when the store is rekeyed, never per call.
//
// A MasterKey, 32 bytes the process holds, is one RootKey; a key that
// never leaves a token (internal/hsm, kmsd -master-key-pkcs11) is another,
// and an embedding application may bring its own (a cloud KMS, say).
// Seal must bind its output to aad (an AEAD's associated data) and Open
// must refuse a sealed value that was altered or sealed with another aad
// or another key. Neither may log or keep the plaintext.
//
// It is internal/barrier's, under its public name: the barrier keeps the
// store's root secret (sys/root), the keys derived from it, the sealing
// and opening of every secret and the rekey; the domain hands it what
// only the domain knows (barrierOf).
type RootKey = barrier.RootKey

// noRootKey reports whether rk is no key at all: nil, or a zero MasterKey.
func noRootKey(rk RootKey) bool { return barrier.NoKey(rk) }

// barrierOf returns the barrier of st, with what the domain knows of it:
// the header signing key marks a store a service wrote, and proves that a
// master key's own bytes open it (signingKeyOpens); the records that
// hold sealed secrets are sealedRecords (rekey.go). adopted, when not
// nil, hears of a rekey the barrier follows.
func barrierOf(st Store, adopted func()) *barrier.Barrier {
	return barrier.New(barrier.Config{
		Store: st, Marks: [][]byte{keySigningActive}, Proof: signingKeyOpens,
		Sealed: sealedRecords, Adopted: adopted,
	})
}

// loadKeys returns the keys of st under rk, as the barrier opens them,
// for what reads a store without a Service (VerifyAudit, the tests).
func loadKeys(ctx context.Context, st Store, rk RootKey) (*barrier.Keys, error) {
	return barrierOf(st, nil).Load(ctx, rk)
}
