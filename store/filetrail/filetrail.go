package filetrail

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/diskspace"
)

var _ kms.Trail = (*Trail)(nil)

const (
	// MaxRecordSize is the largest record Append takes, in bytes.
	MaxRecordSize = 16 << 20

	// DefaultSegmentSize is Options.SegmentSize when it is zero.
	DefaultSegmentSize = 64 << 20

	headerSize = 16       // u32 length, u32 CRC, u64 seq
	indexEvery = 64       // the sparse index holds every 64th record's offset
	suffix     = ".trail" // of segment file names, after 20 digits
	maxKeptBuf = 1 << 20  // Append keeps its encoding buffer up to this size
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks a frame that is not a valid record: short, with a bad
// length, CRC or seq. Open truncates the newest segment at such a frame.
var errCorrupt = errors.New("corrupt frame")

// Options configures a Trail.
type Options struct {
	// SegmentSize is the size in bytes at which a segment is full: the
	// next Append starts a new segment. Zero means DefaultSegmentSize.
	SegmentSize int64

	// Preallocate is how many bytes of zeros are kept written and synced
	// after the newest segment's last record, up to SegmentSize, so that
	// Append does not grow the file. Zero means DefaultPreallocate; a
	// negative value turns preallocation off.
	Preallocate int64
}

// Trail is a kms.Trail kept in segment files in one directory; see the
// package documentation for the format. It is safe for concurrent use by
// one appender and any number of readers.
type Trail struct {
	dir      string
	segSize  int64
	datasync func(*os.File) error // fdatasync; tests replace it to fail
	fill     *filler              // writes zeros ahead of the newest segment's last frame

	wmu    sync.Mutex // held by Append and Close: one writer at a time
	buf    []byte     // Append's encoding buffer, under wmu
	broken error      // set under wmu when a failed Append could not be undone
	torn   bool       // the newest segment has bytes after its last good frame, under wmu

	// tail, set by Open, says why the trail's records end where they do
	// when bytes follow the last good one: the first bad frame of the
	// newest segment (a torn write, or damage), or damage that no crash
	// explains (a bad frame in a sealed segment, a missing segment), in
	// which case damaged is set too and the trail takes no Append.
	tail    *kms.Error
	damaged bool

	mu     sync.RWMutex // guards what readers see: n, segs, and each segment's end and index
	n      uint64
	segs   []*segment
	closed bool
}

// segment is one file of the trail. first and f never change; end and
// index grow under Trail.mu, in the newest segment only.
type segment struct {
	first uint64   // seq of the first record, also when there is none yet
	f     *os.File // read-write for the newest segment, read-only for the others
	end   int64    // offset after the last good frame
	index []int64  // index[i] is the offset of record first+i*indexEvery
}

// Open opens the trail in dir, creating dir if it does not exist, with the
// default Options.
func Open(dir string) (*Trail, error) { return OpenWith(dir, Options{}) }

// OpenWith opens the trail in dir, creating dir (mode 0700) if it does not
// exist. It reads the newest segment to check it and build its sparse
// index, and truncates a torn frame at its end. It takes each older
// segment's sparse index from the segment's index file if that is valid,
// and otherwise reads the segment too and writes its index file.
func OpenWith(dir string, opts Options) (*Trail, error) {
	if opts.SegmentSize < 0 {
		return nil, kms.Errorf(kms.KindInvalid, "trail segment size %d is negative", opts.SegmentSize)
	}
	if opts.SegmentSize == 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.Preallocate == 0 {
		opts.Preallocate = DefaultPreallocate
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, internal(err, "creating trail directory %s", dir)
	}
	firsts, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	t := &Trail{dir: dir, segSize: opts.SegmentSize, datasync: fdatasync}
	var r frameReader
	filled := int64(0) // the newest segment holds frames or zeros up to here
	for i, first := range firsts {
		if first != t.n+1 {
			// A missing segment (or one out of place): the trail ends
			// before it, and takes no Append.
			t.tail, t.damaged = damage("trail segment %s starts at record %d, want %d: a segment is missing or out of place", segName(first), first, t.n+1), true
			break
		}
		last := i == len(firsts)-1
		var seg *segment
		var n uint64
		if !last {
			// A sealed segment holds the records up to the next one's first.
			n = firsts[i+1] - first
			seg = openIndexed(dir, first, n, &r)
		}
		if seg == nil {
			var bad *kms.Error
			var err error
			if seg, n, bad, err = loadSegment(dir, first, last, &r); err != nil {
				t.closeFiles()
				return nil, err
			}
			if bad != nil && !last {
				// Damage in a sealed segment: the trail ends before it.
				t.segs = append(t.segs, seg)
				t.n += n
				t.tail, t.damaged = bad, true
				break
			}
			if !last {
				t.writeIndex(seg, n) // best effort: the next Open tries again
			} else if filled, err = tail(seg); err != nil {
				t.closeFiles()
				return nil, err
			} else if filled < 0 {
				t.torn = true
				t.tail = bad
				if bad == nil { // a frame that checks, followed by no zeros
					t.tail = damage("trail segment %s has bytes after its last whole record, at offset %d", segName(first), seg.end)
				}
			}
		}
		t.segs = append(t.segs, seg)
		t.n += n
	}
	t.fill = newFiller(opts.Preallocate, opts.SegmentSize, fdatasync)
	if len(t.segs) > 0 && !t.torn && !t.damaged {
		seg := t.segs[len(t.segs)-1]
		t.fill.release(seg, seg.end, filled)
	}
	return t, nil
}

// tail looks at what the newest segment holds after its last good frame:
// nothing or only zeros (preallocated), and it returns the file's size; or
// anything else, a torn tail, and it returns -1.
func tail(seg *segment) (int64, error) {
	fi, err := seg.f.Stat()
	if err != nil {
		return 0, internal(err, "opening trail segment %s", segName(seg.first))
	}
	zero, err := zeroTail(seg.f, seg.end, fi.Size())
	if err != nil {
		return 0, internal(err, "reading the end of trail segment %s", segName(seg.first))
	}
	if !zero {
		return -1, nil
	}
	return fi.Size(), nil
}

// listSegments returns the first seqs of the segments in dir, in order.
// Files without the ".trail" suffix, index files among them, are not
// segments and are left alone.
func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, internal(err, "listing trail directory %s", dir)
	}
	var firsts []uint64
	for _, e := range entries {
		digits, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok {
			continue
		}
		first, err := strconv.ParseUint(digits, 10, 64)
		if err != nil || len(digits) != 20 || first == 0 || !e.Type().IsRegular() {
			return nil, internal(err, "trail directory %s holds %s, which is not a segment", dir, e.Name())
		}
		firsts = append(firsts, first) // in order: ReadDir sorts by name
	}
	return firsts, nil
}

