// Package badgerstore implements kms.Store on Badger, an embedded,
// ordered, transactional key-value store.
//
// # Durability
//
// When Update returns nil, the commit has been fsynced and survives kill -9
// and power loss. UpdateNoSync commits without the fsync: its writes
// survive kill -9 (they are in Badger's memory-mapped write-ahead log) but
// not a crash of the machine, unless a later Update synced them. Badger
// itself runs with SyncWrites off; the Store syncs after each Update.
//
// Commits are serialised, each Update's with its sync: Badger's sync
// reaches only the current memtable's log, and a commit between another's
// commit and its sync could start a new memtable. So concurrent Updates do
// not share an fsync as they would under Badger's SyncWrites (the store's
// floor, BenchmarkStoreCommit with 64 writers, went from about 136 to 225
// us per commit). The kms Service is not affected: its journal is the one
// writer and already gives each batch of calls one Update.
//
// # Activity trail
//
// The Store's kms.Trail is a store/filetrail log in the subdirectory
// "trail" of the Badger directory (in memory for an in-memory Store). It is
// opened after Badger, so Badger's directory lock covers it too.
//
// # A full disk
//
// Badger writes through memory maps, and a memory-mapped write that meets
// a full file system kills the process (SIGBUS) instead of failing. So
// the Store keeps a reserve of free space (Options.DiskReserve, default
// DefaultDiskReserve) on the file systems of its directory and of its
// trail: Writable reports an error of kind NoSpace once either has less
// than the reserve free, and the Service then writes nothing, answering
// every call that would write with that error until space returns. With
// Options.HoldReserve (kmsd sets it), part of the reserve is held in the
// file "reserve" in the directory and given up when the disk fills, for
// Badger's flushes and compactions and for the next Open, even when
// another program took the free space (see internal/diskspace); without
// it, nothing is written for the reserve. A write that fails with ENOSPC
// all the same (another program filled the disk between the check and the
// write) is an error of kind NoSpace too.
//
// # Conflicts
//
// Badger transactions are optimistic and serialisable. Update retries a
// commit that fails with a conflict in one place, with a jittered backoff,
// up to a fixed number of attempts; the function passed to Update may
// therefore run more than once. When every attempt conflicts, Update
// returns an error of kind kms.KindConflict.
//
// # Errors
//
// No Badger error leaves this package as it is. Badger's errors are
// translated into *kms.Error values at the boundary:
//
//   - a missing key is kind NotFound (errors.Is(err, kms.ErrNotFound));
//   - a transaction, key or value over Badger's size limits is kind
//     TooLarge;
//   - an empty key, a key with Badger's reserved "!badger!" prefix, a write
//     in a read-only transaction, a Txn used after its function returned, and
//     a scan whose Start lies outside its Prefix are kind Invalid;
//   - anything else is kind Internal, with the Badger error kept in the Err
//     field for the log.
//
// Errors returned by the function passed to View or Update are returned
// unchanged, and so are context errors (context.Canceled,
// context.DeadlineExceeded).
package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/diskspace"
	"github.com/ringkms/kms/store/filetrail"
	"github.com/ringkms/kms/store/internal/keyrange"
	"github.com/ringkms/kms/store/internal/retry"
)

var _ kms.Store = (*Store)(nil)

// Retry policy of Update. After a conflicting commit, Update waits a random
// duration in [d/2, d), where d starts at minBackoff and doubles up to
// maxBackoff, then runs the function again; it gives up after maxAttempts
// commits. The worst case adds up to about a second of waiting: enough for
// many writers of one key on a loaded 2-core machine (the race detector
// and parallel test packages included) to all get through.
const (
	maxAttempts = 50
	minBackoff  = 100 * time.Microsecond
	maxBackoff  = 25 * time.Millisecond
)

// maxKeySize is the longest key Badger accepts (badger's txn.modify).
const maxKeySize = 65000

