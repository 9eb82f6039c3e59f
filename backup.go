package kms

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/ringkms/kms/internal/backupfile"
)

// A backup is a consistent copy of a Service's store and activity trail,
// taken while it serves: the store as one snapshot and the trail up to
// the last record of the batches that snapshot holds, so that the copy
// is the service as it stood between two batches. It holds what the
// store holds, which is only ever sealed secrets, so it is no more
// sensitive than the data directory; it opens only with the master key.
// internal/backupfile is its file format.

// BackupInfo describes a backup.
type BackupInfo struct {
	CreatedAt time.Time `json:"createdAt"`
	Entries   uint64    `json:"entries"` // store entries
	Records   uint64    `json:"records"` // activity records: the trail's length
}

// Backup writes a consistent backup of the service to w while it serves.
// The journal is held between two batches only while the store's snapshot
// is taken; writes go on while the backup is written. The backup is itself
// an activity record (action "backup", by "operator"), which it holds. It
// is for operators: the caller holds the Service, and so the master key,
// already (kmsd backup). A store whose trail is shared by a cluster is
// refused: its database has its own backup tools (docs/OPERATIONS.md).
func (s *Service) Backup(ctx context.Context, w io.Writer) (*BackupInfo, error) {
	if _, shared := s.trail.(SharedTrail); shared {
		return nil, Errorf(KindInvalid, "backup: the store is shared by a cluster; back up its database with the database's own tools (docs/OPERATIONS.md)")
	}
	op := &Principal{Kind: PrincipalAPIKey, ID: "operator", flags: Flags{FlagRoot: true}}
	if err := s.record(op, "backup", "", nil, nil); err != nil {
		return nil, err
	}
	seq, resume, err := s.journal.Quiesce()
	if err != nil {
		return nil, err
	}
	defer resume()
	info := &BackupInfo{CreatedAt: s.now().UTC(), Records: seq}
	bw := backupfile.NewWriter(w, backupfile.Meta{CreatedAt: info.CreatedAt, Records: seq})
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
			err := bw.Entry(k, v)
			return err == nil, err
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
			err := bw.Record(rec)
			return err == nil && n < seq, err
		})
		if err != nil {
			return nil, backupError("read the activity trail", err)
		}
	}
	if err := bw.Close(); err != nil {
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
	br, meta, err := backupfile.NewReader(r)
	if err != nil {
		return nil, badBackup(err)
	}
	info := &BackupInfo{CreatedAt: meta.CreatedAt}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		it, err := br.Next()
		switch {
		case err == io.EOF:
			if sink != nil {
				if err := sink.flush(); err != nil {
					return nil, err
				}
			}
			return info, nil
		case err != nil:
			return nil, badBackup(err)
		case it.Record != nil:
			info.Records++
			if sink != nil {
				err = sink.record(it.Record)
			}
		default:
			info.Entries++
			if sink != nil {
				err = sink.entry(it.Key, it.Value)
			}
		}
		if err != nil {
			return nil, err
		}
	}
}

// badBackup is the Unprocessable error of a backup that is not intact.
func badBackup(err error) error {
	return Errorf(KindUnprocessable, "restore: %v", err)
}
