package kms

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/ringkms/kms/internal/seal"
)

// Page sizes of every list and search.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 10000

	// MaxPageBytes is the byte budget of a page: a page ends early
	// (HasMore true) before the item that would take its items past it,
	// whatever the limit, so that no answer, nor the memory it takes to
	// build it, grows with the size of the items. A page always holds at
	// least one item, however large, so paging goes on. An item counts
	// the bytes it is stored as, which is close to its size as answered.
	MaxPageBytes = 4 << 20
)

// PageRequest asks for one page of a list or search.
type PageRequest struct {
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
	// Limit is the page size: 0 means DefaultPageLimit, values above
	// MaxPageLimit are capped, negative values are invalid.
	Limit int
}

// Page describes a page of results.
type Page struct {
	Limit      int    `json:"limit"`
	Count      int    `json:"count"`
	HasMore    bool   `json:"hasMore"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// List is one page of a list or search.
type List[T any] struct {
	Data       []T  `json:"data"`
	Pagination Page `json:"pagination"`
}

// ParseLimit parses the text of a limit parameter: empty means the default
// (0); otherwise it must be a whole number of at least 1, and numbers over
// MaxPageLimit are capped.
func ParseLimit(text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && !strings.HasPrefix(strings.TrimSpace(text), "-") {
			return MaxPageLimit, nil
		}
		return 0, Errorf(KindInvalid, "limit must be a whole number from 1 to %d", MaxPageLimit)
	}
	if n < 1 {
		return 0, Errorf(KindInvalid, "limit must be a whole number from 1 to %d", MaxPageLimit)
	}
	return int(min(n, MaxPageLimit)), nil
}

func (r PageRequest) limit() (int, error) {
	switch {
	case r.Limit < 0:
		return 0, Errorf(KindInvalid, "limit must be a whole number from 1 to %d", MaxPageLimit)
	case r.Limit == 0:
		return DefaultPageLimit, nil
	}
	return min(r.Limit, MaxPageLimit), nil
}

// timeRange turns the time filter of a search, the inclusive range [start,
// end] of epoch milliseconds (either bound nil when not given), into the
// half-open range [from, until) of milliseconds that an index of times up
// to last holds, saturating where arithmetic would overflow: a time before
// the epoch counts as the epoch, and an end at or after last leaves the
// range open (until 0). none reports that no time from 0 to last is in
// the range.
func timeRange(start, end *int64, last uint64) (from, until uint64, none bool) {
	if start != nil && *start > 0 {
		from = uint64(*start)
	}
	if from > last {
		return 0, 0, true
	}
	if end != nil {
		if *end < 0 {
			return 0, 0, true
		}
		if e := uint64(*end); e < last {
			until = e + 1
		}
		if until != 0 && until <= from {
			return 0, 0, true
		}
	}
	return from, until, false
}

// pager seals cursors. A cursor is the store key of the last item of a
// page (with the end of the first page, for a scan with fixUntil), sealed with AES-256-GCM under a master-derived key and bound (as
// associated data) to the list it belongs to and the filters it was made
// with; it travels as unpadded URL-safe base64. A cursor that was altered,
// or that is used with another list or other filters, is an Invalid error.
type pager struct {
	sealer *seal.Sealer
}

func cursorAAD(scope string) []byte {
	sum := sha256.Sum256([]byte(scope))
	return append([]byte("ringkms/cursor/v1/"), sum[:]...)
}

func (p *pager) seal(scope string, last []byte) string {
	return base64.RawURLEncoding.EncodeToString(p.sealer.Seal(last, cursorAAD(scope)))
}

func (p *pager) open(scope, cursor string) ([]byte, error) {
	raw, err := b64url.DecodeString(cursor)
	if err == nil {
		var last []byte
		if last, err = p.sealer.Open(raw, cursorAAD(scope)); err == nil {
			return last, nil
		}
	}
	return nil, Errorf(KindInvalid, "invalid cursor: it was altered, or made for another list or other filters")
}

// pageScan describes one paged walk of the store for pager.scan.
type pageScan struct {
	// scope names the list and its filters: a cursor made for one scope
	// is refused by every other.
	scope string
	// prefix bounds the walk: every key visited starts with it.
	prefix []byte
	// then are more prefixes walked after prefix, in order, as one list.
	then [][]byte
	// from is the first key of the first page (inclusive); nil means the
	// start of prefix. until, when set, ends the walk before that key.
	// Both are for a walk of one prefix.
	from, until []byte
	// fixUntil seals the first page's until into the cursors: the pages
	// after it end there too, or before their own until when that comes
	// first. So a sequence of pages returns nothing added past the end
	// the list had at its first page.
	fixUntil bool
	// match reports whether the item belongs in the results; nil means
	// every item does. It may be called on an item that is then not
	// emitted (the look-ahead for HasMore).
	match func(key, value []byte) (bool, error)
	// size returns the bytes a matching item counts against
	// MaxPageBytes, before emit is called for it (if it fits); nil means
	// len(value), right for lists whose values are the items as stored.
	// A list of index entries sets it to the size of the record it reads.
	size func(key, value []byte) int
	// emit adds a matching item to the page.
	emit func(key, value []byte) error
	// walk, when set, lists the items in place of a store scan of
	// prefix (then is not used): it calls fn with each item from the key
	// start on (inclusive; nil for the first item), in key order, until fn
	// returns false or an error. Every key starts with prefix.
	walk func(start []byte, fn func(key, value []byte) (bool, error)) error
}

// scan pages through the keys of ps in order, resuming after the cursor's
// key. The page ends after limit matching items, or before the matching
// item that would take it past MaxPageBytes (a first item always fits);
// scan then looks ahead for one more match to set HasMore, so HasMore is
// exact even with filters. An item left out by the budget is the first
// of the next page.
//
// The cursor holds the store key of the last item returned, so items
// inserted or deleted while a client pages neither repeat nor shift the
// pages: each key is visited at most once per sequence of pages.
func (p *pager) scan(ctx context.Context, tx Txn, req PageRequest, ps pageScan) (Page, error) {
	limit, err := req.limit()
	if err != nil {
		return Page{}, err
	}
	prefixes := append([][]byte{ps.prefix}, ps.then...)
	first, start := 0, ps.from
	if req.Cursor != "" {
		state, err := p.open(ps.scope, req.Cursor)
		if err != nil {
			return Page{}, err
		}
		last := state
		if ps.fixUntil {
			var until []byte
			if last, until, err = splitCursorState(state); err != nil {
				return Page{}, err
			}
			if len(until) > 0 && (ps.until == nil || bytes.Compare(until, ps.until) < 0) {
				ps.until = until
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
			return Page{}, Errorf(KindInvalid, "invalid cursor: it was made for another list")
		}
		start = afterKey(last)
	}
	page := Page{Limit: limit}
	var lastKey []byte
	used := 0 // bytes of the items emitted
	for i := first; i < len(prefixes) && !page.HasMore; i++ {
		opts := ScanOptions{Prefix: prefixes[i]}
		if i == first {
			opts.Start = start
		}
		visit := func(k, v []byte) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			if ps.until != nil && bytes.Compare(k, ps.until) >= 0 {
				return false, nil
			}
			if ps.match != nil {
				ok, err := ps.match(k, v)
				if err != nil || !ok {
					return err == nil, err
				}
			}
			if page.Count == limit {
				page.HasMore = true
				return false, nil
			}
			n := len(v)
			if ps.size != nil {
				n = ps.size(k, v)
			}
			if page.Count > 0 && n > MaxPageBytes-used {
				page.HasMore = true
				return false, nil
			}
			if err := ps.emit(k, v); err != nil {
				return false, err
			}
			used += n
			page.Count++
			lastKey = append(lastKey[:0], k...)
			return true, nil
		}
		if ps.walk != nil {
			err = ps.walk(opts.Start, visit)
		} else {
			err = tx.Scan(opts, visit)
		}
		if err != nil {
			return Page{}, err
		}
	}
	if page.HasMore {
		state := lastKey
		if ps.fixUntil {
			state = binary.AppendUvarint(nil, uint64(len(lastKey)))
			state = append(append(state, lastKey...), ps.until...)
		}
		page.NextCursor = p.seal(ps.scope, state)
	}
	return page, nil
}

// splitCursorState splits the sealed state of a cursor of a scan with
// fixUntil: the length of the last key (uvarint), the last key, the until
// of the first page (empty for none).
func splitCursorState(state []byte) (last, until []byte, err error) {
	n, w := binary.Uvarint(state)
	if w <= 0 || n > uint64(len(state)-w) {
		return nil, nil, Errorf(KindInvalid, "invalid cursor: it was made for another list")
	}
	return state[w : w+int(n)], state[w+int(n):], nil
}
