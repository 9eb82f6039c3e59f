package filetrail

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

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
