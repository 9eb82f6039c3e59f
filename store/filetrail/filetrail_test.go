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
	"syscall"
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
	dir := t.TempDir()
	tr := openTrail(t, dir, Options{Preallocate: -1})
	appendRecords(t, tr, 1, 10, 10)
	closeTrail(t, tr)
	path := segments(t, dir)[0]
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, path, fi.Size()-3) // in record 10's payload
	tr = openTrail(t, dir, Options{Preallocate: -1})
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

// indexPath returns the path of the index file of the segment at seg.
func indexPath(seg string) string { return strings.TrimSuffix(seg, ".trail") + ".index" }

// indexFile is the content of an index file, as the package documentation
// describes it.
type indexFile struct {
	magic             string
	first, count, end uint64
	offsets           []uint64
}

// encode returns x as the bytes of an index file, with its CRC.
func (x indexFile) encode() []byte {
	b := []byte(x.magic)
	for _, v := range append([]uint64{x.first, x.count, x.end}, x.offsets...) {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// lastOffset returns the last offset of x.
func lastOffset(x indexFile) uint64 { return x.offsets[len(x.offsets)-1] }

// readIndexFile reads and parses the index file of the segment at seg.
func readIndexFile(t testing.TB, seg string) indexFile {
	t.Helper()
	b, err := os.ReadFile(indexPath(seg))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 36 || (len(b)-36)%8 != 0 {
		t.Fatalf("index file %s is %d bytes, want 36 and 8 per offset", indexPath(seg), len(b))
	}
	u64 := func(i int) uint64 { return binary.BigEndian.Uint64(b[i:]) }
	x := indexFile{magic: string(b[:8]), first: u64(8), count: u64(16), end: u64(24)}
	for i := 32; i < len(b)-4; i += 8 {
		x.offsets = append(x.offsets, u64(i))
	}
	return x
}

// segmentIndex reads the segment at seg and returns its index file,
// independently of the package.
func segmentIndex(t testing.TB, seg string) indexFile {
	t.Helper()
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	x := indexFile{magic: "RKTIDX1\n", end: uint64(len(b))}
	if _, err := fmt.Sscanf(filepath.Base(seg), "%d.trail", &x.first); err != nil {
		t.Fatal(err)
	}
	for off := uint64(0); off < x.end; x.count++ {
		if x.count%64 == 0 {
			x.offsets = append(x.offsets, off)
		}
		off += 16 + uint64(binary.BigEndian.Uint32(b[off:]))
	}
	return x
}

// wantIndexFiles checks that every segment in dir but the newest has the
// index file that describes it.
func wantIndexFiles(t testing.TB, dir string) {
	t.Helper()
	paths := segments(t, dir)
	for _, seg := range paths[:len(paths)-1] {
		got, err := os.ReadFile(indexPath(seg))
		if want := segmentIndex(t, seg).encode(); err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadFile(%s) = %x, %v; want %x", indexPath(seg), got, err, want)
		}
	}
}

// writeTrail appends records 1 to n to a new trail in dir in 16 KiB
// segments, closes it, and returns its segments.
func writeTrail(t testing.TB, dir string, n uint64) []string {
	t.Helper()
	tr := openTrail(t, dir, Options{SegmentSize: 16 << 10})
	appendRecords(t, tr, 1, n, 10)
	closeTrail(t, tr)
	paths := segments(t, dir)
	if len(paths) < 3 {
		t.Fatalf("%d records made %d segments, want 3 or more", n, len(paths))
	}
	return paths
}

// TestIndexFormat pins the bytes of an index file: a change of format
// shows up here.
func TestIndexFormat(t *testing.T) {
	dir := t.TempDir()
	tr := openTrail(t, dir, Options{SegmentSize: 1}) // every Append rolls
	if err := tr.Append([][]byte{[]byte("hello"), {}}); err != nil {
		t.Fatalf("Append(hello, empty) = %v, want nil", err)
	}
	if err := tr.Append([][]byte{[]byte("next")}); err != nil {
		t.Fatalf("Append(next) = %v, want nil", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "00000000000000000001.index"))
	if err != nil {
		t.Fatal(err)
	}
	const want = "524b54494458310a" + "0000000000000001" + "0000000000000002" + "0000000000000025" +
		"0000000000000000" + "6ee11770"
	if hex.EncodeToString(got) != want {
		t.Errorf("index file = %x, want %s", got, want)
	}
	if want := (indexFile{"RKTIDX1\n", 1, 2, 37, []uint64{0}}).encode(); !bytes.Equal(got, want) {
		t.Errorf("index file = %x, want %x", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000003.index")); !os.IsNotExist(err) {
		t.Errorf("Stat(index file of the newest segment) = %v, want not exist", err)
	}
}

func TestIndexFilesWritten(t *testing.T) {
	dir := t.TempDir()
	tr := openTrail(t, dir, Options{SegmentSize: testSegmentSize})
	appendRecords(t, tr, 1, 500, 9)
	wantIndexFiles(t, dir)
	paths := segments(t, dir)
	newest := indexPath(paths[len(paths)-1])
	if _, err := os.Stat(newest); !os.IsNotExist(err) {
		t.Errorf("Stat(%s) = %v, want not exist: the newest segment is not sealed", newest, err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmps) > 0 {
		t.Errorf("temporary files left: %q", tmps)
	}
}

// TestOpenUsesIndexFiles garbles a record in the middle of a sealed
// segment: Open does not read it, Scan does.
func TestOpenUsesIndexFiles(t *testing.T) {
	const n = 1000
	dir := t.TempDir()
	paths := writeTrail(t, dir, n)
	x := segmentIndex(t, paths[1])
	bad := x.first + 1
	off := int64(len(frame(x.first, record(x.first))))
	f, err := os.OpenFile(paths[1], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xaa}, len(frame(bad, record(bad)))), off); err != nil {
		t.Fatal(err)
	}
	f.Close()

	tr := openTrail(t, dir, Options{SegmentSize: 16 << 10})
	if got := tr.Len(); got != n {
		t.Errorf("Len() = %d, want %d", got, n)
	}
	for _, from := range []uint64{1, bad} {
		var seen uint64
		err := tr.Scan(from, func(seq uint64, rec []byte) (bool, error) { seen++; return true, nil })
		wantKind(t, fmt.Sprintf("Scan(%d)", from), err, kms.KindUnprocessable)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("record %d ", bad)) {
			t.Errorf("Scan(%d) = %v, want an error naming record %d", from, err, bad)
		}
		if seen != bad-from {
			t.Errorf("Scan(%d) called fn %d times, want %d", from, seen, bad-from)
		}
	}
	from, seen := x.first+64, uint64(0)
	err = tr.Scan(from, func(seq uint64, rec []byte) (bool, error) { seen++; return true, nil })
	if err != nil || seen != n+1-from {
		t.Errorf("Scan(%d) past the damage = %v after %d records, want nil after %d", from, err, seen, n+1-from)
	}
}

