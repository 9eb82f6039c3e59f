package kms_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// BenchmarkListKeyHashes measures one page (limit 100) of a key's hashes,
// at the start of the list and in its middle, for keys that issued 1,000,
// 100,000 and 1,000,000 hashes, with as many calls of another ring's key
// interleaved. A page costs the same however many hashes the key has.
func BenchmarkListKeyHashes(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		e := newEnvOn(b, kmstest.MemoryStore(b), kms.Options{MasterKey: kms.GenerateMasterKey()})
		target := e.ring(b, "target")
		e.ring(b, "other")
		var wg sync.WaitGroup
		work := make(chan string)
		for range 16 {
			wg.Go(func() {
				for ring := range work {
					if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: ring}); err != nil {
						b.Error(err)
					}
				}
			})
		}
		for range n {
			work <- "target"
			work <- "other"
		}
		close(work)
		wg.Wait()
		ref := kms.RingRef{Name: "target"}
		// The cursor of the middle of the list.
		var middle string
		for seen := 0; seen < n/2; {
			l, err := e.svc.ListKeyHashes(e.root, ref, target.Key.ID, kms.PageRequest{Limit: min(n/2-seen, kms.MaxPageLimit), Cursor: middle})
			if err != nil {
				b.Fatal(err)
			}
			seen += len(l.Data)
			middle = l.Pagination.NextCursor
		}
		for _, at := range []struct{ name, cursor string }{{"first", ""}, {"middle", middle}} {
			b.Run(fmt.Sprintf("page=%s/hashes=%d", at.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					page, err := e.svc.ListKeyHashes(e.root, ref, target.Key.ID, kms.PageRequest{Limit: 100, Cursor: at.cursor})
					if err != nil || len(page.Data) != 100 {
						b.Fatalf("ListKeyHashes = %d hashes, %v", len(page.Data), err)
					}
				}
			})
		}
	}
}
