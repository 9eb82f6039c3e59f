// Package backupfile writes and reads the file of a ringkms backup
// (kms.Service.Backup, kms.Restore): a versioned sequence of frames with a
// digest and counts at its end, so that a backup cut off, altered or with
// anything after its end is refused.
//
// Version 1: the 8 bytes "rkmsbak" 0x01, then frames of a kind byte, a
// length (unsigned varint) and that many bytes:
//
//	'M'  JSON {"version": 1, "createdAt": RFC 3339, "records": N}
//	'K'  a store entry: key length (uvarint), key, value
//	'T'  a trail record, in order from seq 1 to N
//	'E'  the end: entries (uvarint), records (uvarint), then SHA-256 of
//	     every byte before this frame
//
// Every entry comes before the first record.
package backupfile

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

const magic = "rkmsbak\x01"

// Frame kinds.
const (
	frameMeta   = 'M'
	frameEntry  = 'K'
	frameRecord = 'T'
	frameEnd    = 'E'
)

// maxFrame bounds one frame a Reader reads: far above any store value or
// record, below what would exhaust memory.
const maxFrame = 256 << 20

// Meta is the header of a backup.
type Meta struct {
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	Records   uint64    `json:"records"` // the trail records it holds
}

// Writer writes a backup. Its methods keep the first error and return it
// from then on.
type Writer struct {
	w                *bufio.Writer
	h                hash.Hash
	err              error
	entries, records uint64
	hdr              [1 + binary.MaxVarintLen64]byte
}

// NewWriter starts a backup on w with its header.
func NewWriter(w io.Writer, meta Meta) *Writer {
	bw := &Writer{w: bufio.NewWriterSize(w, 256<<10), h: sha256.New()}
	meta.Version = 1
	m, _ := json.Marshal(meta)
	bw.write([]byte(magic))
	bw.frame(frameMeta, m)
	return bw
}

func (bw *Writer) write(b []byte) {
	if bw.err != nil {
		return
	}
	bw.h.Write(b)
	_, bw.err = bw.w.Write(b)
}

func (bw *Writer) head(kind byte, n int) {
	bw.hdr[0] = kind
	bw.write(binary.AppendUvarint(bw.hdr[:1], uint64(n)))
}

func (bw *Writer) frame(kind byte, b []byte) {
	bw.head(kind, len(b))
	bw.write(b)
}

// Entry writes a store entry. Entries come before records.
func (bw *Writer) Entry(k, v []byte) error {
	var l [binary.MaxVarintLen64]byte
	kl := binary.AppendUvarint(l[:0], uint64(len(k)))
	bw.head(frameEntry, len(kl)+len(k)+len(v))
	bw.write(kl)
	bw.write(k)
	bw.write(v)
	bw.entries++
	return bw.err
}

// Record writes the next trail record.
func (bw *Writer) Record(rec []byte) error {
	bw.frame(frameRecord, rec)
	bw.records++
	return bw.err
}

// Close writes the end and flushes; it does not close the underlying
// writer.
func (bw *Writer) Close() error {
	tail := binary.AppendUvarint(nil, bw.entries)
	tail = binary.AppendUvarint(tail, bw.records)
	sum := bw.h.Sum(nil)
	bw.head(frameEnd, len(tail)+len(sum))
	bw.write(tail)
	bw.write(sum)
	if bw.err != nil {
		return bw.err
	}
	return bw.w.Flush()
}

// Reader reads a backup, checking it as it goes.
type Reader struct {
	r                *bufio.Reader
	h                hash.Hash
	meta             Meta
	entries, records uint64
	done             bool
}

// Item is a store entry (Key and Value) or a trail record (Record).
type Item struct {
	Key, Value, Record []byte
}

// ErrDamaged is wrapped by every error about a backup that is not an
// intact one.
var ErrDamaged = errors.New("not an intact backup")

