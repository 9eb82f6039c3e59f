package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRefusals: of a key's refusals, the first of an interval is
// recorded and the others counted; the first after the interval carries
// the count; Due hands out the counts of ended intervals that no refusal
// carried, Drain all of them; keys are independent.
func TestRefusals(t *testing.T) {
	r := NewRefusals[string](time.Second)
	now := time.Unix(1000, 0)
	refuse := func(key, v string, at time.Time, wantRecord bool, wantCarried int) {
		t.Helper()
		if record, carried := r.Refuse(key, v, at); record != wantRecord || carried != wantCarried {
			t.Fatalf("Refuse(%s, %s) = %v, %d; want %v, %d", key, v, record, carried, wantRecord, wantCarried)
		}
	}
	refuse("a", "a1", now, true, 0)
	for i := range 9 {
		refuse("a", fmt.Sprint("a", i+2), now.Add(time.Duration(i)*100*time.Millisecond), false, 0)
	}
	refuse("b", "b1", now.Add(500*time.Millisecond), true, 0) // a key of its own
	refuse("b", "b2", now.Add(600*time.Millisecond), false, 0)
	if due := r.Due(now.Add(999 * time.Millisecond)); len(due) != 0 {
		t.Fatalf("Due before any interval ended = %v, want none", due)
	}
	// a's interval has ended: its next refusal carries the 9.
	refuse("a", "a11", now.Add(time.Second), true, 9)
	if due := r.Due(now.Add(time.Second)); len(due) != 0 {
		t.Fatalf("Due after a's count was carried, before b's interval ended = %v, want none", due)
	}
	refuse("a", "a12", now.Add(1100*time.Millisecond), false, 0)
	// b's interval has ended with 1 counted, and no refusal came.
	due := r.Due(now.Add(1500 * time.Millisecond))
	if len(due) != 1 || due[0] != (Pending[string]{Key: "b", V: "b1", N: 1}) {
		t.Fatalf("Due at 1.5s = %v, want b's 1 refusal, with b1", due)
	}
	refuse("b", "b3", now.Add(1600*time.Millisecond), true, 0) // b's count went with Due
	refuse("b", "b4", now.Add(1700*time.Millisecond), false, 0)
	drained := r.Drain()
	if len(drained) != 2 {
		t.Fatalf("Drain = %v, want a's and b's counts", drained)
	}
	for _, p := range drained {
		if want := map[string]Pending[string]{"a": {"a", "a11", 1}, "b": {"b", "b3", 1}}[p.Key]; p != want {
			t.Errorf("Drain: %v, want %v", p, want)
		}
	}
	if r.Len() != 0 {
		t.Fatalf("Len after Drain = %d, want 0", r.Len())
	}
	// After Drain, every refusal is recorded: no count could go anywhere.
	refuse("a", "a13", now.Add(1800*time.Millisecond), true, 0)
	refuse("a", "a14", now.Add(1800*time.Millisecond), true, 0)
}

// TestRefusalsRequeue: a count that its record could not carry is given
// back, and goes with the key's next record or with Due.
func TestRefusalsRequeue(t *testing.T) {
	r := NewRefusals[int](time.Second)
	now := time.Unix(1000, 0)
	r.Refuse("a", 1, now)
	r.Refuse("a", 2, now)
	r.Refuse("a", 3, now)
	record, carried := r.Refuse("a", 4, now.Add(time.Second))
	if !record || carried != 2 {
		t.Fatalf("Refuse after the interval = %v, %d; want true, 2", record, carried)
	}
	r.Requeue("a", 4, carried) // its record failed
	r.Refuse("a", 5, now.Add(1500*time.Millisecond))
	if record, carried := r.Refuse("a", 6, now.Add(2*time.Second)); !record || carried != 3 {
		t.Fatalf("Refuse after a requeue = %v, %d; want true, 3 (2 given back, 1 counted)", record, carried)
	}
	r.Requeue("b", 7, 5) // a key that Due had removed
	if due := r.Due(now.Add(2 * time.Second)); len(due) != 1 || due[0] != (Pending[int]{"b", 7, 5}) {
		t.Fatalf("Due after a requeue of b = %v, want b's 5", due)
	}
}