// TestOpenIgnoresBadIndexFile damages the index file of a sealed segment:
// Open reads the segment instead and writes the index file again.
func TestOpenIgnoresBadIndexFile(t *testing.T) {
	tests := []struct {
		name   string
		damage func(b []byte, x indexFile, seg string) []byte // nil removes the file
	}{
		{"missing", func(b []byte, x indexFile, seg string) []byte { return nil }},
		{"empty", func(b []byte, x indexFile, seg string) []byte { return []byte{} }},
		{"truncated", func(b []byte, x indexFile, seg string) []byte { return b[:len(b)-1] }},
		{"header only", func(b []byte, x indexFile, seg string) []byte { return b[:32] }},
		{"trailing byte", func(b []byte, x indexFile, seg string) []byte { return append(b, 0) }},
		{"bad CRC", func(b []byte, x indexFile, seg string) []byte { b[len(b)-1] ^= 1; return b }},
		{"flipped offset bit", func(b []byte, x indexFile, seg string) []byte { b[40] ^= 1; return b }},
		{"wrong magic", func(b []byte, x indexFile, seg string) []byte { x.magic = "RKTIDX2\n"; return x.encode() }},
		{"wrong first seq", func(b []byte, x indexFile, seg string) []byte { x.first++; return x.encode() }},
		{"another segment's", func(b []byte, x indexFile, seg string) []byte {
			return segmentIndex(t, strings.Replace(seg, fmt.Sprintf("%020d", x.first), fmt.Sprintf("%020d", 1), 1)).encode()
		}},
		{"count too small", func(b []byte, x indexFile, seg string) []byte { x.count--; return x.encode() }},
		{"count too large", func(b []byte, x indexFile, seg string) []byte { x.count++; return x.encode() }},
		{"end too small", func(b []byte, x indexFile, seg string) []byte { x.end--; return x.encode() }},
		{"end past the segment", func(b []byte, x indexFile, seg string) []byte { x.end++; return x.encode() }},
		{"an offset missing", func(b []byte, x indexFile, seg string) []byte {
			x.offsets = x.offsets[:len(x.offsets)-1]
			return x.encode()
		}},
		{"an offset extra", func(b []byte, x indexFile, seg string) []byte {
			x.offsets = append(x.offsets, x.end-1)
			return x.encode()
		}},
		{"first offset not 0", func(b []byte, x indexFile, seg string) []byte { x.offsets[0] = 1; return x.encode() }},
		{"offsets repeated", func(b []byte, x indexFile, seg string) []byte { x.offsets[2] = x.offsets[1]; return x.encode() }},
		{"offsets decreasing", func(b []byte, x indexFile, seg string) []byte { x.offsets[2] = x.offsets[1] - 1; return x.encode() }},
		{"offset at the end", func(b []byte, x indexFile, seg string) []byte { x.offsets[len(x.offsets)-1] = x.end; return x.encode() }},
		{"spot check: last offset one frame late", func(b []byte, x indexFile, seg string) []byte {
			k := len(x.offsets) - 1
			seq := x.first + uint64(k)*64
			x.offsets[k] += uint64(len(frame(seq, record(seq)))) // the frame of seq+1
			return x.encode()
		}},
		{"spot check: last offset inside a frame", func(b []byte, x indexFile, seg string) []byte {
			x.offsets[len(x.offsets)-1]++
			return x.encode()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const n = 1000
			dir := t.TempDir()
			paths := writeTrail(t, dir, n)
			seg := paths[1]
			orig, err := os.ReadFile(indexPath(seg))
			if err != nil {
				t.Fatal(err)
			}
			if x := readIndexFile(t, seg); len(x.offsets) < 3 {
				t.Fatalf("index file %s has %d offsets, want 3 or more", indexPath(seg), len(x.offsets))
			}
			if b := tc.damage(bytes.Clone(orig), readIndexFile(t, seg), seg); b == nil {
				err = os.Remove(indexPath(seg))
			} else {
				err = os.WriteFile(indexPath(seg), b, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}

			tr := openTrail(t, dir, Options{SegmentSize: 16 << 10})
			wantRecords(t, tr, n)
			if got, err := os.ReadFile(indexPath(seg)); err != nil || !bytes.Equal(got, orig) {
				t.Errorf("after Open, ReadFile(%s) = %x, %v; want it rebuilt as %x", indexPath(seg), got, err, orig)
			}
			appendRecords(t, tr, n+1, n+500, 10)
			wantIndexFiles(t, dir)
		})
	}
}

func TestOpenWithoutIndexFiles(t *testing.T) {
	const n = 1000
	dir := t.TempDir()
	writeTrail(t, dir, n)
	idx, err := filepath.Glob(filepath.Join(dir, "*.index"))
	if err != nil || len(idx) == 0 {
		t.Fatalf("Glob(%s/*.index) = %q, %v; want index files", dir, idx, err)
	}
	for _, path := range idx {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	tr := openTrail(t, dir, Options{SegmentSize: 16 << 10})
	wantRecords(t, tr, n)
	wantIndexFiles(t, dir)
}

// TestOpenIgnoresStrayIndexFiles leaves files that look like index files,
// or like temporary ones, where Open will find them.
func TestOpenIgnoresStrayIndexFiles(t *testing.T) {
	const n = 1000
	dir := t.TempDir()
	paths := writeTrail(t, dir, n)
	stray := map[string]string{
		indexPath(paths[0]) + ".tmp":            "a temporary file left by a crash",
		indexPath(paths[len(paths)-1]):          "an index file of the newest segment",
		indexPath(paths[len(paths)-1]) + ".tmp": "another temporary file",
		"notes.index":                           "not an index file",
		"notes.index.tmp":                       "not a temporary file",
	}
	for name, content := range stray {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// An index file that is a directory can be neither read nor replaced.
	blocked := indexPath(paths[1])
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(blocked, 0o700); err != nil {
		t.Fatal(err)
	}

	tr := openTrail(t, dir, Options{SegmentSize: 16 << 10})
	wantRecords(t, tr, n)
	if _, err := os.Stat(blocked + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("Stat(%s.tmp) = %v, want not exist: a failed write removes it", blocked, err)
	}
	appendRecords(t, tr, n+1, n+500, 10) // seals the newest segment
	closeTrail(t, tr)
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	tr = openTrail(t, dir, Options{SegmentSize: 16 << 10})
	wantRecords(t, tr, n+500)
	wantIndexFiles(t, dir)
}

// TestIndexWriteFails makes writing the index file of the segment that an
// Append seals fail: the Append succeeds, and Open writes the file.
func TestIndexWriteFails(t *testing.T) {
	tests := []struct {
		name  string
		fail  []int // sync calls of the Append that fail: 1 the sealed segment's, 2 the index file's, 3 the batch's
		block bool  // a directory stands where the temporary index file goes
	}{
		{"index file sync fails", []int{2}, false},
		{"temporary file cannot be created", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			idx := filepath.Join(dir, "00000000000000000001.index")
			tr := openTrail(t, dir, Options{SegmentSize: 1}) // every Append rolls
			appendRecords(t, tr, 1, 3, 3)
			if tc.block {
				if err := os.Mkdir(idx+".tmp", 0o700); err != nil {
					t.Fatal(err)
				}
			}
			tr.datasync = failSync(tc.fail...)
			appendRecords(t, tr, 4, 5, 2)
			if _, err := os.Stat(idx); !os.IsNotExist(err) {
				t.Errorf("Stat(%s) = %v, want not exist", idx, err)
			}
			if tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmps) > 0 && !tc.block {
				t.Errorf("temporary files left: %q", tmps)
			}
			wantRecords(t, tr, 5)
			closeTrail(t, tr)
			if tc.block {
				if err := os.Remove(idx + ".tmp"); err != nil {
					t.Fatal(err)
				}
			}

			tr = openTrail(t, dir, Options{SegmentSize: 1})
			wantRecords(t, tr, 5)
			wantIndexFiles(t, dir)
		})
	}
}

func TestOpenInvalidOptions(t *testing.T) {
	_, err := OpenWith(t.TempDir(), Options{SegmentSize: -1})
	wantKind(t, "OpenWith(SegmentSize -1)", err, kms.KindInvalid)
}

// TestScanDetectsCorruption damages record 150 of an open trail in each
// field of its frame; Scan reports it, naming the seq.
func TestScanDetectsCorruption(t *testing.T) {
	const n, bad = 200, 150
	var at int64 // offset of record bad in the only segment
	for seq := uint64(1); seq < bad; seq++ {
		at += int64(len(frame(seq, record(seq))))
	}
	for _, field := range []struct {
		name string
		off  int64
	}{{"length", 3}, {"CRC", 4}, {"seq", 15}, {"payload", 20}} {
		t.Run(field.name, func(t *testing.T) {
			dir := t.TempDir()
			tr := openTrail(t, dir, Options{})
			appendRecords(t, tr, 1, n, 50)
			flipByte(t, segments(t, dir)[0], at+field.off)
			for _, from := range []uint64{1, bad - 1, bad} {
				var seen uint64
				err := tr.Scan(from, func(seq uint64, rec []byte) (bool, error) {
					seen++
					return true, nil
				})
				wantKind(t, fmt.Sprintf("Scan(%d)", from), err, kms.KindUnprocessable)
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("record %d ", bad)) {
					t.Errorf("Scan(%d) = %v, want an error naming record %d", from, err, bad)
				}
				if seen != bad-from {
					t.Errorf("Scan(%d) called fn %d times, want %d: for the records before %d", from, seen, bad-from, bad)
				}
			}
			// A Scan whose sparse index entry lies past the damage reads
			// nothing of it.
			from, seen := uint64(1+3*indexEvery), uint64(0)
			err := tr.Scan(from, func(seq uint64, rec []byte) (bool, error) { seen++; return true, nil })
			if err != nil || seen != n+1-from {
				t.Errorf("Scan(%d) past the damage = %v after %d records, want nil after %d", from, err, seen, n+1-from)
			}
		})
	}
}

