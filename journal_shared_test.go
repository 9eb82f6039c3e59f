package kms_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/store/pgstore"
)

// countingStore is a pgstore.Store whose SharedTrail counts AppendIn
// calls: the batches of the journal.
type countingStore struct {
	*pgstore.Store
	trail *countingTrail
}

func (s *countingStore) Trail() kms.Trail { return s.trail }

type countingTrail struct {
	kms.SharedTrail
	appends atomic.Int64
}

func (t *countingTrail) AppendIn(ctx context.Context, fn func(kms.Txn) (uint64, [][]byte, error)) error {
	t.appends.Add(1)
	return t.SharedTrail.AppendIn(ctx, fn)
}

// TestSharedBatchTakesJobsQueuedForTheLock: while another process holds
// the append lock, the journal's batch waits for it, and the jobs that
// queue meanwhile join that batch once the lock is held, rather than
// wait for a turn of their own.
func TestSharedBatchTakesJobsQueuedForTheLock(t *testing.T) {
	ctx := context.Background()
	open := pgOpener(t)
	pst := open()
	st := &countingStore{Store: pst, trail: &countingTrail{SharedTrail: pst.Trail().(kms.SharedTrail)}}
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	if _, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "r"}); err != nil {
		t.Fatal(err)
	}
	// The first encrypt with a key reserves a block of calls for it;
	// the encrypts below then only count.
	if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"}); err != nil {
		t.Fatal(err)
	}
	other := open()

	holding, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	releaseLock := func() { released.Do(func() { close(release) }) }
	defer releaseLock() // before other is closed
	otherDone := make(chan error, 1)
	go func() {
		otherDone <- other.Trail().(kms.SharedTrail).AppendIn(ctx, func(tx kms.Txn) (uint64, [][]byte, error) {
			if err := tx.(kms.Prefetcher).Prefetch([][]byte{[]byte("any")}); err != nil {
				return 0, nil, err
			}
			once.Do(func() { close(holding) })
			<-release
			return 0, nil, nil
		})
	}()
	<-holding

	const n = 10
	before := st.trail.appends.Load()
	records := st.trail.Len()
	var wg sync.WaitGroup
	encrypt := func() {
		if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"}); err != nil {
			t.Errorf("Encrypt = %v", err)
		}
	}
	wg.Go(encrypt)
	kmsdtest.WaitFor(t, 10*time.Second, "the first encrypt's batch to wait for the lock", func() bool {
		return st.trail.appends.Load() == before+1
	})
	for range n - 1 {
		wg.Go(encrypt)
	}
	kmsdtest.WaitFor(t, 10*time.Second, "the other encrypts to queue", func() bool {
		return kms.JournalQueued(e.svc) == n-1
	})
	releaseLock()
	wg.Wait()
	if err := <-otherDone; err != nil {
		t.Fatalf("the other process's AppendIn = %v", err)
	}
	if got := st.trail.appends.Load() - before; got != 1 {
		t.Errorf("%d encrypts, %d of them queued while the first waited for the append lock, took %d batches; want 1", n, n-1, got)
	}
	if got := st.trail.Len() - records; got != n {
		t.Errorf("the trail grew by %d records, want %d", got, n)
	}
}
