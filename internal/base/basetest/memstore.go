package basetest

import (
	"context"
	"maps"
	"sync"

	"github.com/ringkms/kms/internal/base"
)

// MemStore is an in-memory Store over a MemTxn, for the tests of a
// mechanism that takes a Store: one transaction at a time, and an Update
// whose function fails leaves nothing written. It has no Trail.
type MemStore struct {
	mu   sync.Mutex
	data MemTxn
}

var _ base.Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{data: MemTxn{}} }

// View runs fn on the store's contents; what fn writes is dropped.
func (s *MemStore) View(_ context.Context, fn func(base.Txn) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fn(maps.Clone(s.data))
}

// Update runs fn on a copy of the store's contents and keeps the copy
// when fn returns nil.
func (s *MemStore) Update(_ context.Context, fn func(base.Txn) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := maps.Clone(s.data)
	if err := fn(tx); err != nil {
		return err
	}
	s.data = tx
	return nil
}

// UpdateNoSync is Update.
func (s *MemStore) UpdateNoSync(ctx context.Context, fn func(base.Txn) error) error {
	return s.Update(ctx, fn)
}

// Trail returns nil: a MemStore keeps no trail.
func (s *MemStore) Trail() base.Trail { return nil }

// Writable returns nil.
func (s *MemStore) Writable(context.Context) error { return nil }

// Close does nothing.
func (s *MemStore) Close() error { return nil }

// Get returns the value of key, nil when it is missing.
func (s *MemStore) Get(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[key]
}

// Snapshot returns a copy of the store's contents.
func (s *MemStore) Snapshot() MemTxn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.data)
}