func TestAppendTooLarge(t *testing.T) {
	for name, tr := range map[string]kms.Trail{
		"file":   openTrail(t, t.TempDir(), Options{}),
		"memory": NewMemory(),
	} {
		t.Run(name, func(t *testing.T) {
			err := tr.Append([][]byte{[]byte("small"), make([]byte, MaxRecordSize+1)})
			wantKind(t, "Append(a record of MaxRecordSize+1 bytes)", err, kms.KindTooLarge)
			if got := tr.Len(); got != 0 {
				t.Errorf("Len() after a rejected Append = %d, want 0", got)
			}
			largest := bytes.Repeat([]byte{7}, MaxRecordSize)
			if err := tr.Append([][]byte{largest}); err != nil {
				t.Fatalf("Append(a record of MaxRecordSize bytes) = %v, want nil", err)
			}
			err = tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
				if !bytes.Equal(rec, largest) {
					return false, fmt.Errorf("record %d is %d bytes, want the %d written", seq, len(rec), len(largest))
				}
				return true, nil
			})
			if err != nil || tr.Len() != 1 {
				t.Errorf("Scan(1) = %v with Len() %d, want nil with 1", err, tr.Len())
			}
		})
	}
}

// failSync returns a sync function that fails on the calls whose numbers
// (from 1) are in fail, and fsyncs otherwise.
func failSync(fail ...int) func(*os.File) error {
	calls := 0
	return func(f *os.File) error {
		calls++
		for _, n := range fail {
			if calls == n {
				return errors.New("injected sync failure")
			}
		}
		return fdatasync(f)
	}
}

