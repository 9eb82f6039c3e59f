// Package backupfile writes and reads the file of a ringkms backup
// (kms.Service.Backup, kms.Restore): a versioned sequence of frames
// authenticated with HMAC-SHA256 under a key that the caller derives from
// the master key, so that a backup altered anywhere (its header, an entry,
// a record, its end), cut off, reordered or with anything after its end is
// refused, and so that a Reader hands out nothing it has not authenticated.
//
// # Version 2
//
// The 8 bytes "rkmsbak" 0x02, then frames of a kind byte, a length
// (unsigned varint) and that many bytes:
//
//	'M'  JSON {"version": 2, "createdAt": RFC 3339, "records": N,
//	     and "sealedRoot": base64, when the store has a sealed root secret}
//	'A'  HMAC-SHA256 of every byte of the file before these 32 bytes
//	'K'  a store entry: key length (uvarint), key, value
//	'T'  a trail record, in order from seq 1 to N
//	'E'  the end: entries (uvarint), records (uvarint), then the
//	     HMAC-SHA256 of every byte of the file before these 32 bytes
//
// An 'A' frame follows the header at once, so that a wrong key or an
// altered header is told before anything else is read, and then each
// frame after which the frames since the last 'A' frame amount to
// AuthEvery bytes or more: a Reader holds back at most that much (and one
// frame) until it is authenticated. Every entry comes before the first
// record; nothing follows the end. Each MAC covers every byte before it,
// the MACs before it among them, so that no part of a backup can be
// moved, dropped or repeated, and an 'A' frame cannot pass for an end.
//
// # Version 1
//
// Version 1 ("rkmsbak" 0x01, the same frames but 'A') ended with a plain
// SHA-256 of what came before it, which anyone can recompute: it told
// damage, not alteration. A Reader refuses it with ErrUnauthenticated.
package backupfile

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

const (
	magic   = "rkmsbak\x02"
	magicV1 = "rkmsbak\x01"
	// Version is the version of the backups a Writer writes.
	Version = 2
)

// Frame kinds.
const (
	frameMeta   = 'M'
	frameAuth   = 'A'
	frameEntry  = 'K'
	frameRecord = 'T'
	frameEnd    = 'E'
)

// AuthEvery is how many bytes of frames at most go without an 'A' frame
// after them.
const AuthEvery = 1 << 20

// maxFrame bounds one frame a Reader reads: far above any store value or
// record, below what would exhaust memory.
const maxFrame = 256 << 20

// Meta is the header of a backup.
type Meta struct {
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	Records   uint64    `json:"records"` // the trail records it holds
	// SealedRoot is the backed-up store's root secret as the store holds
	// it, sealed under its root key (kms.RootKey), from which the caller
	// derives the key; absent for a store whose root secret is its
	// master key.
	SealedRoot []byte `json:"sealedRoot,omitempty"`
}

// Writer writes a backup. Its methods keep the first error and return it
// from then on.
type Writer struct {
	w                *bufio.Writer
	mac              hash.Hash
	err              error
	entries, records uint64
	since            int // bytes of frames since the last 'A' frame
	hdr              [1 + binary.MaxVarintLen64]byte
}

// NewWriter starts a backup on w, authenticated under key, with its
// header.
func NewWriter(w io.Writer, key [32]byte, meta Meta) *Writer {
	bw := &Writer{w: bufio.NewWriterSize(w, 256<<10), mac: hmac.New(sha256.New, key[:])}
	meta.Version = Version
	m, _ := json.Marshal(meta)
	bw.write([]byte(magic))
	bw.head(frameMeta, len(m))
	bw.write(m)
	bw.auth()
	return bw
}

func (bw *Writer) write(b []byte) {
	if bw.err != nil {
		return
	}
	bw.mac.Write(b)
	_, bw.err = bw.w.Write(b)
}

// head writes the kind and length of a frame of n bytes and returns the
// size of the whole frame.
func (bw *Writer) head(kind byte, n int) int {
	bw.hdr[0] = kind
	h := binary.AppendUvarint(bw.hdr[:1], uint64(n))
	bw.write(h)
	return len(h) + n
}

// auth writes an 'A' frame: the MAC of everything before its body.
func (bw *Writer) auth() {
	bw.head(frameAuth, sha256.Size)
	bw.write(bw.mac.Sum(nil))
	bw.since = 0
}

// wrote counts a frame of n bytes, and authenticates what came before
// when that makes AuthEvery bytes.
func (bw *Writer) wrote(n int) {
	if bw.since += n; bw.since >= AuthEvery {
		bw.auth()
	}
}

// Entry writes a store entry. Entries come before records.
func (bw *Writer) Entry(k, v []byte) error {
	var l [binary.MaxVarintLen64]byte
	kl := binary.AppendUvarint(l[:0], uint64(len(k)))
	n := bw.head(frameEntry, len(kl)+len(k)+len(v))
	bw.write(kl)
	bw.write(k)
	bw.write(v)
	bw.entries++
	bw.wrote(n)
	return bw.err
}