// Errors that carry no detail are allocated once; returning them costs
// nothing on hot paths such as a cache-miss lookup.
var (
	errKeyNotFound  = kms.Errorf(kms.KindNotFound, "key not found")
	errEmptyKey     = kms.Errorf(kms.KindInvalid, "empty key")
	errReservedKey  = kms.Errorf(kms.KindInvalid, "key uses a reserved prefix")
	errReadOnly     = kms.Errorf(kms.KindInvalid, "write in a read-only transaction")
	errTxnEnded     = kms.Errorf(kms.KindInvalid, "transaction used after it ended")
	errTxnTooBig    = kms.Errorf(kms.KindTooLarge, "transaction too large")
	errKeyTooLarge  = kms.Errorf(kms.KindTooLarge, "key too large")
	errValTooLarge  = kms.Errorf(kms.KindTooLarge, "value too large")
	errStartOutside = kms.Errorf(kms.KindInvalid, "scan start does not begin with the scan prefix")
	errClosed       = kms.Errorf(kms.KindInternal, "store is closed")
)

// Store is a kms.Store backed by a Badger database. It is safe for
// concurrent use.
type Store struct {
	db    *badger.DB
	trail kms.Trail
	close func() error // closes the trail

	// commitMu orders commits, so that between an Update's commit and its
	// sync no other commit can rotate the memtable whose write-ahead log
	// the sync must reach.
	commitMu sync.Mutex

	// maxValueSize is the largest value Set accepts; Badger reports larger
	// ones with an untyped error, so Set checks first.
	maxValueSize int64

	// guards watch the free space of the file systems of the Badger
	// directory and of the trail (none in memory).
	guards []*diskspace.Guard
}

// Options are the Store's own settings, beside Badger's.
type Options struct {
	// DiskReserve is how many bytes must stay free on the file systems of
	// the store's directory and of its trail: below it, Writable reports
	// an error of kind NoSpace (see the package documentation). Zero means
	// DefaultDiskReserve; a negative value turns the reserve off, which
	// leaves a full disk to kill the process.
	DiskReserve int64

	// HoldReserve holds a quarter of the reserve (64 MiB of the default
	// one) in the file BallastFile in the store's directory, allocated,
	// and gives it up when the disk fills, so that Badger's flushes and
	// compactions and the next Open have room even if another program
	// took the free space. Off by default: a program that embeds a small
	// store should not find 64 MiB of its disk gone unasked, and keeps
	// the reserve's check (a statfs per Writable) all the same. kmsd, the
	// server, sets it. Off, a file left by an earlier Open with it on is
	// left alone: delete it by hand.
	HoldReserve bool

	// Trail configures the activity trail's files (filetrail.OpenWith).
	Trail filetrail.Options
}

// DefaultDiskReserve is Options.DiskReserve when it is zero: room for
// Badger to flush its two 8 MiB memtables and run its compactions (a few
// tens of MiB with DefaultOptions), several times over.
const DefaultDiskReserve = 256 << 20

// minOpenFree is the free space that OpenWith, keeping a reserve, wants
// before it opens Badger, which writes (its lock file, and through memory
// maps the first page of a new memtable) as it opens. Below it, OpenWith
// answers NoSpace without touching the directory.
const minOpenFree = 1 << 20

// BallastFile is the name of the file, in the store's directory, that
// holds part of the disk reserve (Options.HoldReserve).
const BallastFile = "reserve"

// Open opens a Store with Badger options as the caller set them (Dir,
// ValueDir, InMemory, EncryptionKey, Logger...), with two exceptions that
// the kms.Store contract requires: SyncWrites is forced off, because the
// Store syncs each Update itself (and UpdateNoSync not), and
// DetectConflicts is forced on, so that transactions are serialisable. The
// Logger is used as given; nil silences Badger. The activity trail is
// opened in the subdirectory "trail" of opts.Dir.
//
// A directory that another process has open is an error of kind Conflict;
// any other error from Badger (a corrupt directory, invalid options) is
// returned as a kms error of kind Internal. The Store keeps the default
// disk reserve, without holding part of it in a file (OpenWith sets
// another, or holds it).
func Open(opts badger.Options) (*Store, error) { return OpenWith(opts, Options{}) }

