package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ringkms/kms"
)

func testLargeValue(t *testing.T, s kms.Store) {
	// Just under 1 MiB: Badger's in-memory mode holds nothing larger.
	const size = 1<<20 - 1
	big := make([]byte, size)
	for i := range big {
		big[i] = byte(i*7 + i>>11)
	}
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		return tx.Set([]byte("big"), big)
	})
	if err != nil {
		t.Fatalf("Update(Set(%q, %d bytes)) = %v, want nil", "big", size, err)
	}
	got, err := get(t, s, "big")
	if err != nil || !bytes.Equal(got, big) {
		t.Errorf("Get(%q) = %d bytes, %v; want the %d bytes written, nil", "big", len(got), err, size)
	}
	kvs := scan(t, s, kms.ScanOptions{})
	if len(kvs) != 1 || !bytes.Equal(kvs[0].value, big) {
		t.Errorf("Scan(all) = %d items, want %q with the %d bytes written", len(kvs), "big", size)
	}
}

func testManyKeys(t *testing.T, s kms.Store) {
	const n, batch = 10000, 500
	order := rand.Perm(n)
	for i := 0; i < n; i += batch {
		err := s.Update(t.Context(), func(tx kms.Txn) error {
			for _, j := range order[i : i+batch] {
				k := fmt.Sprintf("key/%06d", j)
				if err := tx.Set([]byte(k), []byte(k)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Update(batch %d) = %v, want nil", i/batch, err)
		}
	}
	for _, reverse := range []bool{false, true} {
		opts := kms.ScanOptions{Prefix: []byte("key/"), Reverse: reverse}
		i := 0
		err := s.View(t.Context(), func(tx kms.Txn) error {
			return tx.Scan(opts, func(key, value []byte) (bool, error) {
				j := i
				if reverse {
					j = n - 1 - i
				}
				want := fmt.Sprintf("key/%06d", j)
				if string(key) != want || string(value) != want {
					return false, fmt.Errorf("item %d = %q: %q, want %q: %q", i, key, value, want, want)
				}
				i++
				return true, nil
			})
		})
		if err != nil || i != n {
			t.Errorf("Scan(%s) = %v after %d items, want nil after %d", fmtOpts(opts), err, i, n)
		}
	}
}

// increment adds one to the decimal counter under key, reading it in the
// same transaction, and counts its runs.
func increment(ctx context.Context, s kms.Store, key string, runs *int) error {
	return s.Update(ctx, func(tx kms.Txn) error {
		*runs++
		var n int
		v, err := tx.Get([]byte(key))
		switch {
		case errors.Is(err, kms.ErrNotFound):
		case err != nil:
			return err
		default:
			if _, err := fmt.Sscan(string(v), &n); err != nil {
				return fmt.Errorf("counter %q: %w", v, err)
			}
		}
		return tx.Set([]byte(key), []byte(fmt.Sprint(n+1)))
	})
}

func testConcurrentCounter(t *testing.T, s kms.Store) {
	const workers, perWorker = 4, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	totalRuns := 0
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			runs := 0
			for i := range perWorker {
				if err := increment(t.Context(), s, "counter", &runs); err != nil {
					t.Errorf("worker %d: increment %d = %v, want nil", w, i, err)
					return
				}
			}
			mu.Lock()
			totalRuns += runs
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	wantValue(t, s, "counter", fmt.Sprint(workers*perWorker))
	if totalRuns < workers*perWorker {
		t.Errorf("increment fns ran %d times, want at least %d", totalRuns, workers*perWorker)
	}
	t.Logf("%d increments took %d runs of fn", workers*perWorker, totalRuns)
}

func testConcurrentWriters(t *testing.T, s kms.Store) {
	const workers, perWorker = 4, 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range perWorker {
				k := fmt.Sprintf("w%d/%03d", w, i)
				err := s.Update(t.Context(), func(tx kms.Txn) error {
					return tx.Set([]byte(k), []byte(k))
				})
				if err != nil {
					t.Errorf("Update(Set(%q)) = %v, want nil", k, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	got := scan(t, s, kms.ScanOptions{})
	if len(got) != workers*perWorker {
		t.Fatalf("Scan(all) = %d items, want %d", len(got), workers*perWorker)
	}
	i := 0
	for w := range workers {
		for j := range perWorker {
			want := fmt.Sprintf("w%d/%03d", w, j)
			if got[i].key != want || string(got[i].value) != want {
				t.Errorf("Scan(all) item %d = %q: %q, want %q: %q", i, got[i].key, got[i].value, want, want)
			}
			i++
		}
	}
}

func testScanContextCanceled(t *testing.T, s kms.Store) {
	const n, cancelAt = 1000, 10
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		for i := range n {
			if err := tx.Set(fmt.Appendf(nil, "k%04d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update(set %d keys) = %v, want nil", n, err)
	}

	for _, view := range []bool{true, false} {
		name := "Update"
		run := s.Update
		if view {
			name, run = "View", s.View
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			seen := 0
			var scanErr error
			err := run(ctx, func(tx kms.Txn) error {
				scanErr = tx.Scan(kms.ScanOptions{}, func(key, value []byte) (bool, error) {
					seen++
					if seen == cancelAt {
						cancel()
					}
					return true, nil
				})
				return scanErr
			})
			if !errors.Is(scanErr, context.Canceled) || seen >= n {
				t.Errorf("Scan canceled at item %d = %v after %d items; want context.Canceled before %d", cancelAt, scanErr, seen, n)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s(fn returns Scan error) = %v, want context.Canceled", name, err)
			}
		})
	}
}

func testContextCanceledBeforeStart(t *testing.T, s kms.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Update(ctx, func(tx kms.Txn) error {
		return tx.Set([]byte("k"), []byte("v"))
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update(canceled ctx) = %v, want context.Canceled", err)
	}
	wantMissing(t, s, "k")

	err = s.View(ctx, func(tx kms.Txn) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("View(canceled ctx) = %v, want context.Canceled", err)
	}
}

// interfere commits, from another goroutine, a blind write of key while
// the caller's transaction is open, and waits for it.
func interfere(t testing.TB, s kms.Store, key, value string) {
	t.Helper()
	done := make(chan error)
	go func() {
		done <- s.Update(context.Background(), func(tx kms.Txn) error {
			return tx.Set([]byte(key), []byte(value))
		})
	}()
	if err := <-done; err != nil {
		t.Errorf("interfering Update(Set(%q)) = %v, want nil", key, err)
	}
}

func testUpdateRetryRerunsFn(t *testing.T, s kms.Store) {
	set(t, s, "counter", "0")
	runs := 0
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		runs++
		v, err := tx.Get([]byte("counter"))
		if err != nil {
			return err
		}
		var n int
		if _, err := fmt.Sscan(string(v), &n); err != nil {
			return err
		}
		if runs == 1 {
			// Another transaction changes what this one read before it
			// commits: a serialisable store must not commit this run.
			interfere(t, s, "counter", "10")
		}
		if err := tx.Set([]byte("side"), []byte(fmt.Sprint(runs))); err != nil {
			return err
		}
		return tx.Set([]byte("counter"), []byte(fmt.Sprint(n+1)))
	})
	if err != nil {
		t.Fatalf("Update = %v, want nil", err)
	}
	if runs < 2 {
		t.Errorf("Update ran fn %d times, want at least 2 (the first run conflicted)", runs)
	}
	// The first run's writes were thrown away; only the last run's count.
	wantValue(t, s, "counter", "11")
	wantValue(t, s, "side", fmt.Sprint(runs))
}

func testUpdateGivesUpOnConflict(t *testing.T, s kms.Store) {
	const limit = 1000
	set(t, s, "hot", "0")
	runs := 0
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		runs++
		if runs > limit {
			return fmt.Errorf("fn ran more than %d times: %w", limit, errBoom)
		}
		if _, err := tx.Get([]byte("hot")); err != nil {
			return err
		}
		interfere(t, s, "hot", fmt.Sprint(runs))
		return tx.Set([]byte("mine"), []byte("v"))
	})
	if errors.Is(err, errBoom) {
		t.Fatalf("Update never gave up: %v", err)
	}
	if !errors.Is(err, kms.ErrConflict) {
		t.Errorf("Update(every commit conflicts) = %v, want errors.Is(err, kms.ErrConflict)", err)
	}
	wantKind(t, "Update(every commit conflicts)", err, kms.KindConflict)
	if runs < 2 {
		t.Errorf("Update ran fn %d times before giving up, want at least 2", runs)
	}
	wantMissing(t, s, "mine")
	t.Logf("Update gave up after %d runs", runs)
}
