// Package ids makes the identifiers of the service's records: 16 bytes,
// the first 6 the creation time in milliseconds and 10 random, as 32
// lower-case hex characters.
package ids

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// New returns a new identifier: 16 bytes, the first 6 the creation time in
// milliseconds and 10 random, as 32 lower-case hex characters. IDs made by
// one process strictly increase: an ID made in the same millisecond as the
// one before (or while the clock stood still or went back) is that ID plus
// one, so lists in ID order are in creation order and a page cursor never
// skips an item created after it.
func New(now time.Time) string {
	var b [16]byte
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(now.UnixMilli()))
	copy(b[:6], ts[2:])
	rand.Read(b[6:])
	idMu.Lock()
	if bytes.Compare(b[:], lastID[:]) <= 0 {
		b = lastID
		for i := len(b) - 1; i >= 0; i-- { // lastID + 1
			b[i]++
			if b[i] != 0 {
				break
			}
		}
	}
	lastID = b
	idMu.Unlock()
	return hex.EncodeToString(b[:])
}

var (
	idMu   sync.Mutex
	lastID [16]byte
)

// Len is the length of an identifier's text.
const Len = 32

// Parse decodes an identifier made by New.
func Parse(s string) ([16]byte, bool) {
	var b [16]byte
	if len(s) != 32 {
		return b, false
	}
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return b, false
	}
	return b, true
}
