package kms

import (
	"context"

	"github.com/ringkms/kms/internal/base"
)

// The storage contract is defined in internal/base, which the mechanisms
// under internal/ (the journal among them) share with this package; these
// are the same types under their public names. Their documentation, and
// what a backend must do, is in internal/base; every backend must pass the
// conformance suites in store/storetest.

// Store is the storage the Service runs on: a small, ordered, transactional
// key-value store. The Service owns the key layout and every secondary
// index; a backend only keeps bytes in order. The Store is untrusted: it
// only ever sees sealed secrets and digests of credentials.
type Store = base.Store

// Txn is one transaction of a Store. It is not safe for concurrent use and
// is valid only inside the function it was passed to.
type Txn = base.Txn

// ScanOptions selects a range of keys for Txn.Scan.
type ScanOptions = base.ScanOptions

// Prefetcher is a Txn that can read many keys at once (optional).
type Prefetcher = base.Prefetcher

// Eraser is a Store whose files may keep earlier versions of a value after
// it is overwritten, and that can erase them (optional).
type Eraser = base.Eraser

// Bounded is a Store whose writes answer within a bound while its backend
// is healthy; past it, the Service answers the writes queued behind a
// stalled one as unavailable (optional).
type Bounded = base.Bounded

// Trail is the append-only log that holds the activity trail.
type Trail = base.Trail

// SharedTrail is a Trail that several processes append to, each through a
// transaction of the Store they share.
type SharedTrail = base.SharedTrail

// Watcher is a Store that other processes write too, and that tells each
// process what the others wrote, so that its caches stay coherent.
type Watcher = base.Watcher

// prefetch reads keys into tx when it is a Prefetcher (base.Prefetch).
func prefetch(tx Txn, keys [][]byte) error { return base.Prefetch(tx, keys) }

// viewOne reads one thing in a read-only transaction of st: what read
// returns of it.
func viewOne[T any](ctx context.Context, st Store, read func(Txn) (T, error)) (T, error) {
	var out T
	err := st.View(ctx, func(tx Txn) error {
		var err error
		out, err = read(tx)
		return err
	})
	return out, err
}
