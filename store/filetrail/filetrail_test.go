package filetrail

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/storetest"
)

// testSegmentSize is small enough that a few hundred records roll segments.
const testSegmentSize = 4 << 10

// openTrail opens the trail in dir and closes it at the end of t, unless
// the test closed it first.
func openTrail(t testing.TB, dir string, opts Options) *Trail {
	t.Helper()
	tr, err := OpenWith(dir, opts)
	if err != nil {
		t.Fatalf("OpenWith(%q, %+v) = %v, want nil", dir, opts, err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil && err != errClosed {
			t.Errorf("Close() = %v, want nil", err)
		}
	})
	return tr
}

// closeTrail closes tr, failing t on error.
func closeTrail(t testing.TB, tr *Trail) {
	t.Helper()
	if err := tr.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
}

// writtenTrail writes records 1 to n, in batches of 10, to a new trail
// without preallocated space, as one segment, and closes it; it returns
// the trail's directory and the segment's path.
func writtenTrail(t testing.TB, n uint64) (dir, seg string) {
	t.Helper()
	dir = t.TempDir()
	tr := openTrail(t, dir, Options{Preallocate: -1})
	appendRecords(t, tr, 1, n, 10)
	closeTrail(t, tr)
	return dir, segments(t, dir)[0]
}

// record returns the content these tests append as record seq.
func record(seq uint64) []byte {
	return fmt.Appendf(nil, "record %d %s", seq, strings.Repeat("x", int(seq%50)))
}

// frame encodes record seq as the package documentation describes it,
// independently of Append.
func frame(seq uint64, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(append(binary.BigEndian.AppendUint64(nil, seq), payload...), crc32.MakeTable(crc32.Castagnoli)))
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, payload...)
}

// appendRecords appends the records from seq from up to to, in batches of
// batch records.
func appendRecords(t testing.TB, tr kms.Trail, from, to uint64, batch int) {
	t.Helper()
	var recs [][]byte
	for seq := from; seq <= to; seq++ {
		recs = append(recs, record(seq))
		if len(recs) == batch || seq == to {
			if err := tr.Append(recs); err != nil {
				t.Fatalf("Append(records %d to %d) = %v, want nil", seq+1-uint64(len(recs)), seq, err)
			}
			recs = recs[:0]
		}
	}
}

// wantRecords checks that tr holds exactly the records 1 to n.
func wantRecords(t testing.TB, tr kms.Trail, n uint64) {
	t.Helper()
	if got := tr.Len(); got != n {
		t.Errorf("Len() = %d, want %d", got, n)
	}
	next := uint64(1)
	err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
		if seq != next || !bytes.Equal(rec, record(seq)) {
			return false, fmt.Errorf("record %d = %q, want record %d = %q", seq, rec, next, record(next))
		}
		next++
		return true, nil
	})
	if err != nil || next != n+1 {
		t.Errorf("Scan(1) = %v after %d records, want nil after %d", err, next-1, n)
	}
}

