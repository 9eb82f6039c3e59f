package kms

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// macKey computes HMAC-SHA256 under one key. It reuses keyed states:
// hmac.New allocates two SHA-256 states and runs the key schedule, and
// every encrypt call makes a hash, a header and an activity record MAC.
type macKey struct {
	pool sync.Pool
}

func newMACKey(key [32]byte) *macKey {
	m := &macKey{}
	m.pool.New = func() any { return hmac.New(sha256.New, key[:]) }
	return m
}

// sum appends to dst the MAC of the concatenation of parts.
func (m *macKey) sum(dst []byte, parts ...[]byte) []byte {
	h := m.pool.Get().(hash.Hash)
	h.Reset()
	for _, p := range parts {
		h.Write(p)
	}
	dst = h.Sum(dst)
	m.pool.Put(h)
	return dst
}
