package paging

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/base/basetest"
	"github.com/ringkms/kms/internal/seal"
)

// maxBytes is the page budget of the tests.
const maxBytes = 4 << 20

func newPager() *Pager { return New(seal.New(seal.Derive(make([]byte, 32), "cursor"))) }

// TestPageBudget pages through items of mixed sizes, some larger than a
// whole page, with a limit it never reaches: each page stays within maxBytes
// unless it holds a single item, a page ends only where the next item
// would not fit, no page is empty, HasMore is exact, and every matching
// item comes once, in order.
func TestPageBudget(t *testing.T) {
	const mib = 1 << 20
	sizes := []int{5 * mib, 1, 3 * mib, 2 * mib, 5 * mib, 1 << 10, 1 << 10, 4 * mib, 4*mib - 2<<10, 1 << 10, 1, 1, 1, 6 * mib}
	keys := make([][]byte, len(sizes))
	for i := range sizes {
		keys[i] = fmt.Appendf(nil, "item/%03d", i)
	}
	p := newPager()
	for _, skip := range []int{-1, 1, 4} { // an item that does not match, or none
		t.Run(fmt.Sprintf("skip %d", skip), func(t *testing.T) {
			var got []int
			prevTotal := -1 // bytes of the page before, when it had more
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > len(sizes) {
					t.Fatal("too many pages")
				}
				var page []int
				ps := Scan{
					Scope:  "test",
					Prefix: []byte("item/"),
					Walk: func(start []byte, fn func(k, v []byte) (bool, error)) error {
						for _, k := range keys {
							if start == nil || bytes.Compare(k, start) >= 0 {
								if more, err := fn(k, nil); err != nil || !more {
									return err
								}
							}
						}
						return nil
					},
					Match: func(k, _ []byte) (bool, error) { return indexOf(keys, k) != skip, nil },
					Size:  func(k, _ []byte) int { return sizes[indexOf(keys, k)] },
					Emit: func(k, _ []byte) error {
						page = append(page, indexOf(keys, k))
						return nil
					},
				}
				res, err := p.Scan(context.Background(), nil, 10000, maxBytes, cursor, ps)
				if err != nil {
					t.Fatal(err)
				}
				total := 0
				for _, i := range page {
					total += sizes[i]
				}
				if len(page) == 0 || res.Count != len(page) || len(page) > 1 && total > maxBytes {
					t.Fatalf("page %d = items %v (%d bytes), pagination %+v", pages, page, total, res)
				}
				if prevTotal >= 0 && prevTotal+sizes[page[0]] <= maxBytes {
					t.Fatalf("page %d ended at %d bytes, but its next item (%d bytes) would have fit", pages-1, prevTotal, sizes[page[0]])
				}
				prevTotal = total
				got = append(got, page...)
				if !res.HasMore {
					break
				}
				cursor = res.NextCursor
			}
			var want []int
			for i := range sizes {
				if i != skip {
					want = append(want, i)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("paged items %v, want %v", got, want)
			}
		})
	}
}

func indexOf(keys [][]byte, k []byte) int {
	return slices.IndexFunc(keys, func(x []byte) bool { return bytes.Equal(x, k) })
}

// TestCursor: a page's cursor resumes after its last item, in the store's
// order, and is refused (Invalid) for another scope or once altered.
func TestCursor(t *testing.T) {
	tx := basetest.MemTxn{}
	for _, k := range []string{"a/1", "a/2", "a/3", "b/1"} {
		tx.Set([]byte(k), []byte("v"))
	}
	p := newPager()
	ctx := context.Background()
	scan := func(scope, cursor string) ([]string, Result, error) {
		var got []string
		ps := Scan{Scope: scope, Prefix: []byte("a/"), Emit: func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		}}
		res, err := p.Scan(ctx, tx, 2, maxBytes, cursor, ps)
		return got, res, err
	}
	got, res, err := scan("list", "")
	if err != nil || !slices.Equal(got, []string{"a/1", "a/2"}) || !res.HasMore || res.Count != 2 {
		t.Fatalf("first page = %v, %+v, %v", got, res, err)
	}
	got, next, err := scan("list", res.NextCursor)
	if err != nil || !slices.Equal(got, []string{"a/3"}) || next.HasMore || next.NextCursor != "" {
		t.Fatalf("second page = %v, %+v, %v", got, next, err)
	}
	altered := []byte(res.NextCursor)
	altered[len(altered)/2] ^= 'A' ^ 'B'
	for name, c := range map[string]struct{ scope, cursor string }{
		"another scope": {"other", res.NextCursor},
		"altered":       {"list", string(altered)},
		"not base64":    {"list", "*"},
	} {
		if _, _, err := scan(c.scope, c.cursor); base.ErrorKind(err) != base.KindInvalid {
			t.Errorf("%s: Scan = %v, want Invalid", name, err)
		}
	}
}