// OpenWith is Open with the Store's own Options. On a file system already
// below the reserve, it gives up the held part of the reserve (if it holds
// one) before Badger opens (Badger's start writes through memory maps too), and the Store
// opens all the same: Writable then reports NoSpace until space returns.
// On a file system with less than 1 MiB free even then, it answers an
// error of kind NoSpace and leaves the directory as it was.
func OpenWith(opts badger.Options, so Options) (*Store, error) {
	opts.SyncWrites = false
	opts.DetectConflicts = true
	st := &Store{}
	trailDir := filepath.Join(opts.Dir, "trail")
	if !opts.InMemory {
		reserve := so.DiskReserve
		if reserve == 0 {
			reserve = DefaultDiskReserve
		}
		if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
			return nil, &kms.Error{Kind: kms.KindInternal, Message: "create store directory", Err: err}
		}
		ballast := ""
		if so.HoldReserve {
			ballast = filepath.Join(opts.Dir, BallastFile)
		}
		g := diskspace.New(opts.Dir, reserve, ballast)
		if g.Check() != nil {
			g.Release()
			if free, err := diskspace.Free(opts.Dir); err == nil && free < minOpenFree && reserve > 0 {
				return nil, &kms.Error{Kind: kms.KindNoSpace, Message: "insufficient storage: the service's disk is full; the store opens once space is freed",
					Err: fmt.Errorf("file system of %s has %d bytes free; Badger needs %d to open", opts.Dir, free, minOpenFree)}
			}
		}
		st.guards = append(st.guards, g)
		if opts.ValueDir != "" && opts.ValueDir != opts.Dir {
			st.guards = append(st.guards, diskspace.New(opts.ValueDir, reserve, ""))
		}
		// The trail writes with write(2), which fails cleanly on a full
		// disk: its file system needs the reserve, not a ballast.
		st.guards = append(st.guards, diskspace.New(trailDir, reserve, ""))
	}
	db, err := badger.Open(opts)
	if err != nil {
		if !opts.InMemory && inUse(opts.Dir) {
			return nil, &kms.Error{Kind: kms.KindConflict, Message: "the store directory is in use by another process", Err: err}
		}
		return nil, &kms.Error{Kind: kms.KindInternal, Message: "open badger store", Err: err}
	}
	st.db = db
	if opts.InMemory {
		st.trail, st.close = filetrail.NewMemory(), func() error { return nil }
	} else {
		t, err := filetrail.OpenWith(trailDir, so.Trail)
		if err != nil {
			db.Close()
			return nil, err
		}
		st.trail, st.close = t, t.Close
	}
	maxValue := opts.ValueLogFileSize
	if opts.InMemory && opts.ValueThreshold-1 < maxValue {
		// In memory, Badger keeps every value in the LSM tree, so a
		// value must stay under the value threshold. Badger itself
		// accepts a value of exactly the threshold and then panics in
		// its write goroutine (v4.9.6, writeToLSM), so Set rejects it
		// first.
		maxValue = opts.ValueThreshold - 1
	}
	st.maxValueSize = maxValue
	return st, nil
}

// Trail returns the Store's activity trail.
func (s *Store) Trail() kms.Trail { return s.trail }

// OpenDir opens, creating it if needed, a Store in dir with options sized
// for a key-management service: a small data set of small values, where
// resident memory should stay well under 200 MiB. See DefaultOptions for
// what it sets. It keeps the default disk reserve without holding part of
// it in a file; a long-running server that wants that (as kmsd does)
// calls OpenWith(DefaultOptions(dir), Options{HoldReserve: true}).
func OpenDir(dir string) (*Store, error) {
	return Open(DefaultOptions(dir))
}

