package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"time"
)

// The modes that seal and open 32-byte keys through a protocol of their
// own, the k8s modes (the KMS plugin's Encrypt and Decrypt) and the aws
// modes (AWS KMS's), share the shape of their calls: an encrypt mode
// seals a new random key a call, a decrypt mode opens keys sealed first
// and checks each against the key sealed.

// sealer is the two calls of such a protocol, to a target's node.
type sealer interface {
	// seal seals a new random key on node and returns it with what the
	// protocol answered, and the call's latency.
	seal(ctx context.Context, node int) (sealedKey, time.Duration, error)
	// open opens s on node and checks that it opens to s's key (else
	// errMismatch); it returns the call's latency.
	open(ctx context.Context, node int, s sealedKey) (time.Duration, error)
}

// sealedKey is a key (a data key, a plaintext) and what the protocol
// answered for it.
type sealedKey struct {
	plaintext, ciphertext []byte
	keyID                 string
}

// opened is the error of an open of s that answered got, and err: err,
// or errMismatch when got is not s's key.
func (s sealedKey) opened(got []byte, err error) error {
	if err == nil && !bytes.Equal(got, s.plaintext) {
		return errMismatch
	}
	return err
}

// sealedPools are what a decrypt mode opens: node i opens those of
// pools[i % len(pools)].
type sealedPools [][]sealedKey

// pick returns one of node's sealed keys, at random.
func (p sealedPools) pick(node int, rng *mathrand.Rand) sealedKey {
	keys := p[node%len(p)]
	return keys[rng.IntN(len(keys))]
}

// answerError is an answer that does not do what was asked; its text is
// the name its calls fail under.
type answerError string

func (e answerError) Error() string { return string(e) }

const (
	errMismatch   answerError = "mismatch"                // Decrypt opened to another key than was sealed
	errIncomplete answerError = "no ciphertext or key_id" // Encrypt answered without one
)

// sealOrOpen is one call of such a mode to node: s seals a new key or,
// with pools (a decrypt mode), opens one of node's at random. A call
// that did what was asked, or whose answer did not (an answerError), was
// answered; failed tells the outcome of the protocol's other errors.
func sealOrOpen(ctx context.Context, s sealer, pools sealedPools, node int, rng *mathrand.Rand, failed func(error) outcome) outcome {
	var (
		latency time.Duration
		err     error
	)
	if len(pools) == 0 {
		_, latency, err = s.seal(ctx, node)
	} else {
		latency, err = s.open(ctx, node, pools.pick(node, rng))
	}
	var bad answerError
	switch {
	case err == nil:
		return outcome{answered: true, latency: latency}
	case errors.As(err, &bad):
		return outcome{answered: true, latency: latency, failure: string(bad)}
	}
	out := failed(err)
	out.latency = latency
	return out
}

// sealPools makes the pool of a decrypt mode: -pool keys that s seals
// through t's first node, or through each node when they are apart,
// named what in the note that says so.
func (b *bench) sealPools(ctx context.Context, t target, what string, s sealer) (sealedPools, error) {
	var pools sealedPools
	for i, u := range firstOrEach(t) {
		t0 := time.Now()
		keys, err := makeAll(ctx, b.o.pool, b.o.concurrency, func(ctx context.Context) (sealedKey, error) {
			k, _, err := s.seal(ctx, i)
			return k, err
		})
		if err != nil {
			return nil, b.cause(ctx, fmt.Errorf("%s: %w", t.name, err))
		}
		pools = append(pools, keys)
		b.notePool(t, len(keys), what, u, t0)
	}
	return pools, nil
}
