package kms_test

import (
	"context"
	"sync"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// smallTxnStore refuses transactions of more than max writes, as a backend
// with a small transaction size limit would.
type smallTxnStore struct {
	kms.Store
	max int
}

type countingTxn struct {
	kms.Txn
	n, max int
}

func (t *countingTxn) Set(k, v []byte) error {
	if t.n++; t.n > t.max {
		return kms.Errorf(kms.KindTooLarge, "transaction too large")
	}
	return t.Txn.Set(k, v)
}

func (s *smallTxnStore) Update(ctx context.Context, fn func(kms.Txn) error) error {
	return s.Store.Update(ctx, func(tx kms.Txn) error { return fn(&countingTxn{Txn: tx, max: s.max}) })
}

func (s *smallTxnStore) UpdateNoSync(ctx context.Context, fn func(kms.Txn) error) error {
	return s.Store.UpdateNoSync(ctx, func(tx kms.Txn) error { return fn(&countingTxn{Txn: tx, max: s.max}) })
}

// TestJournalSplitsLargeBatches checks that a batch too large for one
// transaction is committed in parts (the writes of a batch, and its index
// entries), every job succeeds, the chain holds and the index names every
// record.
func TestJournalSplitsLargeBatches(t *testing.T) {
	inner, err := badgerstore.OpenInMemory()
	if err != nil {
		t.Fatal(err)
	}
	st := &smallTxnStore{Store: inner, max: 40}
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	e.ring(t, "split")
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				in := kms.EncryptInput{RingName: "split"}
				if i%2 == 0 {
					in.Asset = &kms.AssetInput{Data: map[string]any{"g": g, "i": i}}
				}
				if _, err := e.svc.Encrypt(e.root, in); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	res, err := e.svc.VerifyActivityChain(t.Context())
	if err != nil || res.Records < 320 {
		t.Fatalf("VerifyActivityChain = %+v, %v; want at least 320 records", res, err)
	}
	for _, f := range []kms.ActivityFilter{{Action: "encrypt"}, {Ring: "split"}, {Props: map[string]any{"assetOp": "create"}}} {
		want := 320
		if f.Props != nil {
			want = 64 * 3
		}
		l, err := e.svc.SearchActivity(e.root, f, kms.PageRequest{Limit: kms.MaxPageLimit})
		if err != nil {
			t.Fatalf("SearchActivity(%+v) = %v", f, err)
		}
		if l.Pagination.Count < want {
			t.Errorf("SearchActivity(%+v) found %d records, want at least %d", f, l.Pagination.Count, want)
		}
	}
}
