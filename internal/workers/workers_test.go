package workers

import (
	"sync/atomic"
	"testing"
)

// TestTryGo: a Pool runs at most n functions at once, refuses more while
// they run, takes more once they end, and Wait waits for them all.
func TestTryGo(t *testing.T) {
	p := New(2)
	release := make(chan struct{})
	var ran atomic.Int32
	for i := range 2 {
		if !p.TryGo(func() { <-release; ran.Add(1) }) {
			t.Fatalf("TryGo #%d refused with a free slot", i+1)
		}
	}
	if p.TryGo(func() { ran.Add(1) }) {
		t.Fatal("TryGo ran a third function with both slots busy")
	}
	close(release)
	p.Wait()
	if got := ran.Load(); got != 2 {
		t.Fatalf("Wait returned after %d functions, want 2", got)
	}
	if !p.TryGo(func() { ran.Add(1) }) {
		t.Fatal("TryGo refused once the slots were free")
	}
	p.Wait()
	if got := ran.Load(); got != 3 {
		t.Fatalf("ran %d functions, want 3", got)
	}
}
