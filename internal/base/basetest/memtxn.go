// Package basetest holds what the tests of the mechanisms share: an
// ordered, in-memory transaction of the storage contract, enough for a
// mechanism that reads and writes through a base.Txn.
package basetest

import (
	"bytes"
	"maps"
	"slices"

	"github.com/ringkms/kms/internal/base"
)

// MemTxn is an ordered in-memory Txn: a map of keys to values, scanned in
// byte order. It keeps no snapshot: what a test writes, every later read
// sees.
type MemTxn map[string][]byte

var _ base.Txn = MemTxn{}

// Get returns the value of k, or an error of kind NotFound.
func (m MemTxn) Get(k []byte) ([]byte, error) {
	if v, ok := m[string(k)]; ok {
		return v, nil
	}
	return nil, base.ErrNotFound
}

// Set stores a copy of v under k.
func (m MemTxn) Set(k, v []byte) error { m[string(k)] = bytes.Clone(v); return nil }

// Delete removes k.
func (m MemTxn) Delete(k []byte) error { delete(m, string(k)); return nil }

// Scan calls fn on the keys under o.Prefix from o.Start on, in byte order
// (reverse byte order with o.Reverse), until fn returns false or an error.
func (m MemTxn) Scan(o base.ScanOptions, fn func(k, v []byte) (bool, error)) error {
	keys := slices.Sorted(maps.Keys(m))
	if o.Reverse {
		slices.Reverse(keys)
	}
	for _, k := range keys {
		if !bytes.HasPrefix([]byte(k), o.Prefix) {
			continue
		}
		if o.Start != nil && (!o.Reverse && k < string(o.Start) || o.Reverse && k > string(o.Start)) {
			continue
		}
		if more, err := fn([]byte(k), m[k]); err != nil || !more {
			return err
		}
	}
	return nil
}