func TestAppendFailureWritesNothing(t *testing.T) {
	dir := t.TempDir()
	tr := openTrail(t, dir, Options{Preallocate: -1}) // the size below is the frames'
	appendRecords(t, tr, 1, 10, 10)
	path := segments(t, dir)[0]
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	tr.datasync = failSync(1) // the sync after the write fails; the one after the truncate works
	err = tr.Append([][]byte{record(11), record(12)})
	wantKind(t, "Append(sync fails)", err, kms.KindInternal)
	if got, err := os.Stat(path); err != nil {
		t.Fatal(err)
	} else if got.Size() != before.Size() {
		t.Errorf("after a failed Append, %s is %d bytes, want the %d before it", path, got.Size(), before.Size())
	}
	wantRecords(t, tr, 10)

	appendRecords(t, tr, 11, 15, 5)
	closeTrail(t, tr)
	tr = openTrail(t, dir, Options{})
	wantRecords(t, tr, 15)
}

func TestAppendFailureUndoFails(t *testing.T) {
	tr := openTrail(t, t.TempDir(), Options{})
	appendRecords(t, tr, 1, 10, 10)
	tr.datasync = failSync(1, 2, 3) // the syncs after the truncates fail too
	err := tr.Append([][]byte{record(11)})
	wantKind(t, "Append(sync fails)", err, kms.KindInternal)
	// The next Append cuts the failed one's bytes first, and writes
	// nothing while it cannot.
	err = tr.Append([][]byte{record(11)})
	wantKind(t, "Append while the failed one cannot be cut", err, kms.KindInternal)
	if err == nil || !strings.Contains(err.Error(), "after a failed append") {
		t.Errorf("Append while the failed one cannot be cut = %v, want it to say so", err)
	}
	wantRecords(t, tr, 10)
	// Once the cut succeeds, the Trail takes appends again, without a
	// reopen.
	appendRecords(t, tr, 11, 12, 2)
	wantRecords(t, tr, 12)
}

