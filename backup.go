package kms

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/ringkms/kms/internal/backupfile"
	"github.com/ringkms/kms/internal/barrier"
)

// A backup is a consistent copy of a Service's store and activity trail,
// taken while it serves: the store as one snapshot and the trail up to
// the last record of the batches that snapshot holds, so that the copy
// is the service as it stood between two batches. It holds what the
// store holds, which is only ever sealed secrets, so it is no more
// sensitive than the data directory; it opens only with the master key.
// internal/backupfile is its file format.
//
// A backup is authenticated (HMAC-SHA256) under a key derived from the
// master key the service runs under (internal/barrier's BackupKey), and Restore takes that
// master key: whoever can write a backup file but holds no master key
// cannot change what it restores to (raise an API key's flags, say).
// Since the secrets a backup holds are sealed under that same master key,
// a backup taken before a rekey restores with the old key, as the store
// it holds must then run with (it is rekeyed again afterwards if need be).

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
	backupKey, sealedRoot := s.barrier.Backup()
	bw := backupfile.NewWriter(w, backupKey, backupfile.Meta{CreatedAt: info.CreatedAt, Records: seq, SealedRoot: sealedRoot})
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
// store entry, no trail record. mk is the master key the backed-up
// service ran under: the backup is authenticated under a key derived from
// it, and the restored store runs under it. Restore writes nothing it has
// not authenticated, and returns an error of kind Unprocessable, naming
// what is wrong, for a backup that does not authenticate under mk (taken
// under another master key, or altered anywhere), is cut off, is of
// version 1 (which carries no authentication) or is not one. A backup
// refused at its start (another master key, version 1, not a backup)
// leaves st as it was; one refused further on leaves st holding the part
// before the damage, and st must be thrown away (kmsd restore removes
// the directory it made). Run VerifyAudit on the result before serving
// from it.
func Restore(ctx context.Context, st Store, r io.Reader, mk RootKey) (*BackupInfo, error) {
	if noRootKey(mk) {
		return nil, Errorf(KindInvalid, "restore: the master key is required: a backup is authenticated under a key derived from it")
	}
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
	// The key comes from the backed-up store's root secret: sealed in
	// the backup's header, or the master key's own bytes.
	br, meta, err := backupfile.NewReaderFor(r, func(m backupfile.Meta) ([32]byte, error) {
		key, err := barrier.BackupKeyFor(mk, m.SealedRoot)
		switch {
		case err == nil:
			return key, nil
		case m.SealedRoot == nil:
			return [32]byte{}, Errorf(KindUnprocessable, "restore: the backup is of a store under a plain master key, not under the key given")
		default:
			return [32]byte{}, Errorf(KindUnprocessable, "restore: the backup was not taken under this master key: its root secret does not open under it")
		}
	})
	if err != nil {
		if e := AsError(err); e != nil {
			return nil, err
		}
		return nil, badBackup(err)
	}
	return readBackup(ctx, br, meta, &restoreSink{ctx: ctx, st: st, trail: trail})
}

// CheckBackup reads a whole backup and checks its framing, order, counts
// and end as Restore does, writing nothing, but not its authentication,
// which needs the master key: kmsd backup checks with it that what it
// wrote is whole, without the master key when a running kmsd took the
// backup. It says nothing of a backup from elsewhere.
func CheckBackup(ctx context.Context, r io.Reader) (*BackupInfo, error) {
	br, meta, err := backupfile.NewUncheckedReader(r)
	if err != nil {
		return nil, badBackup(err)
	}
	return readBackup(ctx, br, meta, nil)
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

// readBackup reads the rest of a backup from br, handing its entries and
// records, as br releases them, to sink (when not nil) and flushing it
// once the end checks out.
func readBackup(ctx context.Context, br *backupfile.Reader, meta backupfile.Meta, sink *restoreSink) (*BackupInfo, error) {
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
	switch {
	case errors.Is(err, backupfile.ErrKey):
		return Errorf(KindUnprocessable, "restore: not an intact backup under this master key: it does not authenticate from its start, so it was taken under another master key (a backup restores with the master key its service ran under when it was taken, the old one for a backup from before a rekey), or it was altered")
	case errors.Is(err, backupfile.ErrUnauthenticated):
		return Errorf(KindUnprocessable, "restore: %v: whoever could write the file could have altered it unseen, so it is refused; take a new backup (docs/OPERATIONS.md, Backups, says what to do with an old one)", err)
	}
	return Errorf(KindUnprocessable, "restore: %v", err)
}