// Record writes the next trail record.
func (bw *Writer) Record(rec []byte) error {
	n := bw.head(frameRecord, len(rec))
	bw.write(rec)
	bw.records++
	bw.wrote(n)
	return bw.err
}

// Close writes the end and flushes; it does not close the underlying
// writer.
func (bw *Writer) Close() error {
	tail := binary.AppendUvarint(nil, bw.entries)
	tail = binary.AppendUvarint(tail, bw.records)
	bw.head(frameEnd, len(tail)+sha256.Size)
	bw.write(tail)
	bw.write(bw.mac.Sum(nil))
	if bw.err != nil {
		return bw.err
	}
	return bw.w.Flush()
}

// Item is a store entry (Key and Value) or a trail record (Record).
type Item struct {
	Key, Value, Record []byte
}

// ErrDamaged is wrapped by every error about a backup that is not an
// intact one.
var ErrDamaged = errors.New("not an intact backup")

// ErrKey is wrapped, with ErrDamaged, by the error of a backup whose
// header does not authenticate: it was made under another key, or its
// header was altered (the two cannot be told apart).
var ErrKey = errors.New("its header does not authenticate under the key: it was made under another key, or altered")

// ErrUnauthenticated is the error of a backup of version 1, whose digest
// anyone can recompute: whoever could write it could have altered it.
var ErrUnauthenticated = errors.New("a backup of version 1, which carries no authentication (a plain SHA-256 that anyone can recompute)")

func damaged(why string, args ...any) error {
	return fmt.Errorf("%w: "+why, append([]any{ErrDamaged}, args...)...)
}

// Reader reads a backup, authenticating it as it goes.
type Reader struct {
	r                *bufio.Reader
	mac              hash.Hash // nil: the MACs are not checked
	meta             Meta
	off              int64 // bytes read
	entries, records uint64
	since            int    // bytes of frames since the last 'A' frame
	pending          []Item // read, not yet authenticated
	ready            []Item // authenticated, not yet handed out
	done             bool
	err              error
}

// NewReader reads and authenticates the start of a backup under key and
// returns its header. A backup made under another key, or with its header
// altered, is an error wrapping ErrKey; one of version 1 is
// ErrUnauthenticated.
func NewReader(r io.Reader, key [32]byte) (*Reader, Meta, error) {
	return NewReaderFor(r, func(Meta) ([32]byte, error) { return key, nil })
}

// NewReaderFor is NewReader with the key that keyFor derives from the
// header, which it reads first; the header is authenticated under that
// key before NewReaderFor returns. An error of keyFor is returned as it
// is.
func NewReaderFor(r io.Reader, keyFor func(Meta) ([32]byte, error)) (*Reader, Meta, error) {
	return newReader(r, keyFor)
}

// deferredMAC keeps what is written to it until the key is known.
type deferredMAC struct{ buf []byte }

func (d *deferredMAC) Write(p []byte) (int, error) { d.buf = append(d.buf, p...); return len(p), nil }
func (d *deferredMAC) Sum(b []byte) []byte         { return b }
func (d *deferredMAC) Reset()                      { d.buf = d.buf[:0] }
func (d *deferredMAC) Size() int                   { return sha256.Size }
func (d *deferredMAC) BlockSize() int              { return sha256.BlockSize }

// NewUncheckedReader reads a backup as NewReader does, but for its MACs,
// which it does not check: it checks the framing, the order and the
// counts alone. It is for a writer that checks, without the key, that
// what it has just written is whole; nothing it hands out is
// authenticated, and nothing read from elsewhere may be trusted with it.
func NewUncheckedReader(r io.Reader) (*Reader, Meta, error) {
	return newReader(r, nil)
}

func newReader(r io.Reader, keyFor func(Meta) ([32]byte, error)) (*Reader, Meta, error) {
	br := &Reader{r: bufio.NewReaderSize(r, 256<<10)}
	var pending *deferredMAC
	if keyFor != nil {
		pending = &deferredMAC{}
		br.mac = pending
	}
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(br.r, m); err != nil || string(m[:len(m)-1]) != magic[:len(magic)-1] {
		return nil, Meta{}, damaged("it does not start as a ringkms backup")
	}
	switch string(m) {
	case magic:
	case magicV1:
		return nil, Meta{}, ErrUnauthenticated
	default:
		return nil, Meta{}, damaged("it is a backup of version %d; this one reads version %d", m[len(m)-1], Version)
	}
	br.off = int64(len(m))
	br.sum(m)
	kind, body, _, err := br.frame()
	if err != nil {
		return nil, Meta{}, err
	}
	if kind != frameMeta {
		return nil, Meta{}, damaged("it has no header frame")
	}
	br.sum(body)
	if err := json.Unmarshal(body, &br.meta); err != nil || br.meta.Version != Version {
		return nil, Meta{}, damaged("its header is not of version %d", Version)
	}
	if pending != nil {
		key, err := keyFor(br.meta)
		if err != nil {
			return nil, Meta{}, err
		}
		br.mac = hmac.New(sha256.New, key[:])
		br.mac.Write(pending.buf)
		clear(key[:])
	}
	if kind, body, _, err = br.frame(); err != nil {
		return nil, Meta{}, err
	}
	if kind != frameAuth || len(body) != sha256.Size {
		return nil, Meta{}, damaged("its header is not followed by its MAC")
	}
	if !br.check(body) {
		return nil, Meta{}, fmt.Errorf("%w: %w", ErrDamaged, ErrKey)
	}
	br.sum(body)
	return br, br.meta, nil
}