// OpenInMemory opens a Store that keeps everything in memory and nothing
// on disk, for tests. It uses the same sizes as OpenDir, but Badger keeps
// values in memory only under its value threshold: Set rejects values of
// 1 MiB and more with an error of kind TooLarge.
func OpenInMemory() (*Store, error) {
	return Open(DefaultOptions("").WithInMemory(true))
}

// DefaultOptions returns the Badger options OpenDir uses for dir: Badger's
// defaults with no logger, one version per key, and smaller
// memory budgets:
//
//   - two 8 MiB memtables (Badger: five of 64 MiB), a 32 MiB block cache, a
//     16 MiB index cache, 64 MiB value-log files, 2 compactors;
//   - tables of 1 MiB at every level (TableSizeMultiplier 1; Badger: 2 MiB
//     doubling with each level). A compaction keeps up to about ten table
//     builders in flight, each with a buffer of twice its table size that
//     Badger pools for reuse, so under sustained writes the builders of
//     deep levels (16 MiB tables and more) held hundreds of MiB;
//   - ZSTD level 1 instead of Snappy: JSON records and hex IDs take about
//     30% less room, and every table is memory-mapped, so its size on disk
//     is resident memory too.
//
// Badger maps every table, memtable and value-log file it writes and keeps
// the pages it touched, so resident memory grows with the store. What grows
// with every call, the activity trail, is therefore kept out of Badger, in
// the Store's Trail (see the package documentation); Badger holds the
// trail's indexes, a few keys per batch of records.
//
// Values of 1 MiB and more go to the value log; smaller ones live in the LSM
// tree. One transaction may write up to about 1.2 MiB of keys and inline
// values (15% of a memtable); beyond that, Set returns an error of kind
// TooLarge. Callers who want other trade-offs start from here and call
// Open.
func DefaultOptions(dir string) badger.Options {
	opts := badger.DefaultOptions(dir).
		WithLogger(nil).
		WithNumVersionsToKeep(1).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithBaseTableSize(1 << 20).
		WithCompression(options.ZSTD).
		WithZSTDCompressionLevel(1).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2)
	opts.TableSizeMultiplier = 1
	return opts
}

// Writable reports whether the Store can take writes: nil, or an error of
// kind NoSpace when the file system of its directory or of its trail has
// less than the disk reserve free. It costs a statfs per file system.
func (s *Store) Writable(ctx context.Context) error {
	if s.db.IsClosed() {
		return errClosed
	}
	for _, g := range s.guards {
		if err := g.Check(); err != nil {
			return err
		}
	}
	return nil
}

// Close flushes and closes the database. Call it once, after every
// transaction has returned.
func (s *Store) Close() error {
	terr := s.close()
	if err := s.db.Close(); err != nil {
		return &kms.Error{Kind: kms.KindInternal, Message: "close badger store", Err: err}
	}
	return terr
}