func damaged(why string, args ...any) error {
	return fmt.Errorf("%w: "+why, append([]any{ErrDamaged}, args...)...)
}

// NewReader reads the start of a backup and returns its header.
func NewReader(r io.Reader) (*Reader, Meta, error) {
	br := &Reader{r: bufio.NewReaderSize(r, 256<<10), h: sha256.New()}
	m := make([]byte, len(magic))
	if err := br.full(m); err != nil || string(m) != magic {
		return nil, Meta{}, damaged("it does not start as a ringkms backup of version 1")
	}
	kind, body, err := br.frame()
	if err != nil {
		return nil, Meta{}, err
	}
	if kind != frameMeta {
		return nil, Meta{}, damaged("it has no header frame")
	}
	if err := json.Unmarshal(body, &br.meta); err != nil || br.meta.Version != 1 {
		return nil, Meta{}, damaged("its header is not of version 1")
	}
	return br, br.meta, nil
}

// Next returns the next entry or record, and io.EOF after an end whose
// digest and counts check out with nothing after it. Bodies are new
// memory, owned by the caller.
func (br *Reader) Next() (Item, error) {
	if br.done {
		return Item{}, io.EOF
	}
	sum := br.h.Sum(nil) // the digest before the frame, for an end
	kind, body, err := br.frame()
	if err != nil {
		return Item{}, err
	}
	switch kind {
	case frameEntry:
		if br.records > 0 {
			return Item{}, damaged("a store entry follows trail records")
		}
		kl, n := binary.Uvarint(body)
		if n <= 0 || kl == 0 || kl > uint64(len(body)-n) {
			return Item{}, damaged("store entry %d is malformed", br.entries+1)
		}
		br.entries++
		return Item{Key: body[n : n+int(kl)], Value: body[n+int(kl):]}, nil
	case frameRecord:
		br.records++
		return Item{Record: body}, nil
	case frameEnd:
		entries, n1 := binary.Uvarint(body)
		records, n2 := binary.Uvarint(body[max(n1, 0):])
		if n1 <= 0 || n2 <= 0 || len(body) != n1+n2+sha256.Size {
			return Item{}, damaged("its end is malformed")
		}
		if !bytes.Equal(body[n1+n2:], sum) {
			return Item{}, damaged("its digest does not match: it was altered or damaged")
		}
		if entries != br.entries || records != br.records || records != br.meta.Records {
			return Item{}, damaged("it holds %d entries and %d records, its end says %d and %d", br.entries, br.records, entries, records)
		}
		if _, err := br.r.ReadByte(); err != io.EOF {
			return Item{}, damaged("there are bytes after its end")
		}
		br.done = true
		return Item{}, io.EOF
	case frameMeta:
		return Item{}, damaged("it has two header frames")
	}
	return Item{}, damaged("a frame of unknown kind 0x%02x", kind)
}

func (br *Reader) full(b []byte) error {
	if _, err := io.ReadFull(br.r, b); err != nil {
		return err
	}
	br.h.Write(b)
	return nil
}

// frame reads one frame.
func (br *Reader) frame() (byte, []byte, error) {
	cut := damaged("it is cut off before its end")
	kind, err := br.r.ReadByte()
	if err != nil {
		return 0, nil, cut
	}
	br.h.Write([]byte{kind})
	var l [binary.MaxVarintLen64]byte
	n := 0
	for {
		if n == len(l) {
			return 0, nil, damaged("a frame length is malformed")
		}
		c, err := br.r.ReadByte()
		if err != nil {
			return 0, nil, cut
		}
		l[n] = c
		n++
		if c < 0x80 {
			break
		}
	}
	br.h.Write(l[:n])
	size, _ := binary.Uvarint(l[:n])
	if size > maxFrame {
		return 0, nil, damaged("a frame of %d bytes", size)
	}
	body := make([]byte, size)
	if err := br.full(body); err != nil {
		return 0, nil, cut
	}
	return kind, body, nil
}
