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
	pool sync.Pool // of *macState
}

// macState is a keyed state with buffers of its own for the input and the
// MAC. A slice passed to a method of hash.Hash escapes to the heap, so sum
// passes only these: the caller's buffers (the stack array a MAC is
// appended to, the []byte of a string) stay where they are.
type macState struct {
	h   hash.Hash
	in  []byte
	out [sha256.Size]byte
}

// maxMACInput bounds the input buffer a pooled state keeps.
const maxMACInput = 4 << 10

func newMACKey(key [32]byte) *macKey {
	m := &macKey{}
	m.pool.New = func() any { return &macState{h: hmac.New(sha256.New, key[:])} }
	return m
}

// sum appends to dst the MAC of the concatenation of parts.
func (m *macKey) sum(dst []byte, parts ...[]byte) []byte {
	st := m.pool.Get().(*macState)
	st.in = st.in[:0]
	for _, p := range parts {
		st.in = append(st.in, p...)
	}
	st.h.Reset()
	st.h.Write(st.in)
	dst = append(dst, st.h.Sum(st.out[:0])...)
	if cap(st.in) > maxMACInput {
		st.in = nil
	}
	m.pool.Put(st)
	return dst
}