// loadSegment opens the segment that starts at first, checks every frame
// and indexes it, and returns it with its number of records. At a bad
// frame, the segment ends: bad then describes it (in the newest segment,
// last, it may be a torn tail).
func loadSegment(dir string, first uint64, last bool, r *frameReader) (_ *segment, _ uint64, bad *kms.Error, err error) {
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	name := segName(first)
	f, err := os.OpenFile(filepath.Join(dir, name), flag, 0)
	if err != nil {
		return nil, 0, nil, internal(err, "opening trail segment %s", name)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, nil, internal(err, "opening trail segment %s", name)
	}
	seg := &segment{first: first, f: f}
	r.reset(f, 0, fi.Size())
	seq := first
	for ; ; seq++ {
		off := r.off
		_, err := r.next(seq)
		if err == io.EOF {
			break
		}
		if errors.Is(err, errCorrupt) {
			// The segment ends at off. The bytes after it stay (until the
			// next Append cuts a torn tail), so that a trail its owner
			// refuses to use is left as it was found.
			bad = damage("trail record %d in segment %s at offset %d is damaged (%v)", seq, name, off, err)
			break
		}
		if err != nil {
			return nil, 0, nil, internal(err, "reading record %d of trail segment %s at offset %d", seq, name, off)
		}
		if (seq-first)%indexEvery == 0 {
			seg.index = append(seg.index, off)
		}
		seg.end = r.off
	}
	return seg, seq - first, bad, nil
}

