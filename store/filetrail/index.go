package filetrail

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// An index file caches what Open would otherwise read a whole sealed
// segment to learn; see the package documentation for its format.
const (
	indexSuffix = ".index"    // of index file names, after 20 digits
	indexMagic  = "RKTIDX1\n" // format and version
	indexHeader = 8 + 3*8     // magic, first seq, record count, end offset
	tmpSuffix   = ".tmp"      // of an index file being written, after its name
)

// indexName returns the file name of the index of the segment that starts
// at first.
func indexName(first uint64) string { return fmt.Sprintf("%020d%s", first, indexSuffix) }

// encodeIndex returns the index file of seg, a segment of count records.
func encodeIndex(seg *segment, count uint64) []byte {
	b := make([]byte, 0, indexHeader+8*len(seg.index)+4)
	b = append(b, indexMagic...)
	b = binary.BigEndian.AppendUint64(b, seg.first)
	b = binary.BigEndian.AppendUint64(b, count)
	b = binary.BigEndian.AppendUint64(b, uint64(seg.end))
	for _, off := range seg.index {
		b = binary.BigEndian.AppendUint64(b, uint64(off))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeIndex returns the sparse index in the index file b, and whether b
// is a valid index of the segment that starts at first, holds count
// records and ends at end.
func decodeIndex(b []byte, first, count uint64, end int64) ([]int64, bool) {
	body := len(b) - 4
	if body < indexHeader || (body-indexHeader)%8 != 0 ||
		crc32.Checksum(b[:body], castagnoli) != binary.BigEndian.Uint32(b[body:]) ||
		string(b[:len(indexMagic)]) != indexMagic {
		return nil, false
	}
	h := b[len(indexMagic):]
	want := count / indexEvery
	if count%indexEvery != 0 {
		want++
	}
	if binary.BigEndian.Uint64(h[0:]) != first || binary.BigEndian.Uint64(h[8:]) != count ||
		binary.BigEndian.Uint64(h[16:]) != uint64(end) || uint64(body-indexHeader)/8 != want ||
		(count == 0) != (end == 0) {
		return nil, false
	}
	index := make([]int64, want)
	for i := range index {
		off := binary.BigEndian.Uint64(b[indexHeader+8*i:])
		if off >= uint64(end) || i == 0 && off != 0 || i > 0 && int64(off) <= index[i-1] {
			return nil, false
		}
		index[i] = int64(off)
	}
	return index, true
}

// openIndexed opens the sealed segment that starts at first and holds
// count records from its index file, reading of the segment only the frame
// at the last offset of the index, to check it is the record the index
// says. It returns nil if the index file is missing or does not fit the
// segment: the caller then reads the segment.
func openIndexed(dir string, first, count uint64, r *frameReader) *segment {
	f, err := os.Open(filepath.Join(dir, segName(first)))
	if err != nil {
		return nil
	}
	seg := &segment{first: first, f: f}
	if fi, err := f.Stat(); err == nil {
		seg.end = fi.Size()
		seg.index, err = readIndex(dir, first, count, seg.end)
		if err == nil && len(seg.index) > 0 {
			k := len(seg.index) - 1
			r.reset(f, seg.index[k], seg.end)
			_, err = r.next(first + uint64(k)*indexEvery)
		}
		if err == nil {
			return seg
		}
	}
	f.Close()
	return nil
}

// readIndex reads the index file of the segment that starts at first,
// holds count records and ends at end, and returns its sparse index.
func readIndex(dir string, first, count uint64, end int64) ([]int64, error) {
	f, err := os.Open(filepath.Join(dir, indexName(first)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A valid index file has at most one offset per indexEvery records of
	// at least headerSize bytes: read no more than that, and a byte.
	limit := indexHeader + 8*(end/headerSize/indexEvery+1) + 4 + 1
	b, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, err
	}
	index, ok := decodeIndex(b, first, count, end)
	if !ok {
		return nil, errCorrupt
	}
	return index, nil
}

// writeIndex writes the index file of seg, a sealed segment of count
// records: to a temporary file, synced, then renamed into place, and the
// directory synced.
func (t *Trail) writeIndex(seg *segment, count uint64) error {
	path := filepath.Join(t.dir, indexName(seg.first))
	f, err := os.OpenFile(path+tmpSuffix, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(encodeIndex(seg, count))
	if err == nil {
		err = t.datasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(path+tmpSuffix, path)
	}
	if err != nil {
		os.Remove(path + tmpSuffix)
		return err
	}
	return syncDir(t.dir)
}
