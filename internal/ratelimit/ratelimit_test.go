package ratelimit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestTake: a bucket starts full, empties, tells how long until its next
// call, and refills with time, up to its burst; names have buckets of
// their own.
func TestTake(t *testing.T) {
	bs := New()
	now := time.Unix(1000, 0)
	for i := range 3 {
		if wait := bs.Take("a", 2, 3, now); wait != 0 {
			t.Fatalf("call %d of a full bucket: Take = %v, want 0", i+1, wait)
		}
	}
	if wait := bs.Take("a", 2, 3, now); wait != 500*time.Millisecond {
		t.Fatalf("Take on an empty bucket = %v, want 500ms", wait)
	}
	if wait := bs.Take("b", 2, 3, now); wait != 0 {
		t.Fatalf("Take(b) = %v, want 0: b has a bucket of its own", wait)
	}
	now = now.Add(500 * time.Millisecond)
	if wait := bs.Take("a", 2, 3, now); wait != 0 {
		t.Fatalf("Take after refilling one call = %v, want 0", wait)
	}
	now = now.Add(time.Hour) // refills to burst, no further
	for i := range 3 {
		if wait := bs.Take("a", 2, 3, now); wait != 0 {
			t.Fatalf("call %d after an hour: Take = %v, want 0", i+1, wait)
		}
	}
	if wait := bs.Take("a", 2, 3, now); wait == 0 {
		t.Fatal("a fourth call after an hour was admitted: the bucket held more than its burst")
	}
}

// TestPrune: past MaxBuckets, the buckets that refilled are dropped, and
// the Set stays bounded while the busy buckets keep their state.
func TestPrune(t *testing.T) {
	bs := New()
	now := time.Unix(1000, 0)
	for i := range 2 * MaxBuckets {
		bs.Take(fmt.Sprint("idle", i), 1, 1, now)
		if i%1000 == 0 && bs.Len() > MaxBuckets {
			t.Fatalf("Len = %d after %d names, want at most %d", bs.Len(), i+1, MaxBuckets)
		}
	}
	later := now.Add(time.Minute) // every idle bucket has refilled
	bs.Take("busy", 1, 1, later)
	if wait := bs.Take("busy", 1, 1, later); wait == 0 {
		t.Fatal("busy's second call was admitted")
	}
	for i := range 100 {
		bs.Take(fmt.Sprint("new", i), 1, 1, later)
	}
	if n := bs.Len(); n > MaxBuckets {
		t.Fatalf("Len = %d after pruning, want at most %d", n, MaxBuckets)
	}
	if wait := bs.Take("busy", 1, 1, later); wait == 0 {
		t.Fatal("busy's bucket was pruned though it was empty")
	}
}

// TestTakeN: n calls are taken from one bucket all together or not at
// all; a refusal says how long until the bucket holds n, and n above the
// burst is Never.
func TestTakeN(t *testing.T) {
	bs := New()
	now := time.Unix(1000, 0)
	if wait := bs.TakeN("a", 3, 2, 5, now); wait != 0 {
		t.Fatalf("TakeN(3) of a full bucket of 5 = %v, want 0", wait)
	}
	// 2 left: 3 more are refused, and none is taken.
	if wait := bs.TakeN("a", 3, 2, 5, now); wait != 500*time.Millisecond {
		t.Fatalf("TakeN(3) with 2 left = %v, want 500ms (until it holds 3)", wait)
	}
	for i := range 2 {
		if wait := bs.Take("a", 2, 5, now); wait != 0 {
			t.Fatalf("call %d after a refused TakeN: Take = %v, want 0: the refusal took calls", i+1, wait)
		}
	}
	if wait := bs.Take("a", 2, 5, now); wait == 0 {
		t.Fatal("a third call was admitted: the bucket held more than 5")
	}
	if wait := bs.TakeN("b", 6, 2, 5, now); wait != Never {
		t.Fatalf("TakeN(6) of a bucket of 5 = %v, want Never", wait)
	}
	if wait := bs.TakeN("b", 5, 2, 5, now); wait != 0 {
		t.Fatalf("TakeN(5) after TakeN(6) was refused = %v, want 0: the bucket is full", wait)
	}
}