// TestRefusalsBound: many keys with counts held in open intervals stay
// under MaxBuckets; the refusals of keys past it are all recorded, so
// that records and counts still add up to every refusal. Keys whose
// interval ended with nothing counted make room.
func TestRefusalsBound(t *testing.T) {
	r := NewRefusals[struct{}](time.Second)
	now := time.Unix(1000, 0)
	refusals, counted := 0, 0
	recorded := 0
	for i := range 2 * MaxBuckets {
		for range 3 {
			refusals++
			if record, carried := r.Refuse(fmt.Sprint("k", i), struct{}{}, now); record {
				recorded++
				counted += carried
			}
		}
		if i%1000 == 0 && r.Len() > MaxBuckets {
			t.Fatalf("Len = %d after %d keys, want at most %d", r.Len(), i+1, MaxBuckets)
		}
	}
	if n := r.Len(); n > MaxBuckets || n < MaxBuckets/2 {
		t.Fatalf("Len = %d, want at most %d (and most of it used)", n, MaxBuckets)
	}
	for _, p := range r.Drain() {
		counted += p.N
	}
	if recorded+counted != refusals {
		t.Fatalf("%d recorded + %d counted, want the %d refusals", recorded, counted, refusals)
	}

	// Keys whose interval ended with nothing counted make room for new
	// ones, even before Due removes them.
	r = NewRefusals[struct{}](time.Second)
	for i := range MaxBuckets {
		r.Refuse(fmt.Sprint("k", i), struct{}{}, now)
	}
	later := now.Add(time.Second)
	for i := range 100 {
		r.Refuse(fmt.Sprint("new", i), struct{}{}, later)
		if record, _ := r.Refuse(fmt.Sprint("new", i), struct{}{}, later); record {
			t.Fatalf("new key %d: its second refusal in the interval was recorded: it found no room", i)
		}
	}
}

// TestRefusalsConcurrent: refusals of shared and own keys from many
// goroutines, with Due running beside them, are each recorded or counted
// exactly once.
func TestRefusalsConcurrent(t *testing.T) {
	r := NewRefusals[int](10 * time.Millisecond)
	start := time.Unix(1000, 0)
	var clock atomic.Int64
	now := func() time.Time { return start.Add(time.Duration(clock.Add(1)) * time.Microsecond) }
	var recorded, counted atomic.Int64
	var wg sync.WaitGroup
	const goroutines, each = 8, 2000
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				key := "shared"
				if i%2 == 1 {
					key = fmt.Sprint("own", g)
				}
				if record, carried := r.Refuse(key, g, now()); record {
					recorded.Add(1)
					counted.Add(int64(carried))
				}
			}
		})
	}
	stop := make(chan struct{})
	var dues sync.WaitGroup
	dues.Go(func() {
		for {
			for _, p := range r.Due(now()) {
				counted.Add(int64(p.N))
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	wg.Wait()
	close(stop)
	dues.Wait()
	for _, p := range r.Drain() {
		counted.Add(int64(p.N))
	}
	if got := recorded.Load() + counted.Load(); got != goroutines*each {
		t.Fatalf("%d recorded + %d counted = %d, want the %d refusals", recorded.Load(), counted.Load(), got, goroutines*each)
	}
	if recorded.Load() >= goroutines*each/2 {
		t.Fatalf("%d of %d refusals recorded: the intervals did not thin them out", recorded.Load(), goroutines*each)
	}
}

// TestRefusalsStart: once started, a tick records the counts of the
// intervals that ended, and Close those left.
func TestRefusalsStart(t *testing.T) {
	r := NewRefusals[string](10 * time.Millisecond)
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	recorded := make(chan Pending[string], 10)
	r.Start(clock, func(p Pending[string]) error { recorded <- p; return nil }, func(err error) { t.Error(err) })
	r.Refuse("a", "a1", clock())
	r.Refuse("a", "a2", clock())
	r.Refuse("b", "b1", clock())
	r.Refuse("b", "b2", clock())
	r.Refuse("b", "b3", clock())
	mu.Lock()
	now = now.Add(10 * time.Millisecond) // both intervals end
	mu.Unlock()
	got := map[string]int{}
	for range 2 {
		select {
		case p := <-recorded:
			got[p.Key] = p.N
		case <-time.After(10 * time.Second):
			t.Fatalf("the tick recorded %v, want a's and b's counts", got)
		}
	}
	if got["a"] != 1 || got["b"] != 2 {
		t.Fatalf("the tick recorded %v, want a 1, b 2", got)
	}
	r.Refuse("c", "c1", clock())
	r.Refuse("c", "c2", clock()) // its interval has not ended: Close records it
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if p := <-recorded; p != (Pending[string]{"c", "c1", 1}) {
		t.Fatalf("Close recorded %v, want c's 1", p)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}
