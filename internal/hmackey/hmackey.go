// Package hmackey computes HMAC-SHA256 under one key, reusing keyed
// states: hmac.New allocates two SHA-256 states and runs the key schedule,
// and every encrypt call makes a hash, a header and an activity record MAC.
package hmackey

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// Key computes HMAC-SHA256 under one key. It is safe for concurrent use.
type Key struct {
	pool sync.Pool // of *state
}

// state is a keyed state with buffers of its own for the input and the
// MAC. A slice passed to a method of hash.Hash escapes to the heap, so Sum
// passes only these: the caller's buffers (the stack array a MAC is
// appended to, the []byte of a string) stay where they are.
type state struct {
	h   hash.Hash
	in  []byte
	out [sha256.Size]byte
}

// MaxInput bounds the input buffer a pooled state keeps.
const MaxInput = 4 << 10

// New returns a Key for key.
func New(key [32]byte) *Key {
	m := &Key{}
	m.pool.New = func() any { return &state{h: hmac.New(sha256.New, key[:])} }
	return m
}

// Sum appends to dst the MAC of the concatenation of parts.
func (m *Key) Sum(dst []byte, parts ...[]byte) []byte {
	st := m.pool.Get().(*state)
	st.in = st.in[:0]
	for _, p := range parts {
		st.in = append(st.in, p...)
	}
	st.h.Reset()
	st.h.Write(st.in)
	dst = append(dst, st.h.Sum(st.out[:0])...)
	if cap(st.in) > MaxInput {
		st.in = nil
	}
	m.pool.Put(st)
	return dst
}
