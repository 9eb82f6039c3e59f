package ids

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNewIncreases: IDs made in one millisecond, or while the clock goes
// back, still strictly increase, from any number of goroutines; each
// parses back and starts with its time.
func TestNewIncreases(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	prev := New(now)
	for i := range 1000 {
		at := now
		if i%3 == 0 {
			at = now.Add(-time.Hour) // the clock went back
		}
		id := New(at)
		if id <= prev || len(id) != Len {
			t.Fatalf("New = %s after %s: want a greater ID of %d characters", id, prev, Len)
		}
		if _, ok := Parse(id); !ok {
			t.Fatalf("Parse(%s) failed", id)
		}
		prev = id
	}
	if later := New(now.Add(time.Hour)); later <= prev {
		t.Fatalf("New(an hour later) = %s, not after %s", later, prev)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				id := New(now)
				mu.Lock()
				if seen[id] {
					t.Errorf("New made %s twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestParse(t *testing.T) {
	for _, s := range []string{"", "0123", strings.Repeat("g", 32), strings.Repeat("0", 31), strings.Repeat("0", 33)} {
		if _, ok := Parse(s); ok {
			t.Errorf("Parse(%q) = ok, want false", s)
		}
	}
	b, ok := Parse("0102030405060708090a0b0c0d0e0f10")
	if !ok || b[0] != 1 || b[15] != 16 {
		t.Errorf("Parse = %x, %v", b, ok)
	}
}