// View runs fn in a read-only transaction over one consistent snapshot. It
// returns ctx.Err() without running fn if ctx is already done, and fn's
// error unchanged. Writes in fn fail with an error of kind Invalid.
func (s *Store) View(ctx context.Context, fn func(kms.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.db.IsClosed() {
		return errClosed
	}
	btx := s.db.NewTransaction(false)
	defer btx.Discard()
	t := &txn{ctx: ctx, btx: btx, store: s}
	defer t.end()
	return fn(t)
}

// Update runs fn in a read-write transaction and commits it durably. If
// the commit conflicts with a concurrent transaction, Update runs fn again
// in a fresh transaction, up to maxAttempts attempts with a short jittered backoff
// between them, checking ctx before each; fn must therefore have no effect
// outside the transaction. It returns:
//
//   - nil once a commit succeeded;
//   - fn's error unchanged, with nothing written, if fn fails;
//   - ctx.Err() if ctx is done before an attempt;
//   - an error of kind Conflict if every attempt conflicted;
//   - an error of kind Internal if the commit failed otherwise.
func (s *Store) Update(ctx context.Context, fn func(kms.Txn) error) error {
	return s.update(ctx, fn, true)
}

// UpdateNoSync is Update without the fsync: it returns once the commit is
// visible. Its writes survive kill -9 but not a crash of the machine,
// unless a later Update synced them.
func (s *Store) UpdateNoSync(ctx context.Context, fn func(kms.Txn) error) error {
	return s.update(ctx, fn, false)
}

func (s *Store) update(ctx context.Context, fn func(kms.Txn) error, sync bool) error {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.db.IsClosed() {
			return errClosed
		}
		again, err := s.attempt(ctx, fn, sync)
		if !again {
			return err
		}
		if attempt+1 == maxAttempts {
			return kms.Errorf(kms.KindConflict, "transaction conflict: gave up after %d attempts", maxAttempts)
		}
		if err := retry.Backoff(ctx, attempt, minBackoff, maxBackoff); err != nil {
			return err
		}
	}
}

