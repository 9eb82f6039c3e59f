package kms

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

// A backup is a consistent copy of a Service's store and activity trail,
// taken while it serves: the store as one snapshot and the trail up to
// the last record of the batches that snapshot holds, so that the copy
// is the service as it stood between two batches. It holds what the
// store holds, which is only ever sealed secrets, so it is no more
// sensitive than the data directory; it opens only with the master key.
//
// The format, version 1: the 8 bytes "rkmsbak" 0x01, then frames of a
// kind byte, a length (unsigned varint) and that many bytes:
//
//	'M'  JSON {"version": 1, "createdAt": RFC 3339, "records": N}
//	'K'  a store entry: key length (uvarint), key, value
//	'T'  a trail record, in order from seq 1 to N
//	'E'  the end: entries (uvarint), records (uvarint), then SHA-256 of
//	     every byte before this frame
//
// Restore refuses a backup that is cut off, altered (the digest), or has
// anything after its end.
const backupMagic = "rkmsbak\x01"

// Frame kinds of a backup.
const (
	frameMeta   = 'M'
	frameEntry  = 'K'
	frameRecord = 'T'
	frameEnd    = 'E'
)

// maxBackupFrame bounds one frame that Restore reads: far above any store
// value or record (Asset data and props are capped in KiB), below what
// would exhaust memory.
const maxBackupFrame = 256 << 20

// BackupInfo describes a backup.
type BackupInfo struct {
	CreatedAt time.Time `json:"createdAt"`
	Entries   uint64    `json:"entries"` // store entries
	Records   uint64    `json:"records"` // activity records: the trail's length
}