// segments returns the paths of the segment files in dir, in order.
func segments(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.trail"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("Glob(%s/*.trail) = %q, %v; want segments", dir, paths, err)
	}
	return paths
}

// wantKind checks that err is a *kms.Error of the given kind.
func wantKind(t testing.TB, what string, err error, kind kms.Kind) {
	t.Helper()
	var e *kms.Error
	if !errors.As(err, &e) || e.Kind != kind {
		t.Errorf("%s = %v, want a kms error of kind %v", what, err, kind)
	}
}

// appendToFile appends b to the file at path.
func appendToFile(t testing.TB, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// flipByte inverts the byte at off in the file at path.
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	storetest.RunTrail(t, func(t testing.TB) kms.Trail {
		return openTrail(t, t.TempDir(), Options{SegmentSize: testSegmentSize})
	})
}

func TestConformanceMemory(t *testing.T) {
	storetest.RunTrail(t, func(t testing.TB) kms.Trail { return NewMemory() })
}

// TestFormat pins the bytes of a segment: a change of format shows up here.
func TestFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "trail")
	tr := openTrail(t, dir, Options{})
	if err := tr.Append([][]byte{[]byte("hello"), {}}); err != nil {
		t.Fatalf("Append(hello, empty) = %v, want nil", err)
	}
	closeTrail(t, tr)
	path := filepath.Join(dir, "00000000000000000001.trail")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got = bytes.TrimRight(got, "\x00") // preallocated zeros after the last frame
	const want = "00000005" + "8c680384" + "0000000000000001" + "68656c6c6f" +
		"00000000" + "6d13c27d" + "0000000000000002"
	if hex.EncodeToString(got) != want {
		t.Errorf("segment = %x, want %s", got, want)
	}
	if want := append(frame(1, []byte("hello")), frame(2, nil)...); !bytes.Equal(got, want) {
		t.Errorf("segment = %x, want frames %x", got, want)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("Stat(%s) mode = %v, want %v", path, fi.Mode(), want)
		}
	}
}

func TestSegmentsRoll(t *testing.T) {
	dir := t.TempDir()
	tr := openTrail(t, dir, Options{SegmentSize: testSegmentSize})
	appendRecords(t, tr, 1, 500, 9)
	paths := segments(t, dir)
	if len(paths) < 3 {
		t.Fatalf("500 records in %d-byte segments made %d segments, want 3 or more", testSegmentSize, len(paths))
	}
	next := uint64(1)
	for i, path := range paths {
		if want := filepath.Join(dir, fmt.Sprintf("%020d.trail", next)); path != want {
			t.Errorf("segment %d = %s, want %s", i, path, want)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if i < len(paths)-1 && len(b) < testSegmentSize {
			t.Errorf("segment %s is %d bytes, want at least %d: it was rolled early", path, len(b), testSegmentSize)
		}
		if i == len(paths)-1 {
			b = bytes.TrimRight(b, "\x00") // preallocated; no record ends in a zero byte
		}
		// Each segment holds whole batches of 9, except the last batch.
		for len(b) > 0 {
			if want := frame(next, record(next)); !bytes.HasPrefix(b, want) {
				t.Fatalf("segment %s: record %d is not %x", path, next, want)
			}
			b = b[len(frame(next, record(next))):]
			next++
		}
		if next%9 != 1 && next != 501 {
			t.Errorf("segment %s ends with record %d, within a batch", path, next-1)
		}
	}
	wantRecords(t, tr, 500)
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: testSegmentSize}
	tr := openTrail(t, dir, opts)
	appendRecords(t, tr, 1, 300, 7)
	closeTrail(t, tr)

	tr = openTrail(t, dir, opts)
	wantRecords(t, tr, 300)
	appendRecords(t, tr, 301, 310, 3)
	closeTrail(t, tr)

	tr = openTrail(t, dir, Options{}) // a larger SegmentSize is fine too
	wantRecords(t, tr, 310)
}

func TestScanFromEverySeq(t *testing.T) {
	tr := openTrail(t, t.TempDir(), Options{SegmentSize: 8 << 10})
	const n = 700
	appendRecords(t, tr, 1, n, 13)
	for from := uint64(0); from <= n+1; from++ {
		first, count := uint64(0), uint64(0)
		err := tr.Scan(from, func(seq uint64, rec []byte) (bool, error) {
			if count == 0 {
				first = seq
			}
			count++
			if !bytes.Equal(rec, record(seq)) {
				return false, fmt.Errorf("record %d = %q, want %q", seq, rec, record(seq))
			}
			return true, nil
		})
		wantFirst, wantCount := max(from, 1), n+1-max(from, 1)
		if wantCount == 0 {
			wantFirst = 0
		}
		if err != nil || first != wantFirst || count != wantCount {
			t.Errorf("Scan(%d) = %v, %d records from %d; want nil, %d records from %d", from, err, count, first, wantCount, wantFirst)
		}
	}
}

func TestTornTail(t *testing.T) {
	const n = 100
	next := frame(n+1, record(n+1))
	tests := []struct {
		name string
		tail []byte
	}{
		{"garbage", []byte("this is not a frame, nor the start of one")},
		{"zeros, then garbage", append(make([]byte, 4096), 1)},
		// A batch written over preallocated zeros, its end lost in a crash.
		{"short payload, then zeros", append(append([]byte{}, next[:len(next)-5]...), make([]byte, 4096)...)},
		{"short header", next[:10]},
		{"short payload", next[:len(next)-1]},
		{"bad length", binary.BigEndian.AppendUint32(nil, MaxRecordSize+1)},
		{"bad CRC", append(append([]byte{}, next[:4]...), append([]byte{^next[4]}, next[5:]...)...)},
		{"unexpected seq", frame(n+2, record(n+2))},
		{"repeated seq", frame(n, record(n))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// No preallocated zeros: the sizes below are those of the frames.
			opts := Options{SegmentSize: testSegmentSize, Preallocate: -1}
			tr := openTrail(t, dir, opts)
			appendRecords(t, tr, 1, n, 10)
			closeTrail(t, tr)
			paths := segments(t, dir)
			last := paths[len(paths)-1]
			fi, err := os.Stat(last)
			if err != nil {
				t.Fatal(err)
			}
			appendToFile(t, last, tc.tail)

			tr = openTrail(t, dir, opts)
			wantRecords(t, tr, n)
			// Open leaves the file as it found it; the next Append cuts
			// the tail before it writes.
			if got, err := os.Stat(last); err != nil {
				t.Fatal(err)
			} else if got.Size() != fi.Size()+int64(len(tc.tail)) {
				t.Errorf("after Open, %s is %d bytes, want the %d bytes it had", last, got.Size(), fi.Size()+int64(len(tc.tail)))
			}
			appendRecords(t, tr, n+1, n+10, 4)
			closeTrail(t, tr)
			want := fi.Size() + frameBytes(n+1, n+10)
			if got, err := os.Stat(last); err != nil {
				t.Fatal(err)
			} else if len(segments(t, dir)) == len(paths) && got.Size() != want {
				t.Errorf("after Append, %s is %d bytes, want %d: the torn tail was not cut", last, got.Size(), want)
			}

			tr = openTrail(t, dir, opts)
			wantRecords(t, tr, n+10)
		})
	}
}

func TestEmptyLastSegment(t *testing.T) {
	dir := t.TempDir()
	// Segment 1 is sealed below by hand, not by Append: it must not end
	// in preallocated zeros.
	tr := openTrail(t, dir, Options{Preallocate: -1})
	appendRecords(t, tr, 1, 10, 10)
	closeTrail(t, tr)
	empty := filepath.Join(dir, fmt.Sprintf("%020d.trail", 11))
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	tr = openTrail(t, dir, Options{})
	wantRecords(t, tr, 10)
	appendRecords(t, tr, 11, 12, 2)
	closeTrail(t, tr)
	if fi, err := os.Stat(empty); err != nil || fi.Size() == 0 {
		t.Errorf("Append after an empty last segment did not write to it: Stat(%s) = %v", empty, err)
	}
	tr = openTrail(t, dir, Options{})
	wantRecords(t, tr, 12)
}

// TestOpenDamaged covers damage that no crash explains: the trail opens
// with the records before the damage, Check names the damage whatever it
// is asked, and Append is refused, so that nothing is written after it.
func TestOpenDamaged(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string, paths []string)
	}{
		{"corrupt frame in an earlier segment without an index file", func(t *testing.T, dir string, paths []string) {
			flipByte(t, paths[0], 100)
			if err := os.Remove(indexPath(paths[0])); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupt frame at the last offset of an index file", func(t *testing.T, dir string, paths []string) {
			// The spot check fails, so Open reads the segment.
			flipByte(t, paths[0], int64(lastOffset(readIndexFile(t, paths[0])))+20)
		}},
		{"short earlier segment", func(t *testing.T, dir string, paths []string) {
			fi, err := os.Stat(paths[1])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(paths[1], fi.Size()-1); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage after an earlier segment", func(t *testing.T, dir string, paths []string) {
			appendToFile(t, paths[0], []byte("garbage"))
		}},
		{"gap", func(t *testing.T, dir string, paths []string) {
			if err := os.Remove(paths[1]); err != nil {
				t.Fatal(err)
			}
		}},
		{"first segment missing", func(t *testing.T, dir string, paths []string) {
			if err := os.Remove(paths[0]); err != nil {
				t.Fatal(err)
			}
		}},
		{"overlap", func(t *testing.T, dir string, paths []string) {
			var first uint64
			if _, err := fmt.Sscanf(filepath.Base(paths[1]), "%d.trail", &first); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(paths[1], filepath.Join(dir, fmt.Sprintf("%020d.trail", first-1))); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tr := openTrail(t, dir, Options{SegmentSize: testSegmentSize})
			appendRecords(t, tr, 1, 300, 10)
			closeTrail(t, tr)
			paths := segments(t, dir)
			if len(paths) < 3 {
				t.Fatalf("300 records made %d segments, want 3 or more", len(paths))
			}
			tc.damage(t, dir, paths)
			tr = openTrail(t, dir, Options{SegmentSize: testSegmentSize})
			n := tr.Len()
			if n >= 300 {
				t.Fatalf("Len() of a damaged trail = %d, want the records before the damage", n)
			}
			wantRecords(t, tr, n)
			for _, want := range []uint64{0, n, 300} {
				err := tr.Check(want)
				wantKind(t, fmt.Sprintf("Check(%d)", want), err, kms.KindUnprocessable)
				if err != nil && !strings.Contains(err.Error(), ".trail") {
					t.Errorf("Check(%d) = %v, want it to name the segment file", want, err)
				}
			}
			wantKind(t, "Append after the damage", tr.Append([][]byte{record(n + 1)}), kms.KindUnprocessable)
			wantRecords(t, tr, n)
		})
	}
}

// TestOpenFailsOnStrayName: a file that is named like a segment but is
// not one is no trail this package wrote: Open refuses to guess.
func TestOpenFailsOnStrayName(t *testing.T) {
	dir := t.TempDir()
	tr := openTrail(t, dir, Options{})
	appendRecords(t, tr, 1, 3, 3)
	closeTrail(t, tr)
	if err := os.WriteFile(filepath.Join(dir, "1.trail"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := OpenWith(dir, Options{})
	if err == nil {
		tr.Close()
	}
	wantKind(t, "OpenWith(stray segment name)", err, kms.KindInternal)
}

// TestCheckTornTail: a torn tail is no damage while the records asked
// for come before it; past it, Check names the record, the segment and
// the offset.
func TestCheckTornTail(t *testing.T) {
	dir, path := writtenTrail(t, 10)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, path, fi.Size()-3) // in record 10's payload
	tr := openTrail(t, dir, Options{Preallocate: -1})
	wantRecords(t, tr, 9)
	if err := tr.Check(9); err != nil {
		t.Errorf("Check(9) before a torn tail = %v, want nil", err)
	}
	err = tr.Check(12)
	wantKind(t, "Check(12) past a torn tail", err, kms.KindUnprocessable)
	for _, want := range []string{"record 10", filepath.Base(path), "offset"} {
		if err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("Check(12) = %v, want it to say %q", err, want)
		}
	}
	// The next Append cuts the torn tail and writes in its place.
	appendRecords(t, tr, 10, 11, 2)
	if err := tr.Check(11); err != nil {
		t.Errorf("Check(11) after the tail was cut and appended to = %v", err)
	}
}

func TestOpenIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a segment"), 0o600); err != nil {
		t.Fatal(err)
	}
	tr := openTrail(t, dir, Options{})
	appendRecords(t, tr, 1, 3, 3)
	wantRecords(t, tr, 3)
}
