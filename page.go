package kms

import (
	"context"
	"strconv"
	"strings"

	"github.com/ringkms/kms/internal/paging"
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

// pager walks the store a page at a time behind sealed cursors
// (internal/paging), with the page limits of PageRequest.
type pager struct{ *paging.Pager }

// pageScan describes one paged walk of the store.
type pageScan = paging.Scan

// scan pages through the keys of ps (paging.Pager.Scan) for req.
func (p pager) scan(ctx context.Context, tx Txn, req PageRequest, ps pageScan) (Page, error) {
	limit, err := req.limit()
	if err != nil {
		return Page{}, err
	}
	r, err := p.Scan(ctx, tx, limit, MaxPageBytes, req.Cursor, ps)
	if err != nil {
		return Page{}, err
	}
	return Page{Limit: limit, Count: r.Count, HasMore: r.HasMore, NextCursor: r.NextCursor}, nil
}