type backupMeta struct {
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"createdAt"`
	Records   uint64    `json:"records"`
}

// Backup writes a consistent backup of the service to w while it serves.
// The journal is held between two batches only while the store's snapshot
// is taken; writes go on while the backup is written. The backup is itself
// an activity record (action "backup", by "operator"), which it holds. It
// is for operators: the caller holds the Service, and so the master key,
// already (kmsd backup). A store whose trail is shared by a cluster is
// refused: its database has its own backup tools (docs/OPERATIONS.md).
func (s *Service) Backup(ctx context.Context, w io.Writer) (*BackupInfo, error) {
	if s.journal.shared != nil {
		return nil, Errorf(KindInvalid, "backup: the store is shared by a cluster; back up its database with the database's own tools (docs/OPERATIONS.md)")
	}
	op := &Principal{Kind: PrincipalAPIKey, ID: "operator", flags: Flags{FlagRoot: true}}
	if err := s.record(op, "backup", "", nil, nil); err != nil {
		return nil, err
	}
	seq, resume, err := s.journal.quiesce()
	if err != nil {
		return nil, err
	}
	defer resume()
	info := &BackupInfo{CreatedAt: s.now().UTC(), Records: seq}
	bw := newBackupWriter(w)
	meta, _ := json.Marshal(backupMeta{Version: 1, CreatedAt: info.CreatedAt, Records: seq})
	bw.frame(frameMeta, meta)
	err = s.store.View(ctx, func(tx Txn) error {
		// A read fixes the snapshot (some stores take it at the first
		// read); then the journal goes on.
		if _, err := tx.Get(keyActPending); err != nil && !isNotFound(err) {
			return err
		}
		resume()
		return tx.Scan(ScanOptions{}, func(k, v []byte) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			info.Entries++
			bw.entry(k, v)
			return bw.err == nil, bw.err
		})
	})
	if err != nil {
		return nil, backupError("read the store", err)
	}
	if seq > 0 {
		err = s.trail.Scan(1, func(n uint64, rec []byte) (bool, error) {
			if n > seq {
				return false, nil
			}
			bw.frame(frameRecord, rec)
			return bw.err == nil && n < seq, bw.err
		})
		if err != nil {
			return nil, backupError("read the activity trail", err)
		}
	}
	if err := bw.end(info.Entries, seq); err != nil {
		return nil, backupError("write the backup", err)
	}
	return info, nil
}

func backupError(what string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Kind: KindInternal, Message: "backup: " + what, Err: err}
}

// backupWriter writes frames and keeps the digest of what it wrote.
type backupWriter struct {
	w   *bufio.Writer
	h   hash.Hash
	err error
	hdr [1 + binary.MaxVarintLen64]byte
}

func newBackupWriter(w io.Writer) *backupWriter {
	bw := &backupWriter{w: bufio.NewWriterSize(w, 256<<10), h: sha256.New()}
	bw.write([]byte(backupMagic))
	return bw
}

func (bw *backupWriter) write(b []byte) {
	if bw.err != nil {
		return
	}
	bw.h.Write(b)
	_, bw.err = bw.w.Write(b)
}

func (bw *backupWriter) head(kind byte, n int) {
	bw.hdr[0] = kind
	bw.write(binary.AppendUvarint(bw.hdr[:1], uint64(n)))
}

func (bw *backupWriter) frame(kind byte, b []byte) {
	bw.head(kind, len(b))
	bw.write(b)
}

func (bw *backupWriter) entry(k, v []byte) {
	var l [binary.MaxVarintLen64]byte
	kl := binary.AppendUvarint(l[:0], uint64(len(k)))
	bw.head(frameEntry, len(kl)+len(k)+len(v))
	bw.write(kl)
	bw.write(k)
	bw.write(v)
}

func (bw *backupWriter) end(entries, records uint64) error {
	tail := binary.AppendUvarint(nil, entries)
	tail = binary.AppendUvarint(tail, records)
	sum := bw.h.Sum(nil)
	bw.head(frameEnd, len(tail)+len(sum))
	bw.write(tail)
	bw.write(sum)
	if bw.err != nil {
		return bw.err
	}
	return bw.w.Flush()
}

// Restore writes the backup read from r into st, which must be new: no
// store entry, no trail record. It checks the backup's digest and counts
// at its end and returns an error of kind Unprocessable, naming what is
// wrong, for a backup that is damaged, cut off or not one; st then holds
// part of it and must be thrown away (kmsd restore removes the directory
// it made). Restore needs no master key: it copies what is sealed as it
// is. Run VerifyAudit on the result before serving from it.
func Restore(ctx context.Context, st Store, r io.Reader) (*BackupInfo, error) {
	trail := st.Trail()
	if trail == nil {
		return nil, Errorf(KindInvalid, "restore: the store has no activity trail")
	}
	if _, shared := trail.(SharedTrail); shared {
		return nil, Errorf(KindInvalid, "restore: the store is shared by a cluster; restore its database with the database's own tools (docs/OPERATIONS.md)")
	}
	empty := true
	err := st.View(ctx, func(tx Txn) error {
		return tx.Scan(ScanOptions{KeysOnly: true}, func(_, _ []byte) (bool, error) {
			empty = false
			return false, nil
		})
	})
	if err != nil {
		return nil, err
	}
	if !empty || trail.Len() != 0 {
		return nil, Errorf(KindConflict, "restore: the store is not empty; restore into a new one")
	}
	return readBackup(ctx, r, &restoreSink{ctx: ctx, st: st, trail: trail})
}

// CheckBackup reads a whole backup and checks it as Restore does, writing
// nothing: kmsd backup checks what it wrote with it.
func CheckBackup(ctx context.Context, r io.Reader) (*BackupInfo, error) {
	return readBackup(ctx, r, nil)
}

// restoreSink writes what a backup holds into a new store, in batches.
type restoreSink struct {
	ctx     context.Context
	st      Store
	trail   Trail
	entries [][2][]byte
	size    int
	recs    [][]byte
}

func (rs *restoreSink) entry(k, v []byte) error {
	rs.entries = append(rs.entries, [2][]byte{k, v})
	if rs.size += len(k) + len(v); len(rs.entries) >= 512 || rs.size >= 4<<20 {
		return rs.flush()
	}
	return nil
}

func (rs *restoreSink) record(rec []byte) error {
	if err := rs.flushEntries(); err != nil {
		return err
	}
	rs.recs = append(rs.recs, rec)
	if len(rs.recs) >= 512 {
		return rs.flush()
	}
	return nil
}

func (rs *restoreSink) flushEntries() error {
	if len(rs.entries) == 0 {
		return nil
	}
	err := rs.st.Update(rs.ctx, func(tx Txn) error {
		for _, e := range rs.entries {
			if err := tx.Set(e[0], e[1]); err != nil {
				return err
			}
		}
		return nil
	})
	rs.entries, rs.size = rs.entries[:0], 0
	return err
}

func (rs *restoreSink) flush() error {
	if err := rs.flushEntries(); err != nil {
		return err
	}
	if len(rs.recs) == 0 {
		return nil
	}
	err := rs.trail.Append(rs.recs)
	rs.recs = rs.recs[:0]
	return err
}

// readBackup reads and checks a backup, handing its entries and records
// to sink (when not nil) and flushing it once the end checks out.
func readBackup(ctx context.Context, r io.Reader, sink *restoreSink) (*BackupInfo, error) {
	br := &backupReader{r: bufio.NewReaderSize(r, 256<<10), h: sha256.New()}
	magic := make([]byte, len(backupMagic))
	if err := br.full(magic); err != nil || string(magic) != backupMagic {
		return nil, badBackup("it does not start as a ringkms backup of version 1")
	}
	info := &BackupInfo{}
	var meta *backupMeta
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sum := br.h.Sum(nil) // the digest before the frame, for an end
		kind, body, err := br.frame()
		if err != nil {
			return nil, err
		}
		if meta == nil && kind != frameMeta {
			return nil, badBackup("it has no header frame")
		}
		switch kind {
		case frameMeta:
			if meta != nil {
				return nil, badBackup("it has two header frames")
			}
			meta = &backupMeta{}
			if err := json.Unmarshal(body, meta); err != nil || meta.Version != 1 {
				return nil, badBackup("its header is not of version 1")
			}
			info.CreatedAt = meta.CreatedAt
		case frameEntry:
			if info.Records > 0 {
				return nil, badBackup("a store entry follows trail records")
			}
			kl, n := binary.Uvarint(body)
			if n <= 0 || kl == 0 || kl > uint64(len(body)-n) {
				return nil, badBackup(fmt.Sprintf("store entry %d is malformed", info.Entries+1))
			}
			info.Entries++
			if sink != nil {
				if err := sink.entry(body[n:n+int(kl)], body[n+int(kl):]); err != nil {
					return nil, err
				}
			}
		case frameRecord:
			info.Records++
			if sink != nil {
				if err := sink.record(body); err != nil {
					return nil, err
				}
			}
		case frameEnd:
			entriesWant, n1 := binary.Uvarint(body)
			recsWant, n2 := binary.Uvarint(body[max(n1, 0):])
			if n1 <= 0 || n2 <= 0 || len(body) != n1+n2+sha256.Size {
				return nil, badBackup("its end is malformed")
			}
			if !bytes.Equal(body[n1+n2:], sum) {
				return nil, badBackup("its digest does not match: it was altered or damaged")
			}
			if entriesWant != info.Entries || recsWant != info.Records || recsWant != meta.Records {
				return nil, badBackup(fmt.Sprintf("it holds %d entries and %d records, its end says %d and %d", info.Entries, info.Records, entriesWant, recsWant))
			}
			if _, err := br.r.ReadByte(); err != io.EOF {
				return nil, badBackup("there are bytes after its end")
			}
			if sink != nil {
				if err := sink.flush(); err != nil {
					return nil, err
				}
			}
			return info, nil
		default:
			return nil, badBackup(fmt.Sprintf("a frame of unknown kind 0x%02x", kind))
		}
	}
}

func badBackup(why string) error {
	return Errorf(KindUnprocessable, "restore: not an intact backup: %s", why)
}

// backupReader reads frames and keeps the digest of what it read.
type backupReader struct {
	r *bufio.Reader
	h hash.Hash
}

func (br *backupReader) full(b []byte) error {
	if _, err := io.ReadFull(br.r, b); err != nil {
		return err
	}
	br.h.Write(b)
	return nil
}

// frame reads one frame. Its body is new memory, owned by the caller.
func (br *backupReader) frame() (byte, []byte, error) {
	kind, err := br.r.ReadByte()
	if err != nil {
		return 0, nil, badBackup("it is cut off before its end")
	}
	br.h.Write([]byte{kind})
	var l [binary.MaxVarintLen64]byte
	n := 0
	for {
		if n == len(l) {
			return 0, nil, badBackup("a frame length is malformed")
		}
		c, err := br.r.ReadByte()
		if err != nil {
			return 0, nil, badBackup("it is cut off before its end")
		}
		l[n] = c
		n++
		if c < 0x80 {
			break
		}
	}
	br.h.Write(l[:n])
	size, _ := binary.Uvarint(l[:n])
	if size > maxBackupFrame {
		return 0, nil, badBackup(fmt.Sprintf("a frame of %d bytes", size))
	}
	body := make([]byte, size)
	if err := br.full(body); err != nil {
		return 0, nil, badBackup("it is cut off before its end")
	}
	return kind, body, nil
}