// Check reports whether the trail holds the records 1 to want, whole, and
// takes appends: nil, or an error of kind Unprocessable naming the first
// record that is missing or damaged, where (segment file and offset), and
// why. A torn tail, which a crash during an Append leaves, is no damage
// while want does not reach into it: those records were never durable.
func (t *Trail) Check(want uint64) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	n := t.Len()
	switch {
	case t.damaged:
		return t.tail
	case want <= n:
		return nil
	case t.tail != nil && t.torn:
		return t.tail
	default:
		return damage("trail ends after record %d: the records from %d on are missing", n, n+1)
	}
}

// damage is an error of kind Unprocessable: a record found damaged or
// missing.
func damage(format string, args ...any) *kms.Error {
	return &kms.Error{Kind: kms.KindUnprocessable, Message: fmt.Sprintf(format, args...)}
}

// Len returns the number of records.
func (t *Trail) Len() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.n
}

// Append writes recs as the next records and returns once they are on
// disk. It rejects a record over MaxRecordSize with an error of kind
// TooLarge, writing nothing. On any error, Len is unchanged.
func (t *Trail) Append(recs [][]byte) error {
	size := 0
	for i, rec := range recs {
		if len(rec) > MaxRecordSize {
			return kms.Errorf(kms.KindTooLarge, "trail record %d of the batch is %d bytes, over the limit of %d", i, len(rec), MaxRecordSize)
		}
		size += headerSize + len(rec)
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	switch {
	case t.closed: // written only under wmu, so it can be read here
		return errClosed
	case t.damaged:
		return t.tail
	case len(recs) == 0:
		return nil
	}
	var seg *segment
	if len(t.segs) > 0 {
		seg = t.segs[len(t.segs)-1]
	}
	if t.broken != nil {
		// An earlier failed Append could not cut what it may have
		// written: try again, and write nothing until it is cut.
		t.fill.hold()
		if err := seg.f.Truncate(seg.end); err != nil {
			return writeError(err, "cutting trail segment %s back to offset %d after a failed append", segName(seg.first), seg.end)
		}
		if err := t.datasync(seg.f); err != nil {
			return writeError(err, "cutting trail segment %s back to offset %d after a failed append", segName(seg.first), seg.end)
		}
		t.broken = nil
		t.fill.release(seg, seg.end, seg.end)
	}
	if t.torn {
		// Cut the torn tail Open found, before anything is written
		// after it: no byte of it may be read as a record later.
		t.fill.hold()
		if err := seg.f.Truncate(seg.end); err != nil {
			return writeError(err, "cutting the torn tail of trail segment %s at offset %d", segName(seg.first), seg.end)
		}
		if err := t.datasync(seg.f); err != nil {
			return writeError(err, "cutting the torn tail of trail segment %s at offset %d", segName(seg.first), seg.end)
		}
		t.torn, t.tail = false, nil
		t.fill.release(seg, seg.end, seg.end)
	}
	if seg == nil || seg.end >= t.segSize {
		var err error
		if seg, err = t.roll(); err != nil {
			return err
		}
	}

	// Encode the batch, noting the offsets the sparse index gains.
	buf, idx := t.buf[:0], []int64(nil)
	if cap(buf) < size {
		buf = make([]byte, 0, size)
	}
	for i, rec := range recs {
		seq := t.n + 1 + uint64(i)
		if (seq-seg.first)%indexEvery == 0 {
			idx = append(idx, seg.end+int64(len(buf)))
		}
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(rec)))
		at := len(buf)
		buf = binary.BigEndian.AppendUint32(buf, 0) // the CRC, below
		buf = binary.BigEndian.AppendUint64(buf, seq)
		buf = append(buf, rec...)
		binary.BigEndian.PutUint32(buf[at:], crc32.Checksum(buf[at+4:], castagnoli))
	}
	if cap(buf) <= maxKeptBuf {
		t.buf = buf
	}

	t.fill.claim(seg, seg.end+int64(len(buf)))
	_, err := seg.f.WriteAt(buf, seg.end)
	if err == nil {
		err = t.datasync(seg.f)
	}
	if err != nil {
		// Cut what may have reached the file, so that no frame of this
		// failed batch is read as a record after a reopen. The zeros
		// after it go too; the filler writes them again.
		t.fill.hold()
		if terr := seg.f.Truncate(seg.end); terr != nil {
			t.broken = terr
		} else if terr := t.datasync(seg.f); terr != nil {
			t.broken = terr
		} else {
			t.fill.release(seg, seg.end, seg.end)
		}
		return writeError(err, "appending %d records to trail segment %s", len(recs), segName(seg.first))
	}
	t.mu.Lock()
	seg.end += int64(len(buf))
	seg.index = append(seg.index, idx...)
	t.n += uint64(len(recs))
	t.mu.Unlock()
	return nil
}