// attempt runs fn once in a fresh read-write transaction and commits it. It
// reports whether the commit failed with a conflict and should be retried;
// otherwise err is the result of Update.
func (s *Store) attempt(ctx context.Context, fn func(kms.Txn) error, sync bool) (again bool, err error) {
	btx := s.db.NewTransaction(true)
	defer btx.Discard()
	t := &txn{ctx: ctx, btx: btx, store: s, update: true}
	err = fn(t)
	t.end()
	if err != nil {
		return false, err
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	switch err := btx.Commit(); {
	case err == nil && sync:
		if err := s.db.Sync(); err != nil {
			return false, translate("sync", err)
		}
		return false, nil
	case err == nil:
		return false, nil
	case errors.Is(err, badger.ErrConflict):
		return true, nil
	default:
		return false, translate("commit transaction", err)
	}
}

// txn is the kms.Txn of a Store: a Badger transaction and the context of
// the View or Update that opened it.
type txn struct {
	ctx    context.Context
	btx    *badger.Txn
	store  *Store
	update bool
	ended  bool // fn has returned; the Badger txn is discarded or committing
}

// end marks the transaction as over, so that a Txn kept past its function
// fails with an error instead of touching a discarded Badger transaction.
func (t *txn) end() { t.ended = true }

// Get returns a copy of the value under key, or an error of kind NotFound.
// It sees the transaction's own writes.
func (t *txn) Get(key []byte) ([]byte, error) {
	if t.ended {
		return nil, errTxnEnded
	}
	item, err := t.btx.Get(key)
	if err != nil {
		return nil, translate("get key", err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, translate("read value", err)
	}
	if v == nil {
		v = []byte{} // present but empty, which is not the same as missing
	}
	return v, nil
}

// Set stores value under key. Badger keeps both slices until commit.
func (t *txn) Set(key, value []byte) error {
	if err := t.writable(key); err != nil {
		return err
	}
	if int64(len(value)) > t.store.maxValueSize {
		return errValTooLarge
	}
	return translate("set key", t.btx.Set(key, value))
}

// Delete removes key; a missing key is not an error.
func (t *txn) Delete(key []byte) error {
	if err := t.writable(key); err != nil {
		return err
	}
	return translate("delete key", t.btx.Delete(key))
}

// writable returns why t cannot write key, or nil when it can.
func (t *txn) writable(key []byte) error {
	switch {
	case t.ended:
		return errTxnEnded
	case !t.update:
		return errReadOnly
	case len(key) > maxKeySize:
		return errKeyTooLarge
	}
	return nil
}

// Scan calls fn for each key in the range opts selects; see kms.Txn.
// It returns fn's error unchanged, and ctx.Err() if the context of the
// transaction is done before an item.
func (t *txn) Scan(opts kms.ScanOptions, fn func(key, value []byte) (bool, error)) error {
	if t.ended {
		return errTxnEnded
	}
	prefix, start := opts.Prefix, opts.Start
	if len(start) > 0 && !bytes.HasPrefix(start, prefix) {
		return errStartOutside
	}

	// Where to seek, and the prefix Badger's iterator limits itself to
	// (it skips tables outside it, and Valid reports false past it).
	iterPrefix, seek := prefix, start
	var end []byte // reverse scans without Start: skip this key if present
	if len(start) == 0 {
		if !opts.Reverse {
			seek = prefix // the first key >= prefix
		} else {
			// Badger seeks a reverse iterator to the last key <= the
			// seek key, and with an empty seek key it seeks to the
			// prefix itself, which is the first key with the prefix,
			// not the last. Seek instead to the first key after the
			// prefix range, which sorts after every key with the prefix
			// and is the only key that may sort between them and it.
			// The iterator's prefix is cut to what the prefix and end
			// share, so that Badger does not stop on end.
			end = keyrange.PrefixEnd(prefix)
			if end == nil {
				// Empty, or only 0xFF bytes: no key sorts after the
				// range without having the prefix, so the range ends
				// at the last key of the store.
				iterPrefix, seek = nil, nil
			} else {
				iterPrefix, seek = end[:len(end)-1], end
			}
		}
	}

	it := t.btx.NewIterator(badger.IteratorOptions{
		Prefix:         iterPrefix,
		Reverse:        opts.Reverse,
		PrefetchValues: !opts.KeysOnly,
		PrefetchSize:   16, // scans serve pages; do not read far ahead
	})
	defer it.Close()

	for it.Seek(seek); it.Valid(); it.Next() {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		item := it.Item()
		key := item.Key()
		if !bytes.HasPrefix(key, prefix) {
			if end != nil && bytes.Equal(key, end) {
				continue
			}
			return nil
		}
		more, err := t.call(item, key, opts.KeysOnly, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// call passes one item to a Scan callback. The value slice is Badger's and
// valid only during fn.
func (t *txn) call(item *badger.Item, key []byte, keysOnly bool, fn func(key, value []byte) (bool, error)) (bool, error) {
	if keysOnly {
		return fn(key, nil)
	}
	var (
		more  bool
		fnErr error
	)
	err := item.Value(func(v []byte) error {
		if v == nil {
			v = []byte{}
		}
		more, fnErr = fn(key, v)
		return nil
	})
	if err != nil {
		return false, translate("read value", err)
	}
	return more, fnErr
}

// translate turns a Badger error into a kms error; doing says what failed,
// for the log. It returns nil for nil.
func translate(doing string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return errKeyNotFound
	case errors.Is(err, badger.ErrEmptyKey):
		return errEmptyKey
	case errors.Is(err, badger.ErrInvalidKey), errors.Is(err, badger.ErrBannedKey):
		return errReservedKey
	case errors.Is(err, badger.ErrReadOnlyTxn):
		return errReadOnly
	case errors.Is(err, badger.ErrDiscardedTxn):
		return errTxnEnded
	case errors.Is(err, badger.ErrTxnTooBig):
		return errTxnTooBig
	case errors.Is(err, badger.ErrConflict):
		return kms.Errorf(kms.KindConflict, "transaction conflict")
	case errors.Is(err, badger.ErrDBClosed), errors.Is(err, badger.ErrBlockedWrites):
		return &kms.Error{Kind: kms.KindInternal, Message: doing + ": store is closed", Err: err}
	case diskspace.IsNoSpace(err):
		return &kms.Error{Kind: kms.KindNoSpace, Message: "insufficient storage: the service's disk is full", Err: fmt.Errorf("%s: %w", doing, err)}
	default:
		return &kms.Error{Kind: kms.KindInternal, Message: doing, Err: err}
	}
}