// sum adds b to the MAC.
func (br *Reader) sum(b []byte) {
	if br.mac != nil {
		br.mac.Write(b)
	}
}

// check reports whether mac is the MAC of everything summed so far.
func (br *Reader) check(mac []byte) bool {
	return br.mac == nil || hmac.Equal(mac, br.mac.Sum(nil))
}

// Next returns the next entry or record once it is authenticated, and
// io.EOF after an end whose MAC and counts check out with nothing after
// it. An error is final: it comes again from every later call. Bodies are
// new memory, owned by the caller.
func (br *Reader) Next() (Item, error) {
	for len(br.ready) == 0 {
		if br.err != nil {
			return Item{}, br.err
		}
		if br.done {
			return Item{}, io.EOF
		}
		br.err = br.step()
	}
	it := br.ready[0]
	br.ready[0] = Item{}
	br.ready = br.ready[1:]
	return it, nil
}

// step reads one frame: an entry or record is held back; an 'A' frame or
// the end that checks out releases what is held back.
func (br *Reader) step() error {
	at := br.off
	kind, body, n, err := br.frame()
	if err != nil {
		return err
	}
	if br.since >= AuthEvery && kind != frameAuth {
		return damaged("the MAC that must follow byte %d is missing", at)
	}
	switch kind {
	case frameEntry:
		if br.records > 0 {
			return damaged("a store entry follows trail records")
		}
		kl, m := binary.Uvarint(body)
		if m <= 0 || kl == 0 || kl > uint64(len(body)-m) {
			return damaged("store entry %d is malformed", br.entries+1)
		}
		br.sum(body)
		br.since += n
		br.entries++
		br.pending = append(br.pending, Item{Key: body[m : m+int(kl)], Value: body[m+int(kl):]})
		return nil
	case frameRecord:
		br.sum(body)
		br.since += n
		br.records++
		br.pending = append(br.pending, Item{Record: body})
		return nil
	case frameAuth:
		if len(body) != sha256.Size {
			return damaged("the MAC at byte %d is malformed", at)
		}
		if !br.check(body) {
			return damaged("it does not authenticate at byte %d: it was altered or damaged", at)
		}
		br.sum(body)
		br.since = 0
		br.ready, br.pending = br.pending, nil
		return nil
	case frameEnd:
		entries, n1 := binary.Uvarint(body)
		records, n2 := binary.Uvarint(body[max(n1, 0):])
		if n1 <= 0 || n2 <= 0 || len(body) != n1+n2+sha256.Size {
			return damaged("its end is malformed")
		}
		br.sum(body[:n1+n2])
		if !br.check(body[n1+n2:]) {
			return damaged("it does not authenticate at its end: it was altered or damaged")
		}
		if entries != br.entries || records != br.records || records != br.meta.Records {
			return damaged("it holds %d entries and %d records, its end says %d and %d", br.entries, br.records, entries, records)
		}
		if _, err := br.r.ReadByte(); err != io.EOF {
			return damaged("there are bytes after its end")
		}
		br.done = true
		br.ready, br.pending = br.pending, nil
		return nil
	case frameMeta:
		return damaged("it has two header frames")
	}
	return damaged("a frame of unknown kind 0x%02x at byte %d", kind, at)
}

// frame reads one frame. Its kind and length go into the MAC, its body is
// the caller's to add; n is the size of the whole frame.
func (br *Reader) frame() (kind byte, body []byte, n int, err error) {
	cut := damaged("it is cut off before its end")
	kind, err = br.r.ReadByte()
	if err != nil {
		return 0, nil, 0, cut
	}
	var l [1 + binary.MaxVarintLen64]byte
	l[0] = kind
	n = 1
	for {
		if n == len(l) {
			return 0, nil, 0, damaged("a frame length is malformed")
		}
		c, err := br.r.ReadByte()
		if err != nil {
			return 0, nil, 0, cut
		}
		l[n] = c
		n++
		if c < 0x80 {
			break
		}
	}
	br.sum(l[:n])
	size, m := binary.Uvarint(l[1:n])
	if m <= 0 || size > maxFrame {
		return 0, nil, 0, damaged("a frame of %d bytes", size)
	}
	body = make([]byte, size)
	if _, err := io.ReadFull(br.r, body); err != nil {
		return 0, nil, 0, cut
	}
	br.off += int64(n) + int64(size)
	return kind, body, n + int(size), nil
}