// roll seals the newest segment, if there is one, and then starts a new
// segment at the next seq and makes it the newest. The caller holds wmu.
func (t *Trail) roll() (*segment, error) {
	first := t.n + 1
	if len(t.segs) > 0 {
		// Seal: cut the zeros after the last frame and sync, before a
		// newer segment exists, so that a sealed segment never ends in
		// anything but a frame. The sync also covers a segment opened
		// full, which may not have been synced since its records were
		// written: its index file never describes more than is durable.
		prev := t.segs[len(t.segs)-1]
		t.fill.hold()
		if err := prev.f.Truncate(prev.end); err != nil {
			return nil, writeError(err, "sealing trail segment %s", segName(prev.first))
		}
		if err := t.datasync(prev.f); err != nil {
			return nil, writeError(err, "sealing trail segment %s", segName(prev.first))
		}
		t.writeIndex(prev, first-prev.first) // best effort: Open rebuilds a missing one
	}
	path := filepath.Join(t.dir, segName(first))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, writeError(err, "creating trail segment %s", segName(first))
	}
	if err := syncDir(t.dir); err != nil {
		f.Close()
		os.Remove(path)
		return nil, internal(err, "syncing trail directory %s", t.dir)
	}
	seg := &segment{first: first, f: f}
	t.mu.Lock()
	t.segs = append(t.segs, seg)
	t.mu.Unlock()
	t.fill.release(seg, 0, 0)
	return seg, nil
}

// segmentView is what a Scan reads of one segment: its records up to end.
type segmentView struct {
	first uint64
	f     *os.File
	end   int64
}

// Scan calls fn with the records from seq from onwards (from 0 counts as
// 1), up to the last one appended when Scan began, until fn returns false
// or an error; fn's error is returned unchanged. The slice passed to fn is
// reused after fn returns. A frame that fails its check is an error of
// kind Internal that names the seq.
func (t *Trail) Scan(from uint64, fn func(seq uint64, rec []byte) (more bool, err error)) error {
	from = max(from, 1)
	t.mu.RLock()
	if t.closed {
		t.mu.RUnlock()
		return errClosed
	}
	n := t.n
	if from > n {
		t.mu.RUnlock()
		return nil
	}
	// The segment holding from is the last one that starts at or before it.
	i := sort.Search(len(t.segs), func(i int) bool { return t.segs[i].first > from }) - 1
	seg := t.segs[i]
	k := (from - seg.first) / indexEvery
	seq, off := seg.first+k*indexEvery, seg.index[k]
	views := make([]segmentView, 0, len(t.segs)-i)
	for _, s := range t.segs[i:] {
		views = append(views, segmentView{s.first, s.f, s.end})
	}
	t.mu.RUnlock()

	var r frameReader
	for _, v := range views {
		r.reset(v.f, off, v.end)
		for ; seq <= n; seq++ {
			rec, err := r.next(seq)
			if err == io.EOF {
				break
			}
			if errors.Is(err, errCorrupt) {
				// Damage, not a failure to read: the trail's contract
				// names it Unprocessable, as a broken chain is.
				return &kms.Error{Kind: kms.KindUnprocessable, Err: err,
					Message: fmt.Sprintf("trail record %d in segment %s at offset %d is damaged: %v", seq, segName(v.first), r.off, err)}
			}
			if err != nil {
				return internal(err, "reading trail record %d in segment %s at offset %d", seq, segName(v.first), r.off)
			}
			if seq < from {
				continue
			}
			if more, err := fn(seq, rec); err != nil || !more {
				return err
			}
		}
		off = 0
	}
	if seq <= n {
		return internal(nil, "trail record %d is missing: the segments end before it", seq)
	}
	return nil
}

