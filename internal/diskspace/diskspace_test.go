package diskspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ringkms/kms/internal/base"
)

// TestGuardBallast follows a Guard with a ballast as free space falls
// below the reserve and comes back: it holds the ballast while writes go
// ahead, gives it up when it refuses them, and takes it back only once
// there is room for the reserve and the ballast both.
func TestGuardBallast(t *testing.T) {
	dir := t.TempDir()
	ballast := filepath.Join(dir, "ballast")
	const reserve = 4 << 10
	g := New(dir, reserve, ballast)
	if g.Reserve() != reserve {
		t.Fatalf("Reserve() = %d, want %d", g.Reserve(), reserve)
	}
	var free uint64
	g.free = func(string) (uint64, error) { return free, nil }
	held := func() bool {
		fi, err := os.Stat(ballast)
		return err == nil && fi.Size() == reserve/BallastFraction
	}
	steps := []struct {
		name     string
		free     uint64
		wantFull bool
		wantHeld bool
	}{
		{"no ballast yet, room for both", reserve + reserve/BallastFraction, false, true},
		{"held, above the reserve", reserve, false, true},
		{"below the reserve", reserve - 1, true, false},
		{"the reserve again, not the ballast", reserve, true, false},
		{"room for both", reserve + reserve/BallastFraction, false, true},
	}
	for _, s := range steps {
		free = s.free
		err := g.Check()
		if full := base.ErrorKind(err) == base.KindNoSpace; full != s.wantFull || err != nil && !full {
			t.Fatalf("%s: Check() = %v, want NoSpace %v", s.name, err, s.wantFull)
		}
		if held() != s.wantHeld {
			t.Fatalf("%s: ballast held %v, want %v", s.name, held(), s.wantHeld)
		}
	}
	g.Release()
	if held() {
		t.Fatal("the ballast is still there after Release")
	}
	if New(dir, reserve, ballast); held() {
		t.Fatal("New made the ballast: Check does")
	}
}

// TestGuardOff: a Guard with no reserve, or that cannot read the free
// space, lets every write go ahead.
func TestGuardOff(t *testing.T) {
	g := New(t.TempDir(), 0, "")
	g.free = func(string) (uint64, error) { return 0, nil }
	if err := g.Check(); err != nil || g.Reserve() != 0 {
		t.Fatalf("a Guard with no reserve: Check() = %v, Reserve() = %d", err, g.Reserve())
	}
	g = New(t.TempDir(), 1<<20, "")
	g.free = func(string) (uint64, error) { return 0, errors.New("statfs failed") }
	if err := g.Check(); err != nil {
		t.Fatalf("Check() when the free space cannot be read = %v, want nil", err)
	}
}
