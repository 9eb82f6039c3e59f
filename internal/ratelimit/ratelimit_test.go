package ratelimit

import (
	"fmt"
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
