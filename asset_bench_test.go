package kms_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// BenchmarkSearchAssets measures one page (limit 100) of a search by parent
// and by keyringId in stores of 1,000 and 100,000 Assets. A page served
// from an index costs the same whatever the size of the store.
func BenchmarkSearchAssets(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		e := newEnvOn(b, kmstest.MemoryStore(b), kms.Options{MasterKey: kms.GenerateMasterKey()})
		e.ring(b, "other")
		target := e.ring(b, "target")
		parent := e.encryptAsset(b, "target", kms.AssetInput{}).Asset.ID
		// 200 children of the parent on the target ring; the rest on
		// another ring with no parent.
		var wg sync.WaitGroup
		work := make(chan int)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					in := kms.EncryptInput{RingName: "other", Asset: &kms.AssetInput{Data: map[string]any{"i": i}}}
					if i < 200 {
						in.RingName = "target"
						in.Asset.Parents = []string{parent}
					}
					if _, err := e.svc.Encrypt(e.root, in); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for i := 0; i < n; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		for _, bc := range []struct {
			name string
			f    kms.AssetFilter
		}{
			{"parent", kms.AssetFilter{Parents: []string{parent}}},
			{"keyringId", kms.AssetFilter{KeyRingID: target.Ring.ID}},
		} {
			b.Run(fmt.Sprintf("%s/assets=%d", bc.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					page, err := e.svc.SearchAssets(e.root, bc.f, kms.PageRequest{Limit: 100})
					if err != nil || len(page.Data) != 100 {
						b.Fatalf("SearchAssets = %d items, %v", len(page.Data), err)
					}
				}
			})
		}
	}
}
