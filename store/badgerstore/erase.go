package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/internal/retry"
)

var _ kms.Eraser = (*Store)(nil)

// Erasing earlier versions. Badger overwrites nothing in place: a new
// value of a key goes to the memtable and its write-ahead log (a .mem
// file), then to a new table of level 0, while the earlier value stays in
// the older log or table until a compaction merges the two and drops it
// (with NumVersionsToKeep 1, as DefaultOptions sets, when no read
// transaction older than the new value is open). Value-log GC is beside
// the point here: values under the value threshold (1 MiB), as every
// record of the Service is, never go to the value log.
//
// So Erase, holding the commit lock (no commit starts meanwhile):
//
//  1. flushes the memtables to level 0 and deletes their logs, the way
//     Badger's DropPrefix does, by dropping a marker key written for the
//     purpose (DropPrefix flushes only when its prefix has data); it then
//     compacts level 0 into the next level;
//  2. flattens the tree (DB.Flatten), so that every table lies on one
//     level: each key's versions then sit in one table, written by a
//     compaction that kept only the newest;
//  3. checks, reading every version the tree still holds (AllVersions),
//     that no key of keys has more than one; if one does (a read
//     transaction held the older version), it waits and goes again,
//     first writing each such key again as it is: the compaction that
//     kept both versions merged them into one table of the bottom
//     level, which flushing and flattening alone leave as it is; the
//     key in level 0 makes the next compaction take that table in.
//
// The tables and logs that a compaction replaces are deleted files; their
// blocks are the file system's, which Erase does not overwrite (see
// docs/OPERATIONS.md, destroyed keys).
const (
	eraseAttempts = 10
	eraseBackoff  = 50 * time.Millisecond
)

// eraseMarker is the key whose DropPrefix flushes the memtables. It sorts
// after every key of the Service, whose keys are printable.
var eraseMarker = []byte("\xffbadgerstore/erase")

// Erase returns once Badger's files hold no version of the values of keys
// but the newest (none for a deleted key, or its deletion marker). It
// blocks commits while it runs: compactions of the whole tree, which take
// about as long as reading it once. In memory it has nothing to do.
func (s *Store) Erase(ctx context.Context, keys [][]byte) error {
	if len(keys) == 0 || s.db.Opts().InMemory {
		return nil
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	var left [][]byte // the keys the last attempt found with earlier versions
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.db.IsClosed() {
			return errClosed
		}
		if err := s.db.Update(func(tx *badger.Txn) error {
			if err := rewrite(tx, left); err != nil {
				return err
			}
			return tx.Set(eraseMarker, nil)
		}); err != nil {
			return translate("erase: write", err)
		}
		if err := s.db.DropPrefix(eraseMarker); err != nil {
			return translate("erase: flush memtables", err)
		}
		if err := s.db.Flatten(2); err != nil {
			return translate("erase: flatten", err)
		}
		var err error
		if left, err = s.versionsLeft(keys); err != nil {
			return err
		}
		if left == nil {
			return nil
		}
		if attempt+1 == eraseAttempts {
			return &kms.Error{Kind: kms.KindUnavailable, Message: "erase: earlier versions remain",
				Err: fmt.Errorf("key %q still has earlier versions after %d compactions", left[0], eraseAttempts)}
		}
		if err := retry.Backoff(ctx, attempt, eraseBackoff, time.Second); err != nil {
			return err
		}
	}
}

// rewrite writes each of keys again with its newest value, or deletes it
// again when that is a deletion.
func rewrite(tx *badger.Txn, keys [][]byte) error {
	for _, k := range keys {
		item, err := tx.Get(k)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			err = tx.Delete(k)
		case err == nil:
			var v []byte
			if v, err = item.ValueCopy(nil); err == nil {
				err = tx.Set(k, v)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// versionsLeft returns the keys of keys of which the tree holds more than
// one version, or nil.
func (s *Store) versionsLeft(keys [][]byte) ([][]byte, error) {
	var left [][]byte
	err := s.db.View(func(tx *badger.Txn) error {
		for _, k := range keys {
			it := tx.NewIterator(badger.IteratorOptions{AllVersions: true, Prefix: k})
			n := 0
			for it.Seek(k); it.ValidForPrefix(k); it.Next() {
				if string(it.Item().Key()) == string(k) {
					n++
				}
			}
			it.Close()
			if n > 1 {
				left = append(left, k)
			}
		}
		return nil
	})
	if err != nil {
		return nil, translate("erase: read versions", err)
	}
	return left, nil
}
