package pgstore

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
)

// TestPrefetch: a Get after Prefetch answers what the database held
// (a value, or NotFound), and the transaction's own writes win over what
// was prefetched, before and after.
func TestPrefetch(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	setKey(t, s, "a", "va")
	setKey(t, s, "b", "vb")
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		if err := tx.Set([]byte("c"), []byte("mine")); err != nil {
			return err
		}
		p, ok := tx.(kms.Prefetcher)
		if !ok {
			t.Fatal("the Txn of an Update is not a kms.Prefetcher")
		}
		if err := p.Prefetch([][]byte{[]byte("a"), []byte("b"), []byte("missing"), []byte("a"), []byte("c"), {}}); err != nil {
			return err
		}
		if err := tx.Set([]byte("b"), []byte("new")); err != nil {
			return err
		}
		for key, want := range map[string]string{"a": "va", "b": "new", "c": "mine"} {
			v, err := tx.Get([]byte(key))
			if err != nil || string(v) != want {
				t.Errorf("Get(%q) after Prefetch = %q, %v; want %q", key, v, err, want)
			}
		}
		if _, err := tx.Get([]byte("missing")); !errors.Is(err, kms.ErrNotFound) {
			t.Errorf("Get(missing) after Prefetch = %v, want NotFound", err)
		}
		// A copy: changing it changes nothing.
		v, _ := tx.Get([]byte("a"))
		v[0] = 'X'
		if v, _ := tx.Get([]byte("a")); string(v) != "va" {
			t.Errorf("Get(a) after changing an earlier answer = %q, want va", v)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update = %v", err)
	}
	err = s.View(t.Context(), func(tx kms.Txn) error {
		if err := tx.(kms.Prefetcher).Prefetch([][]byte{[]byte("b"), []byte("c")}); err != nil {
			return err
		}
		for key, want := range map[string]string{"b": "new", "c": "mine"} {
			if v, err := tx.Get([]byte(key)); err != nil || string(v) != want {
				t.Errorf("View: Get(%q) after Prefetch = %q, %v; want %q", key, v, err, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View = %v", err)
	}
}

// TestPrefetchTakesAppendLock: AppendIn calls that begin with a Prefetch
// (which then also takes the append lock, in the same round trip) run one
// after another on a snapshot taken after the lock, from two Stores on one
// database as from two processes: each sees the commit of the one before,
// so none conflicts and reruns, and the counter they share and the trail
// end in step.
func TestPrefetchTakesAppendLock(t *testing.T) {
	dbURL := pgtest.URL(t)
	stores := []*Store{openStore(t, dbURL, Options{}), openStore(t, dbURL, Options{})}
	const workers, appends = 4, 10
	var (
		runs atomic.Int64
		wg   sync.WaitGroup
	)
	key := []byte("counter")
	for _, s := range stores {
		for range workers {
			wg.Go(func() {
				for range appends {
					err := s.Trail().(kms.SharedTrail).AppendIn(t.Context(), func(tx kms.Txn) (uint64, [][]byte, error) {
						runs.Add(1)
						if err := tx.(kms.Prefetcher).Prefetch([][]byte{key}); err != nil {
							return 0, nil, err
						}
						n, err := bumpCounter(tx, key, nil)
						if err != nil {
							return 0, nil, err
						}
						return uint64(n), [][]byte{[]byte("rec " + strconv.Itoa(n))}, nil
					})
					if err != nil {
						t.Errorf("AppendIn = %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	const total = 2 * workers * appends
	if v, err := getKey(t, stores[0], "counter"); err != nil || string(v) != strconv.Itoa(total) {
		t.Errorf("counter = %q, %v; want %d", v, err, total)
	}
	if n := runs.Load(); n != total {
		t.Errorf("the functions of %d AppendIn calls ran %d times, want once each: appenders conflicted", total, n)
	}
	seq := uint64(0)
	err := stores[1].Trail().Scan(1, func(s uint64, rec []byte) (bool, error) {
		seq++
		if s != seq || string(rec) != "rec "+strconv.FormatUint(s, 10) {
			t.Errorf("record %d = %q, want seq %d, %q", s, rec, seq, "rec "+strconv.FormatUint(seq, 10))
		}
		return true, nil
	})
	if err != nil || seq != total {
		t.Errorf("Scan = %v over %d records, want nil over %d", err, seq, total)
	}
}