// Close closes the segment files. Every later call fails with an error of
// kind Internal; Scans in progress may fail too.
func (t *Trail) Close() error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errClosed
	}
	t.closed = true
	t.fill.close()
	return t.closeFiles()
}

// closeFiles closes every segment file and returns the first error.
func (t *Trail) closeFiles() error {
	var first error
	for _, s := range t.segs {
		if err := s.f.Close(); err != nil && first == nil {
			first = internal(err, "closing trail segment %s", segName(s.first))
		}
	}
	t.segs = nil
	return first
}

// frameReader reads the frames of one segment in order, from an offset up
// to an end, through a buffer of positioned reads.
type frameReader struct {
	br  *bufio.Reader
	off int64  // offset of the next frame
	buf []byte // seq and payload of the last frame read
}

// reset makes r read f from off to end.
func (r *frameReader) reset(f *os.File, off, end int64) {
	sr := io.NewSectionReader(f, off, end-off)
	if r.br == nil {
		r.br = bufio.NewReaderSize(sr, 64<<10)
	} else {
		r.br.Reset(sr)
	}
	r.off = off
}

// next reads the frame at r.off, checks that it is record seq, and returns
// its payload, valid until the next call. At the end, exactly after a
// frame, it returns io.EOF; a frame that fails a check is an error that
// wraps errCorrupt; other errors are the file's.
func (r *frameReader) next(seq uint64) ([]byte, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r.br, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%w: short header", errCorrupt)
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[0:])
	if n > MaxRecordSize {
		return nil, fmt.Errorf("%w: length %d over the limit of %d", errCorrupt, n, MaxRecordSize)
	}
	if need := 8 + int(n); cap(r.buf) < need {
		r.buf = make([]byte, need)
	}
	r.buf = r.buf[:8+n]
	copy(r.buf, hdr[8:])
	if _, err := io.ReadFull(r.br, r.buf[8:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%w: short payload", errCorrupt)
		}
		return nil, err
	}
	if crc := crc32.Checksum(r.buf, castagnoli); crc != binary.BigEndian.Uint32(hdr[4:]) {
		return nil, fmt.Errorf("%w: bad CRC", errCorrupt)
	}
	if got := binary.BigEndian.Uint64(hdr[8:]); got != seq {
		return nil, fmt.Errorf("%w: seq %d, want %d", errCorrupt, got, seq)
	}
	r.off += headerSize + int64(n)
	return r.buf[8:], nil
}

// segName returns the file name of the segment that starts at first.
func segName(first uint64) string { return fmt.Sprintf("%020d%s", first, suffix) }

// syncDir fsyncs dir, so that a file created in it survives a crash.
// Windows cannot sync a directory, and does not need to.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// errClosed is the error of a Trail used after Close.
var errClosed = &kms.Error{Kind: kms.KindInternal, Message: "trail is closed"}

// writeError is the error of a failed write: of kind NoSpace when the
// file system is full (the caller may see that much), else Internal.
func writeError(err error, format string, args ...any) error {
	if diskspace.IsNoSpace(err) {
		return &kms.Error{Kind: kms.KindNoSpace, Message: "insufficient storage: the activity trail's disk is full",
			Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)}
	}
	return internal(err, format, args...)
}

// internal returns an error of kind Internal with a formatted message and
// cause err, which may be nil.
func internal(err error, format string, args ...any) error {
	return &kms.Error{Kind: kms.KindInternal, Message: fmt.Sprintf(format, args...), Err: err}
}