// TestTakeAll: the claims on buckets of several Sets are taken all
// together or not at all; a refusal names the bucket that takes longest
// to hold its claim (counting Before) and leaves every bucket as it was.
func TestTakeAll(t *testing.T) {
	addr, key, acct := New(), New(), New()
	now := time.Unix(1000, 0)
	claims := func(n float64) []Claim {
		return []Claim{
			{Set: addr, Name: "192.0.2.1", PerSecond: 10, Burst: 20, N: n - 1, Before: 1},
			{Set: key, Name: "k1", PerSecond: 1, Burst: 5, N: n},
			{Set: acct, Name: "a1", PerSecond: 2, Burst: 8, N: n},
		}
	}
	if which, wait := TakeAll(now, claims(4)); which != -1 || wait != 0 {
		t.Fatalf("TakeAll(4) = %d, %v; want -1, 0", which, wait)
	}
	// Left: addr 17, key 1, acct 4. Three more: key is short by 2 (2s),
	// acct holds them (its wait counts only when it is short).
	if which, wait := TakeAll(now, claims(3)); which != 1 || wait != 2*time.Second {
		t.Fatalf("TakeAll(3) with 1 left in key = %d, %v; want 1 (key), 2s", which, wait)
	}
	if wait := addr.TakeN("192.0.2.1", 17, 10, 20, now); wait != 0 {
		t.Fatalf("address after a refused TakeAll: TakeN(17) = %v, want 0: the refusal took calls", wait)
	}
	if wait := acct.TakeN("a1", 4, 2, 8, now); wait != 0 {
		t.Fatalf("account after a refused TakeAll: TakeN(4) = %v, want 0: the refusal took calls", wait)
	}
	// Before counts in the wait: the address holds 0, and a new attempt
	// takes 1 ahead of the claim's 1, so it waits until the address holds 2.
	now = now.Add(time.Hour)
	addr.TakeN("192.0.2.1", 20, 10, 20, now)
	if which, wait := TakeAll(now, claims(2)); which != 0 || wait != 200*time.Millisecond {
		t.Fatalf("TakeAll(2) with an empty address = %d, %v; want 0 (address), 200ms", which, wait)
	}
	if wait := key.TakeN("k1", 5, 1, 5, now); wait != 0 {
		t.Fatalf("key after a refused TakeAll: TakeN(5) = %v, want 0", wait)
	}
	// More than a burst: Never, nothing taken.
	now = now.Add(time.Hour)
	if which, wait := TakeAll(now, claims(6)); which != 1 || wait != Never {
		t.Fatalf("TakeAll(6) over key's burst 5 = %d, %v; want 1, Never", which, wait)
	}
	if which, wait := TakeAll(now, claims(5)); which != -1 || wait != 0 {
		t.Fatalf("TakeAll(5) after TakeAll(6) was refused = %d, %v; want -1, 0", which, wait)
	}
	// A claim of none is left out.
	if which, wait := TakeAll(now, []Claim{{Set: key, Name: "k1", PerSecond: 1, Burst: 5}}); which != -1 || wait != 0 {
		t.Fatalf("TakeAll(a claim of none on an empty bucket) = %d, %v; want -1, 0", which, wait)
	}
	defer func() {
		if recover() == nil {
			t.Error("TakeAll with two claims on one Set did not panic")
		}
	}()
	TakeAll(now, []Claim{{Set: key, Name: "x", PerSecond: 1, Burst: 1, N: 1}, {Set: addr, Name: "x", PerSecond: 1, Burst: 1, N: 1}, {Set: key, Name: "y", PerSecond: 1, Burst: 1, N: 1}})
}

// TestTakeAllConcurrent: claims on the same Sets in every order, from
// many goroutines, neither deadlock nor take more than a bucket holds.
func TestTakeAllConcurrent(t *testing.T) {
	sets := []*Set{New(), New(), New()}
	now := time.Unix(1000, 0)
	const burst = 1000
	var mu sync.Mutex
	taken := 0
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for range 200 {
				cs := make([]Claim, 0, 3)
				for k := range 3 {
					s := sets[(g+k)%3] // each goroutine its own order
					cs = append(cs, Claim{Set: s, Name: "shared", PerSecond: 1e-9, Burst: burst, N: 3})
				}
				if which, _ := TakeAll(now, cs); which == -1 {
					mu.Lock()
					taken += 3
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if taken > burst || taken < burst-2 {
		t.Fatalf("took %d calls from buckets of %d, want %d to %d", taken, burst, burst-2, burst)
	}
	for i, s := range sets {
		if wait := s.TakeN("shared", burst-float64(taken)+1, 1e-9, burst, now); wait == 0 {
			t.Errorf("set %d holds more than %d left: the buckets went apart", i, burst-taken)
		}
	}
}
