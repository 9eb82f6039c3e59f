// Package schedule is a time-ordered index of what falls due when: the
// destructions of keys at their time and the rotations of rings by
// period share it, each under a prefix of its own.
//
// An entry is a key alone (its value is empty): the prefix, the time it
// falls due (unix milliseconds, big-endian, so that the store's order is
// time order), and two IDs apart by a zero byte. A pass reads the entries
// that are due and one more, never the whole index.
package schedule

import (
	"bytes"
	"encoding/binary"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/base"
)

// Index is a schedule under a prefix of the store's keys.
type Index struct {
	Prefix []byte
}

// Key is the entry of the pair (a, b), due at at (unix milliseconds).
// Neither ID may hold a zero byte.
func (x Index) Key(at int64, a, b string) []byte {
	k := make([]byte, 0, len(x.Prefix)+8+len(a)+1+len(b))
	k = append(k, x.Prefix...)
	k = binary.BigEndian.AppendUint64(k, uint64(at))
	k = append(k, a...)
	k = append(k, 0)
	return append(k, b...)
}

// Parse splits an entry of x: when it falls due and its two IDs; ok is
// false for a key that is not an entry of x.
func (x Index) Parse(k []byte) (at int64, a, b string, ok bool) {
	if !bytes.HasPrefix(k, x.Prefix) {
		return 0, "", "", false
	}
	rest := k[len(x.Prefix):]
	if len(rest) < 8 {
		return 0, "", "", false
	}
	at = int64(binary.BigEndian.Uint64(rest[:8]))
	a, b, ok = strings.Cut(string(rest[8:]), "\x00")
	return at, a, b, ok
}

// Due returns, as tx sees the index, the entries due by now (unix
// milliseconds), in time order and at most limit of them, and when the
// first entry not yet due falls due (zero: there is none, or the limit
// stopped the scan first). An entry that Parse rejects is returned as
// due, so that the caller drops it rather than trip over it each pass.
func (x Index) Due(tx base.Txn, limit int, now int64) (due [][]byte, next time.Time, err error) {
	err = tx.Scan(base.ScanOptions{Prefix: x.Prefix, KeysOnly: true}, func(k, _ []byte) (bool, error) {
		if at, _, _, ok := x.Parse(k); ok && at > now {
			next = time.UnixMilli(at)
			return false, nil
		}
		due = append(due, bytes.Clone(k))
		return len(due) < limit, nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return due, next, nil
}
