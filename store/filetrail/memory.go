package filetrail

import (
	"sync"

	"github.com/ringkms/kms"
)

var _ kms.Trail = (*Memory)(nil)

// Memory is a kms.Trail held in memory, for stores that keep nothing on
// disk: its records last as long as the value. It has the semantics of
// Trail, the limit of MaxRecordSize included, and is safe for concurrent
// use.
type Memory struct {
	mu   sync.RWMutex
	recs [][]byte // recs[i] is record i+1; never changed once appended
}

// NewMemory returns an empty in-memory trail.
func NewMemory() *Memory { return &Memory{} }

// Len returns the number of records.
func (m *Memory) Len() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return uint64(len(m.recs))
}

// Check reports whether the trail holds the records 1 to want: nil, or an
// error of kind Unprocessable saying where it ends.
func (m *Memory) Check(want uint64) error {
	if n := m.Len(); want > n {
		return damage("trail ends after record %d: the records from %d on are missing", n, n+1)
	}
	return nil
}

// Append appends copies of recs. It rejects a record over MaxRecordSize
// with an error of kind TooLarge, appending nothing.
func (m *Memory) Append(recs [][]byte) error {
	size := 0
	for i, rec := range recs {
		if len(rec) > MaxRecordSize {
			return kms.Errorf(kms.KindTooLarge, "trail record %d of the batch is %d bytes, over the limit of %d", i, len(rec), MaxRecordSize)
		}
		size += len(rec)
	}
	buf := make([]byte, 0, size) // one allocation per batch
	copies := make([][]byte, len(recs))
	for i, rec := range recs {
		buf = append(buf, rec...)
		copies[i] = buf[len(buf)-len(rec) : len(buf) : len(buf)]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, copies...)
	return nil
}

// Scan calls fn with the records from seq from onwards (from 0 counts as
// 1), up to the last one appended when Scan began, until fn returns false
// or an error; fn's error is returned unchanged. fn gets a copy of each
// record, reused after fn returns, so that it cannot change the trail.
func (m *Memory) Scan(from uint64, fn func(seq uint64, rec []byte) (more bool, err error)) error {
	from = max(from, 1)
	m.mu.RLock()
	recs := m.recs // later appends never touch this slice's elements
	m.mu.RUnlock()
	buf := []byte{} // not nil: an empty record is empty, as from Trail
	for seq := from; seq <= uint64(len(recs)); seq++ {
		buf = append(buf[:0], recs[seq-1]...)
		if more, err := fn(seq, buf); err != nil || !more {
			return err
		}
	}
	return nil
}
