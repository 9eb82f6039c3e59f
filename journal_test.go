package kms_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/kmstest"
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
	inner := kmstest.MemoryStore(t)
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

// gateTrail is a Trail that records the size of every batch appended and,
// while a gate is set, holds each Append until the gate is closed.
type gateTrail struct {
	kms.Trail
	entered chan struct{} // gets a value when an Append is held
	mu      sync.Mutex
	gate    chan struct{}
	sizes   []int
}

func (g *gateTrail) Append(recs [][]byte) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		g.entered <- struct{}{}
		<-gate
	}
	g.mu.Lock()
	g.sizes = append(g.sizes, len(recs))
	g.mu.Unlock()
	return g.Trail.Append(recs)
}

func (g *gateTrail) setGate(gate chan struct{}) {
	g.mu.Lock()
	g.gate = gate
	g.mu.Unlock()
}

// lastSize returns the size of the last batch appended.
func (g *gateTrail) lastSize() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sizes[len(g.sizes)-1]
}

type gateTrailStore struct {
	kms.Store
	trail *gateTrail
}

func (s *gateTrailStore) Trail() kms.Trail { return s.trail }

// TestJournalGathersUnderLoad checks the group-commit yield: after a
// batch of several jobs, a small batch yields, and the jobs that arrive
// meanwhile join it; after a batch of one, a job does not yield.
func TestJournalGathersUnderLoad(t *testing.T) {
	inner := kmstest.MemoryStore(t)
	tr := &gateTrail{Trail: inner.Trail(), entered: make(chan struct{}, 1)}
	e := newEnvOn(t, &gateTrailStore{Store: inner, trail: tr}, kms.Options{MasterKey: kms.GenerateMasterKey()})
	e.ring(t, "r")
	// A key's first encrypt reserves a block of its count, in a job of
	// its own: done here, so that the batches below are of records alone.
	if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"}); err != nil {
		t.Fatal(err)
	}
	pauses, resume := make(chan struct{}, 16), make(chan struct{}, 16)
	kms.SetJournalPause(e.svc, func() {
		pauses <- struct{}{}
		<-resume
	})
	var wg sync.WaitGroup
	encrypt := func(n int) {
		for range n {
			wg.Go(func() {
				if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"}); err != nil {
					t.Errorf("Encrypt = %v", err)
				}
			})
		}
	}
	queued := func(n int) {
		t.Helper()
		kmsdtest.WaitFor(t, 10*time.Second, fmt.Sprintf("%d jobs queued", n), func() bool { return kms.JournalQueued(e.svc) == n })
	}

	// Four jobs queue while the journal is held in an Append: they make
	// one batch, which does not wait (the one before had one job).
	gate := make(chan struct{})
	tr.setGate(gate)
	encrypt(1)
	<-tr.entered
	encrypt(4)
	queued(4)
	tr.setGate(nil)
	close(gate)
	wg.Wait()
	if got := tr.lastSize(); got != 4 {
		t.Fatalf("the jobs queued behind a held batch made a batch of %d, want 4", got)
	}
	if len(pauses) != 0 {
		t.Fatalf("the journal waited after batches of one job")
	}

	// Now one job waits, and two that arrive meanwhile join it.
	encrypt(1)
	select {
	case <-pauses:
	case <-time.After(10 * time.Second):
		resume <- struct{}{} // in case it waits after all
		t.Fatal("a job after a batch of four did not wait for others")
	}
	encrypt(2)
	queued(2)
	resume <- struct{}{}
	wg.Wait()
	if got := tr.lastSize(); got != 3 {
		t.Errorf("a waiting batch and the jobs that came meanwhile made a batch of %d, want 3", got)
	}

	// After a batch of three, fewer than gatherSiblings: no wait. (The
	// token lets a wrong wait end, so that the test fails, not hangs.)
	resume <- struct{}{}
	encrypt(1)
	wg.Wait()
	if n := len(pauses); n != 0 {
		t.Errorf("the journal waited %d times after a batch of three jobs, want none", n)
	}
}
