package base

import (
	"context"
	"time"
)

// Store is the storage the Service runs on: a small, ordered, transactional
// key-value store. The Service owns the key layout and every secondary index;
// a backend only keeps bytes in order. The Store is untrusted: it only ever
// sees sealed secrets and digests of credentials.
//
// A Store is safe for concurrent use. Every backend must pass the conformance
// suite in store/storetest.
type Store interface {
	// View runs fn in a read-only transaction that sees one consistent
	// snapshot of the store.
	View(ctx context.Context, fn func(Txn) error) error

	// Update runs fn in a read-write transaction and commits it durably:
	// when Update returns nil, the writes survive a crash of the process
	// and of the machine. Serialisability conflicts with concurrent
	// transactions are retried by the backend, so fn may run more than
	// once and must have no effects outside the transaction. When every
	// retry conflicts, Update returns an error of kind Conflict.
	Update(ctx context.Context, fn func(Txn) error) error

	// UpdateNoSync is Update without the wait for durability: it returns
	// once the commit is visible to later transactions, and a crash of
	// the machine may lose it, whole (never in part). A crash of the
	// process alone must not. The Service uses it only for what it can
	// rebuild from the Trail: the trail's indexes.
	UpdateNoSync(ctx context.Context, fn func(Txn) error) error

	// Trail returns the store's activity trail. It is opened and closed
	// with the Store.
	Trail() Trail

	// Writable reports whether the store and its Trail can take writes
	// now: nil, or an error that says why not, of kind NoSpace when a
	// disk they are on is below the free space the backend keeps in
	// reserve. It writes nothing and is cheap: the Service asks before
	// each batch of writes, and writes nothing while it answers an error.
	Writable(ctx context.Context) error

	// Close flushes and releases the store. It is safe to call once all
	// transactions have returned.
	Close() error
}

// Txn is one transaction of a Store. It is not safe for concurrent use and
// is valid only inside the function it was passed to.
type Txn interface {
	// Get returns a copy of the value stored under key, owned by the
	// caller, or an error of kind NotFound (errors.Is(err, ErrNotFound)).
	Get(key []byte) ([]byte, error)

	// Set stores value under key. The Txn copies neither slice until
	// commit, so the caller must not modify them afterwards. A read-only
	// transaction returns an error of kind Invalid.
	Set(key, value []byte) error

	// Delete removes key. Deleting a missing key is not an error.
	Delete(key []byte) error

	// Scan calls fn for each key in the range given by opts, in byte
	// order (or reverse byte order), until fn returns false or an error.
	// The key and value slices passed to fn are valid only during that
	// call; copy them to keep them. Scan sees the transaction's own writes
	// when the backend supports it (Badger does). Scan checks the
	// transaction's context between items.
	Scan(opts ScanOptions, fn func(key, value []byte) (more bool, err error)) error
}

// Prefetcher is a Txn that can read several keys at once, cheaper than
// one Get after another when every read crosses a network. Prefetch reads
// keys (those it can) into the transaction: a later Get of one of them
// answers from what was read, as of the transaction's snapshot, without
// asking the store again. It is optional; the Service uses it, when the
// Txn has it, for the reads it knows a transaction will make.
type Prefetcher interface {
	Prefetch(keys [][]byte) error
}

// Prefetch reads keys into tx when it is a Prefetcher; otherwise the
// Gets that follow read them one by one.
func Prefetch(tx Txn, keys [][]byte) error {
	if p, ok := tx.(Prefetcher); ok && len(keys) > 0 {
		return p.Prefetch(keys)
	}
	return nil
}

// ScanOptions selects a range of keys for Txn.Scan.
type ScanOptions struct {
	// Prefix limits the scan to keys that start with it. Empty means the
	// whole store.
	Prefix []byte

	// Start is where the scan begins, inclusive. It must start with
	// Prefix when both are set. Forward scans begin at the first key >=
	// Start; reverse scans at the last key <= Start. Empty means the
	// beginning of the range (the end of it, for reverse scans).
	Start []byte

	// Reverse scans from the highest key to the lowest.
	Reverse bool

	// KeysOnly skips reading values; fn receives a nil value.
	KeysOnly bool
}

// Eraser is a Store whose files may keep earlier versions of a value after
// it is overwritten (an LSM tree's older tables, a write-ahead log). Erase
// returns once the store's files hold no version of the values of keys but
// the current one, or an error; the Service calls it after it destroys
// key material (destroy.go in package kms) and calls it again, later, after an error.
// It is optional: a Store without it keeps no earlier version it could
// reach, or documents what it keeps.
type Eraser interface {
	Erase(ctx context.Context, keys [][]byte) error
}

// Bounded is a Store whose writes answer within a bound while its backend
// is healthy (a database behind a network, with its round trips bounded).
// A write that has taken longer has met a backend gone silent, or is
// finding out whether a commit whose answer was lost took place; the
// Service then answers the writes queued behind it as unavailable rather
// than let them wait. Bound returns the bound, or 0 for none.
type Bounded interface {
	Bound() time.Duration
}
