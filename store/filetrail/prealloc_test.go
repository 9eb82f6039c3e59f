package filetrail

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/kmsdtest"
)

// frameBytes returns the size of the frames of records from to to.
func frameBytes(from, to uint64) int64 {
	var n int64
	for seq := from; seq <= to; seq++ {
		n += headerSize + int64(len(record(seq)))
	}
	return n
}

// fileSize returns the size of the file at path.
func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// wantZeros checks that the file at path holds only zeros after off.
func wantZeros(t testing.TB, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(b[off:], func(r rune) bool { return r != 0 }); i >= 0 {
		t.Errorf("%s holds a byte other than zero at %d, after the last frame at %d", path, off+int64(i), off)
	}
}

func TestPreallocateFillsAhead(t *testing.T) {
	dir := t.TempDir()
	const ahead = 16 << 10
	opts := Options{SegmentSize: 1 << 20, Preallocate: ahead}
	tr := openTrail(t, dir, opts)
	appendRecords(t, tr, 1, 50, 10)
	path := segments(t, dir)[0]
	end := frameBytes(1, 50)
	// The filler runs on its own; it fills to end+ahead, and tops up
	// when less than half of that is left.
	kmsdtest.WaitFor(t, 10*time.Second, "the zeros ahead", func() bool {
		return fileSize(t, path) >= end+ahead/2
	})
	closeTrail(t, tr)
	if got := fileSize(t, path); got > end+ahead {
		t.Errorf("%s is %d bytes, want at most %d: filled past Preallocate", path, got, end+ahead)
	}
	wantZeros(t, path, end)

	// The zeros are not a torn tail: Open keeps them, and the next
	// Append writes over them.
	size := fileSize(t, path)
	tr = openTrail(t, dir, opts)
	wantRecords(t, tr, 50)
	appendRecords(t, tr, 51, 60, 10)
	closeTrail(t, tr)
	if got := fileSize(t, path); got < size {
		t.Errorf("after Open and Append, %s is %d bytes, want at least the %d it had: its zeros were cut", path, got, size)
	}
	wantZeros(t, path, frameBytes(1, 60))
	tr = openTrail(t, dir, opts)
	wantRecords(t, tr, 60)
}

func TestPreallocateStopsAtSegmentSize(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: testSegmentSize, Preallocate: 1 << 20}
	tr := openTrail(t, dir, opts)
	appendRecords(t, tr, 1, 5, 5)
	path := segments(t, dir)[0]
	kmsdtest.WaitFor(t, 10*time.Second, "the zeros ahead", func() bool {
		return fileSize(t, path) == testSegmentSize
	})
	closeTrail(t, tr)
	if got := fileSize(t, path); got != testSegmentSize {
		t.Errorf("%s is %d bytes, want the segment size, %d", path, got, testSegmentSize)
	}
}

// TestSealCutsZeros checks that every sealed segment ends with its last
// frame, and that its index file, which gives that size as the segment's
// end, is used.
func TestSealCutsZeros(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: testSegmentSize, Preallocate: testSegmentSize}
	tr := openTrail(t, dir, opts)
	next := uint64(1)
	for {
		appendRecords(t, tr, next, next+9, 10)
		next += 10
		paths := segments(t, dir)
		if len(paths) == 4 {
			break
		}
		// The filler fills the newest segment to its full size before
		// the Append that seals it.
		kmsdtest.WaitFor(t, 10*time.Second, "the zeros ahead", func() bool {
			return fileSize(t, paths[len(paths)-1]) >= testSegmentSize
		})
	}
	closeTrail(t, tr)
	paths := segments(t, dir)
	seq := uint64(1)
	for _, path := range paths[:len(paths)-1] {
		idx := segmentIndex(t, path)
		if got, want := fileSize(t, path), frameBytes(seq, seq+idx.count-1); got != want {
			t.Errorf("sealed segment %s is %d bytes, want %d, its frames", path, got, want)
		}
		seq += idx.count
	}
	wantIndexFiles(t, dir)
	tr = openTrail(t, dir, opts)
	wantRecords(t, tr, next-1)
}

// TestZeroTailIsClean covers a newest segment that ends in zeros without
// a filler having written them (preallocation off, or an older kmsd): they
// are not a torn tail either.
func TestZeroTailIsClean(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Preallocate: -1}
	tr := openTrail(t, dir, opts)
	appendRecords(t, tr, 1, 20, 10)
	closeTrail(t, tr)
	path := segments(t, dir)[0]
	appendToFile(t, path, make([]byte, 4096))
	size := fileSize(t, path)

	tr = openTrail(t, dir, opts)
	wantRecords(t, tr, 20)
	appendRecords(t, tr, 21, 30, 10)
	closeTrail(t, tr)
	if got := fileSize(t, path); got != size {
		t.Errorf("%s is %d bytes, want %d: the zeros were cut, or written after", path, got, size)
	}
	tr = openTrail(t, dir, opts)
	wantRecords(t, tr, 30)
}

// TestOpenDoesNotFill checks that a trail that is only read is not
// written: verify-audit opens the trail of a stopped kmsd.
func TestOpenDoesNotFill(t *testing.T) {
	dir, path := writtenTrail(t, 20)
	size := fileSize(t, path)

	tr := openTrail(t, dir, Options{})
	wantRecords(t, tr, 20)
	time.Sleep(50 * time.Millisecond) // room for a filler that should not run
	closeTrail(t, tr)
	if got := fileSize(t, path); got != size {
		t.Errorf("after Open, Scan and Close, %s is %d bytes, want the %d it had", path, got, size)
	}
}

// TestAppendOutrunsFiller appends batches larger than Preallocate, so
// that Appends keep writing past the zeros, and checks every record.
func TestAppendOutrunsFiller(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 256 << 10, Preallocate: 1 << 10}
	tr := openTrail(t, dir, opts)
	appendRecords(t, tr, 1, 3000, 50)
	closeTrail(t, tr)
	tr = openTrail(t, dir, opts)
	wantRecords(t, tr, 3000)
}

// TestFillerFailure checks that a filler whose writes fail stops trying
// on that segment, and tries again on the next.
func TestFillerFailure(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "segment"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var syncs atomic.Int32
	fl := newFiller(4096, 1<<20, func(*os.File) error {
		syncs.Add(1)
		return errors.New("injected sync failure")
	})
	defer fl.close()
	seg := &segment{first: 1, f: f}
	fl.release(seg, 0, 0)
	fl.claim(seg, 100)
	failed := func() bool {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		return fl.failed && !fl.busy
	}
	kmsdtest.WaitFor(t, 10*time.Second, "the filler to fail", failed)
	fl.claim(seg, 200)
	fl.claim(seg, 300)
	time.Sleep(20 * time.Millisecond)
	fl.mu.Lock()
	if n := syncs.Load(); n != 1 || fl.filled != 300 {
		t.Errorf("after a failure: %d syncs, filled %d; want 1 and 300, what Append claimed", n, fl.filled)
	}
	fl.mu.Unlock()

	next := &segment{first: 2, f: f}
	fl.release(next, 0, 0)
	fl.claim(next, 10)
	kmsdtest.WaitFor(t, 10*time.Second, "a try on the next segment", func() bool {
		return syncs.Load() == 2
	})
}
