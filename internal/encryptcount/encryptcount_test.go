package encryptcount

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/base/basetest"
)

// newCounters returns Counters over an in-memory store that holds the
// key "k" of the ring "r", and the store.
func newCounters(t *testing.T) (*Counters, *basetest.MemStore) {
	t.Helper()
	st := basetest.NewMemStore()
	ctx := context.Background()
	cs := New(Config{
		Store:    st,
		Submit:   func(mutate func(base.Txn) error) error { return st.Update(ctx, mutate) },
		CountKey: func(keyID string) []byte { return []byte("count/" + keyID) },
		KeyKey:   func(ringID, keyID string) []byte { return []byte("key/" + ringID + "/" + keyID) },
	})
	if err := st.Update(ctx, func(tx base.Txn) error { return tx.Set([]byte("key/r/k"), []byte("{}")) }); err != nil {
		t.Fatal(err)
	}
	return cs, st
}

// count makes n calls on the key "k" of the ring "r".
func count(t *testing.T, cs *Counters, n int) {
	t.Helper()
	for range n {
		if err := cs.Count("r", "k", 0); err != nil {
			t.Fatal(err)
		}
	}
}

func total(t *testing.T, st base.Store, keyID string) uint64 {
	t.Helper()
	var n uint64
	err := st.View(context.Background(), func(tx base.Txn) error {
		var err error
		n, err = LoadTotal(tx, []byte("count/"+keyID))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCountUnderLimit: a key under a limit serves exactly its limit, then
// ErrSpent, and the store's total is the limit.
func TestCountUnderLimit(t *testing.T) {
	cs, st := newCounters(t)
	for i := range 10 {
		if err := cs.Count("r", "k", 10); err != nil {
			t.Fatalf("call %d under a limit of 10 = %v", i+1, err)
		}
	}
	if err := cs.Count("r", "k", 10); err != ErrSpent {
		t.Fatalf("call 11 under a limit of 10 = %v, want ErrSpent", err)
	}
	if got := total(t, st, "k"); got != 10 {
		t.Errorf("store total = %d, want 10", got)
	}
}

// TestCountDeletedKey: no count outlives its key: a call on a key whose
// record is gone reserves nothing and answers NotFound.
func TestCountDeletedKey(t *testing.T) {
	cs, st := newCounters(t)
	if err := cs.Count("r", "gone", 0); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("Count on a deleted key = %v, want NotFound", err)
	}
	if got := total(t, st, "gone"); got != 0 {
		t.Errorf("store total of a deleted key = %d, want 0", got)
	}
}

// TestReleaseGivesBackUnused: Release gives back what the reservations
// hold beyond the calls counted, once.
func TestReleaseGivesBackUnused(t *testing.T) {
	cs, st := newCounters(t)
	cs.SetFreeBlock(64)
	count(t, cs, 3)
	if got := total(t, st, "k"); got != 64 {
		t.Fatalf("store total after 3 calls = %d, want a block of 64", got)
	}
	for range 2 {
		if err := cs.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := total(t, st, "k"); got != 3 {
			t.Fatalf("store total after Release = %d, want the 3 calls counted", got)
		}
	}
}

// TestLoadTotalCorrupt: a total that is not 8 bytes is an Internal error.
func TestLoadTotalCorrupt(t *testing.T) {
	tx := basetest.MemTxn{"count/k": []byte("bad")}
	if _, err := LoadTotal(tx, []byte("count/k")); base.ErrorKind(err) != base.KindInternal {
		t.Fatalf("LoadTotal of a corrupt total = %v, want Internal", err)
	}
}

// TestLimitCounterCountsRacingCalls: a call still under no limit that
// passes while the counter is being put under a new limit stays in the
// store's total, which other processes read: the total never falls short
// of the calls served.
func TestLimitCounterCountsRacingCalls(t *testing.T) {
	cs, st := newCounters(t)
	cs.SetFreeBlock(64)
	count(t, cs, 10)
	c := cs.get("k")
	stale := make(chan error, 1)
	cs.limitHook = func() {
		// A call that read the ring before its limit, counted now.
		before := c.used.Load()
		go func() { stale <- cs.Count("r", "k", 0) }()
		for c.used.Load() == before {
			runtime.Gosched()
		}
	}
	if err := cs.limitCounter(c, "k", 11); err != nil {
		t.Fatal(err)
	}
	if err := <-stale; err != nil {
		t.Fatalf("the racing call: %v", err)
	}
	if got := total(t, st, "k"); got < 11 {
		t.Errorf("store total %d after 11 calls served: another process could hand the key out past the limit", got)
	}
}