// TestAppendNoSpace: a write that fails for a full disk is an error of
// kind NoSpace, and writes nothing.
func TestAppendNoSpace(t *testing.T) {
	tr := openTrail(t, t.TempDir(), Options{})
	appendRecords(t, tr, 1, 3, 3)
	tr.datasync = func(*os.File) error { return &os.PathError{Op: "fdatasync", Path: "x", Err: syscall.ENOSPC} }
	wantKind(t, "Append(disk full)", tr.Append([][]byte{record(4)}), kms.KindNoSpace)
	tr.datasync = fdatasync
	wantRecords(t, tr, 3)
	appendRecords(t, tr, 4, 4, 1)
	wantRecords(t, tr, 4)
}

func TestUseAfterClose(t *testing.T) {
	tr := openTrail(t, t.TempDir(), Options{})
	appendRecords(t, tr, 1, 3, 3)
	closeTrail(t, tr)
	wantKind(t, "Append after Close", tr.Append([][]byte{record(4)}), kms.KindInternal)
	wantKind(t, "Scan after Close", tr.Scan(1, func(uint64, []byte) (bool, error) { return true, nil }), kms.KindInternal)
	wantKind(t, "Close after Close", tr.Close(), kms.KindInternal)
}

// BenchmarkAppend64 appends batches of 64 records of 400 bytes, as the
// Service's journal does under load; one op is one batch, fsync included.
// "preallocated" writes over zeros the filler wrote ahead, "growing"
// extends the file with every batch.
func BenchmarkAppend64(b *testing.B) {
	for _, bc := range []struct {
		name        string
		preallocate int64
	}{{"preallocated", 0}, {"growing", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			tr := openTrail(b, b.TempDir(), Options{Preallocate: bc.preallocate})
			batch := make([][]byte, 64)
			for i := range batch {
				batch[i] = bytes.Repeat([]byte{byte(i)}, 400)
			}
			b.SetBytes(64 * 400)
			b.ReportAllocs()
			for b.Loop() {
				if err := tr.Append(batch); err != nil {
					b.Fatalf("Append(64 records) = %v, want nil", err)
				}
			}
		})
	}
}
