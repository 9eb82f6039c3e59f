package cache

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCacheLoadSharesOneRead: loads of one key that miss together wait
// for one read, and the value is cached for the next.
func TestCacheLoadSharesOneRead(t *testing.T) {
	c := New[string, int](10)
	var reads atomic.Int32
	release := make(chan struct{})
	read := func() (int, error) {
		reads.Add(1)
		<-release
		return 7, nil
	}
	const callers = 20
	var wg sync.WaitGroup
	got := make([]int, callers)
	errs := make([]error, callers)
	wg.Go(func() { got[0], errs[0] = c.Load("k", read) })
	waitFlight(t, c, "k")
	for i := 1; i < callers; i++ {
		wg.Go(func() { got[i], errs[i] = c.Load("k", read) })
	}
	for deadline := time.Now().Add(10 * time.Second); waiters(c, "k") < callers-1; runtime.Gosched() {
		if time.Now().After(deadline) {
			close(release)
			wg.Wait()
			t.Fatalf("%d loads that missed together: %d wait for the read under way, want %d", callers, waiters(c, "k"), callers-1)
		}
	}
	close(release)
	wg.Wait()
	for i := range callers {
		if got[i] != 7 || errs[i] != nil {
			t.Errorf("load %d = %d, %v; want 7, nil", i, got[i], errs[i])
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d loads that missed together read %d times, want once", callers, n)
	}
	if v, ok := c.Get("k"); !ok || v != 7 {
		t.Errorf("get after load = %d, %v; want 7, true", v, ok)
	}
}

// TestCacheLoadAfterInvalidation: a load that comes after an
// invalidation does not take the value of a read begun before it, and
// that read fills nothing.
func TestCacheLoadAfterInvalidation(t *testing.T) {
	c := New[string, string](10)
	release := make(chan struct{})
	var old string
	var wg sync.WaitGroup
	wg.Go(func() {
		old, _ = c.Load("k", func() (string, error) { <-release; return "old", nil })
	})
	waitFlight(t, c, "k")
	c.Remove("k") // a write to the store, then the invalidation
	v, err := c.Load("k", func() (string, error) { return "new", nil })
	if v != "new" || err != nil {
		t.Errorf("load after an invalidation = %q, %v; want the new value", v, err)
	}
	close(release)
	wg.Wait()
	if old != "old" {
		t.Errorf("the load begun before = %q, want its own read, old", old)
	}
	if v, _ := c.Get("k"); v != "new" {
		t.Errorf("cached = %q, want new: a read begun before an invalidation filled the cache", v)
	}
}

// TestCacheLoadSharedError: a load whose shared read failed reads on its
// own; an error is not cached.
func TestCacheLoadSharedError(t *testing.T) {
	c := New[string, int](10)
	release := make(chan struct{})
	boom := errors.New("the reader's context ended")
	var first error
	var wg sync.WaitGroup
	wg.Go(func() {
		_, first = c.Load("k", func() (int, error) { <-release; return 0, boom })
	})
	waitFlight(t, c, "k")
	var v int
	var err error
	wg.Go(func() { v, err = c.Load("k", func() (int, error) { return 5, nil }) })
	close(release)
	wg.Wait()
	if first != boom {
		t.Errorf("the failed reader's load = %v, want its error", first)
	}
	if v != 5 || err != nil {
		t.Errorf("the waiter's load = %d, %v; want its own read, 5, nil", v, err)
	}
}

// waitFlight waits until a load of k is reading.
func waitFlight[V any](t *testing.T, c *Cache[string, V], k string) {
	t.Helper()
	for {
		c.mu.RLock()
		_, ok := c.flights[k]
		c.mu.RUnlock()
		if ok {
			return
		}
		runtime.Gosched()
	}
}

// waiters is how many loads wait for the read of k under way.
func waiters[V any](c *Cache[string, V], k string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if f, ok := c.flights[k]; ok {
		return f.waiters
	}
	return 0
}
