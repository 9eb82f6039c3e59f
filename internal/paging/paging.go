// Package paging walks the store a page at a time behind sealed cursors:
// one pagination for every list and search of the service.
//
// A cursor is the store key of the last item of a page (with the end of
// the first page, for a scan with FixUntil), sealed with AES-256-GCM under
// a master-derived key and bound (as associated data) to the list it
// belongs to and the filters it was made with; it travels as unpadded
// URL-safe base64. A cursor that was altered, or that is used with
// another list or other filters, is an Invalid error.
package paging

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/seal"
)

// Pager seals and opens cursors, and walks pages.
type Pager struct {
	sealer *seal.Sealer
}

// New returns a Pager whose cursors are sealed by sealer.
func New(sealer *seal.Sealer) *Pager { return &Pager{sealer: sealer} }

// Result is what a walk found: the items emitted, whether more match
// after them, and the cursor of the next page when they do.
type Result struct {
	Count      int
	HasMore    bool
	NextCursor string
}

// b64url decodes cursors strictly: a text with non-zero padding bits is
// refused, so each cursor has exactly one spelling.
var b64url = base64.RawURLEncoding.Strict()

func cursorAAD(scope string) []byte {
	sum := sha256.Sum256([]byte(scope))
	return append([]byte("ringkms/cursor/v1/"), sum[:]...)
}

func (p *Pager) seal(scope string, last []byte) string {
	return base64.RawURLEncoding.EncodeToString(p.sealer.Seal(last, cursorAAD(scope)))
}

// Open opens cursor, made for scope, and returns its state: an Invalid
// error when it was altered or made for another scope.
func (p *Pager) Open(scope, cursor string) ([]byte, error) {
	raw, err := b64url.DecodeString(cursor)
	if err == nil {
		var last []byte
		if last, err = p.sealer.Open(raw, cursorAAD(scope)); err == nil {
			return last, nil
		}
	}
	return nil, base.Errorf(base.KindInvalid, "invalid cursor: it was altered, or made for another list or other filters")
}

// Scan describes one paged walk of the store for Pager.Scan.
type Scan struct {
	// Scope names the list and its filters: a cursor made for one scope
	// is refused by every other.
	Scope string
	// Prefix bounds the walk: every key visited starts with it.
	Prefix []byte
	// Then are more prefixes walked after Prefix, in order, as one list.
	Then [][]byte
	// From is the first key of the first page (inclusive); nil means the
	// start of Prefix. Until, when set, ends the walk before that key.
	// Both are for a walk of one prefix.
	From, Until []byte
	// FixUntil seals the first page's until into the cursors: the pages
	// after it end there too, or before their own until when that comes
	// first. So a sequence of pages returns nothing added past the end
	// the list had at its first page.
	FixUntil bool
	// Match reports whether the item belongs in the results; nil means
	// every item does. It may be called on an item that is then not
	// emitted (the look-ahead for HasMore).
	Match func(key, value []byte) (bool, error)
	// Size returns the bytes a matching item counts against
	// MaxPageBytes, before Emit is called for it (if it fits); nil means
	// len(value), right for lists whose values are the items as stored.
	// A list of index entries sets it to the size of the record it reads.
	Size func(key, value []byte) int
	// Emit adds a matching item to the page.
	Emit func(key, value []byte) error
	// Walk, when set, lists the items in place of a store scan of
	// Prefix (Then is not used): it calls fn with each item from the key
	// start on (inclusive; nil for the first item), in key order, until fn
	// returns false or an error. Every key starts with Prefix.
	Walk func(start []byte, fn func(key, value []byte) (bool, error)) error
}

// Scan pages through the keys of ps in order, resuming after cursor's
// key ("" for the first page). The page ends after limit matching items,
// or before the matching item that would take it past maxBytes (a first
// item always fits); Scan then looks ahead for one more match to set HasMore, so HasMore is
// exact even with filters. An item left out by the budget is the first
// of the next page.
//
// The cursor holds the store key of the last item returned, so items
// inserted or deleted while a client pages neither repeat nor shift the
// pages: each key is visited at most once per sequence of pages.
func (p *Pager) Scan(ctx context.Context, tx base.Txn, limit, maxBytes int, cursor string, ps Scan) (Result, error) {
	var err error
	prefixes := append([][]byte{ps.Prefix}, ps.Then...)
	first, start := 0, ps.From
	if cursor != "" {
		state, err := p.Open(ps.Scope, cursor)
		if err != nil {
			return Result{}, err
		}
		last := state
		if ps.FixUntil {
			var until []byte
			if last, until, err = splitCursorState(state); err != nil {
				return Result{}, err
			}
			if len(until) > 0 && (ps.Until == nil || bytes.Compare(until, ps.Until) < 0) {
				ps.Until = until
			}
		}
		first = -1
		for i, pfx := range prefixes {
			if bytes.HasPrefix(last, pfx) {
				first = i
				break
			}
		}
		if first < 0 {
			return Result{}, base.Errorf(base.KindInvalid, "invalid cursor: it was made for another list")
		}
		start = append(bytes.Clone(last), 0)
	}
	var page Result
	var lastKey []byte
	used := 0 // bytes of the items emitted
	for i := first; i < len(prefixes) && !page.HasMore; i++ {
		opts := base.ScanOptions{Prefix: prefixes[i]}
		if i == first {
			opts.Start = start
		}
		visit := func(k, v []byte) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			if ps.Until != nil && bytes.Compare(k, ps.Until) >= 0 {
				return false, nil
			}
			if ps.Match != nil {
				ok, err := ps.Match(k, v)
				if err != nil || !ok {
					return err == nil, err
				}
			}
			if page.Count == limit {
				page.HasMore = true
				return false, nil
			}
			n := len(v)
			if ps.Size != nil {
				n = ps.Size(k, v)
			}
			if page.Count > 0 && n > maxBytes-used {
				page.HasMore = true
				return false, nil
			}
			if err := ps.Emit(k, v); err != nil {
				return false, err
			}
			used += n
			page.Count++
			lastKey = append(lastKey[:0], k...)
			return true, nil
		}
		if ps.Walk != nil {
			err = ps.Walk(opts.Start, visit)
		} else {
			err = tx.Scan(opts, visit)
		}
		if err != nil {
			return Result{}, err
		}
	}
	if page.HasMore {
		state := lastKey
		if ps.FixUntil {
			state = binary.AppendUvarint(nil, uint64(len(lastKey)))
			state = append(append(state, lastKey...), ps.Until...)
		}
		page.NextCursor = p.seal(ps.Scope, state)
	}
	return page, nil
}

// splitCursorState splits the sealed state of a cursor of a scan with
// fixUntil: the length of the last key (uvarint), the last key, the until
// of the first page (empty for none).
func splitCursorState(state []byte) (last, until []byte, err error) {
	n, w := binary.Uvarint(state)
	if w <= 0 || n > uint64(len(state)-w) {
		return nil, nil, base.Errorf(base.KindInvalid, "invalid cursor: it was made for another list")
	}
	return state[w : w+int(n)], state[w+int(n):], nil
}
