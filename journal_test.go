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

// TestJournalSplitsLargeBatches checks that a batch too large for one
// transaction is committed in parts, every job succeeds, and the chain holds.
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
				if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "split"}); err != nil {
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
}
