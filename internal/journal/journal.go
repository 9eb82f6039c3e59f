// Package journal is the single writer of a Service: every write of the
// domain, and every record of its audit trail, goes through it as a job.
// The journal gathers the jobs that are waiting and, for each batch,
//
//  1. runs their mutations in one store transaction, committed durably
//     (only when a job has a mutation), together with the batch's
//     records under the pending key;
//  2. appends the records to the Trail, durably, and meanwhile, on
//     another goroutine, signs the headers of the batch's jobs, a few
//     Merkle trees with one signature each (internal/headersign);
//  3. writes their index entries to the store (UpdateNoSync: they can be
//     rebuilt from the trail);
//  4. answers each job.
//
// So an operation is answered only once its record is durable (the trail
// is fail-closed); the chain of records has one appender; and one durable
// write of the trail serves every job of a batch. An operation that
// changes the store and its record become durable together: a crash
// between steps 1 and 2 leaves the records under the pending key, from
// which Start appends them to the trail. A crash before step 3 leaves
// records that the index does not name yet; Start indexes them.
//
// An error answer means that nothing was done; a success, that the
// operation is durable with its record. Before each batch the journal asks
// the store whether it can take writes (Store.Writable: a disk below its
// reserve answers NoSpace), and answers the whole batch with that error,
// writing nothing, when it cannot. When the trail refuses a batch whose
// writes the store already committed (step 2 fails: its disk filled
// meanwhile), the journal undoes those writes, restoring each key as a
// snapshot taken before step 1 has it, and only then answers the error.
// If even the undo fails, the batch is in doubt: its jobs wait, every
// other batch is answered Unavailable (nothing written), and the journal
// tries again every doubtRetry to append the records (then the batch
// succeeded) or to undo the writes (then it failed). A crash meanwhile
// leaves the pending records, and the next start completes the batch.
//
// A job's mutation runs against an overlay of the batch transaction: when it
// fails, its writes are dropped and the other jobs of the batch go on. Gets
// in a mutation see the writes of earlier jobs of the same batch and its own;
// Scans see earlier jobs' writes but not the job's own.
//
// When the store's Trail is a base.SharedTrail, other processes append to
// it too, and a batch commits differently (shared.go): its mutations, its
// records, their index entries and the chain's head in one transaction of
// the trail's AppendIn, after each job's Checks.
//
// The journal knows nothing of what its records mean: the domain hands it
// a Codec (how a record is stamped, encoded and decoded) and an Indexer
// (what a record adds to the trail's index), and each job its own checks.
package journal

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hmackey"
)

// MaxBatch bounds the jobs of one batch.
const MaxBatch = 256

// Group commit: under concurrent load, a batch that is small when the
// journal picks it up yields the processor once before it is committed,
// so that the handlers that are ready to run submit their jobs first: they
// join the batch and share its durable writes and signature instead of
// waiting for the next. (PostgreSQL's commit_delay sleeps for the same
// purpose; a yield costs nothing when no handler is waiting to run, and
// a sleep of 300 us cost 14% at 16 clients.) A batch yields only when the
// previous one had gatherSiblings jobs or more, and holds fewer than
// gatherBelow.
//
// kmsbench -start encrypt on 2 cores, alternating runs: 64 clients 21.0k
// calls/s without the yield, 22.2k with it; 16 clients 12.1k and 13.3k.
const (
	gatherBelow    = 32
	gatherSiblings = 4
)

// gather reports whether a batch of n jobs, after one of last jobs, yields
// before it is committed.
func gather(n, last int) bool { return n < gatherBelow && last >= gatherSiblings }

// doubtRetry is how often a journal with a batch in doubt tries again to
// settle it.
const doubtRetry = 200 * time.Millisecond

// maxUnindexed bounds the records the journal keeps in memory while the
// store refuses their index entries; past it, the journal stops: a trail
// whose search misses records is not one to keep writing.
const maxUnindexed = 1 << 16

// A Codec is what the journal knows of its records, of type R (a pointer
// type; the zero R is no record).
type Codec[R comparable] interface {
	// Encode gives rec its place in the chain, at (Seq, Time and Prev;
	// not Digest), and the outcome of its operation, opErr (nil for
	// success), and appends rec's encoding to dst.
	Encode(dst []byte, rec R, at Link, opErr error) ([]byte, error)
	// Sealed gives rec its digest (hex) once the chain has it.
	Sealed(rec R, digest string)
	// Decode reads a record as the trail stores it (its digest, 32
	// bytes, then its encoding), and returns it with its place in the
	// chain.
	Decode(stored []byte) (R, Link, error)
}

// An Indexer gathers the index entries of a run of records, in chain
// order, and writes them to the store. The journal's runs are its batches
// (and, at Start, the records the index does not name yet).
type Indexer[R comparable] interface {
	// Add indexes rec, at link in the chain, whose predecessor was
	// created at prevTime (or which is the first record, first).
	Add(rec R, at Link, prevTime int64, first bool)
	// Reads appends to keys the store keys that WriteCounts will read
	// for rec, which keys lacks, so that a shared commit reads them
	// ahead with the others.
	Reads(keys [][]byte, rec R) [][]byte
	// Write writes the run's entries, which never change once written:
	// a store that refuses them in one transaction gets them in parts.
	Write(tx base.Txn) error
	// WriteCounts writes what the run adds to counts that are read as
	// they are written: it commits with the indexed head.
	WriteCounts(tx base.Txn) error
	// Reset empties the index for the next run.
	Reset()
	// Last returns the seq of the last record added since Reset, or 0.
	Last() uint64
}

// An Observer receives measurements of the journal, on its goroutine,
// once per batch: it must be quick and must not block.
type Observer[R comparable] interface {
	// ObserveBatch reports a batch: how many calls it held, how long it
	// took from its first call's turn to its answers, how long the
	// trail's append with its sync took within that, and the error that
	// failed the whole batch (nil when it committed).
	ObserveBatch(calls int, commit, appendTime time.Duration, err error)
	// ObserveRecords reports the records of a committed batch, in chain
	// order, before the callers are answered. It must neither keep nor
	// change them.
	ObserveRecords(recs []R)
}

// Config is what Start needs.
type Config[R comparable] struct {
	Store    base.Store
	Codec    Codec[R]
	Index    Indexer[R]
	ChainKey *hmackey.Key // keys the chain (Digest)
	// HeadKey is the store key of the last indexed record's Head;
	// PendingKey that of the records of the last batch that wrote to
	// the store.
	HeadKey, PendingKey []byte
	Now                 func() time.Time
	Log                 func(err error, msg string) // what fails behind an answer; err nil for a notice
	Observer            Observer[R]                 // optional
	// Signer signs the jobs' headers; each batch loads it once, so a
	// rotation replaces it between batches. While it holds nil, every
	// header is left unsigned (headersign.ErrNoKey, in the log).
	Signer *atomic.Pointer[headersign.Signer]
	// Undone runs after the writes of a batch were undone, so that no
	// cache keeps what a reader saw of them meanwhile. Optional.
	Undone func()
	// StallAfter is how long a batch may take before the writer counts
	// as stalled (stall.go); zero: never. Start takes it from the store
	// when it is a base.Bounded.
	StallAfter time.Duration
}

// A Job is one write, one record, or both. The journal owns it from
// Submit until Submit returns.
type Job[R comparable] struct {
	Rec    R                      // the zero R: a write with no record
	Mutate func(w base.Txn) error // nil for a record alone
	After  func()                 // run on the journal's goroutine after a commit in which Mutate succeeded
	Header *headersign.Req        // a header to sign after the commit, when its Body is set
	Fail   error                  // the operation's failure, known before the commit: its record's result
	// Checks must hold when the job commits, when the trail is shared
	// (one process alone keeps its caches current as its writes commit,
	// and skips them).
	Checks []Check

	at Link // the record's place in the chain, once stamped
	// err is Mutate's error while the batch runs, then the job's outcome,
	// which the journal publishes by calling done.Done. (A WaitGroup in the
	// job costs no allocation; a channel would cost two.)
	err  error
	done sync.WaitGroup
}

// A Check is what a job needs of the store when it commits: Verdict is
// given the value of Key (nil and false when it is absent) and returns the
// job's error (nil: it holds), or an error of the store. The verdicts of a
// batch are remembered by key.
type Check struct {
	Key     []byte
	Verdict func(value []byte, found bool) (jobErr, err error)
}

// Journal is the single writer; see the package comment.
type Journal[R comparable] struct {
	cfg    Config[R]
	store  base.Store
	trail  base.Trail
	shared base.SharedTrail // the trail, when other processes append to it too; nil otherwise
	index  Indexer[R]       // entries of the records after the indexed head

	mu     sync.RWMutex // guards closed and sends on jobs
	closed bool

	// batchMu is held by the run goroutine while it commits a batch or
	// settles a doubt; whoever holds it sees the store and the trail
	// between batches, consistent with each other (Quiesce).
	batchMu sync.Mutex
	jobs    chan *Job[R]
	wg      sync.WaitGroup

	// Owned by the run goroutine after start:
	head    Head              // the last record in the trail
	indexed Head              // the last record the store's index names
	failed  error             // set when the journal can no longer write safely
	doubt   *doubt[R]         // a batch whose outcome is not settled yet
	written []string          // scratch: the keys the batch's store transaction wrote
	recs    [][]byte          // scratch: the records of a batch
	signs   []*headersign.Req // scratch: the headers of a batch
	acts    []R               // scratch: the records of a batch, for the observer

	appendTime time.Duration
	batchErr   error  // the error that failed the last batch as a whole
	last       int    // jobs in the previous batch
	pause      func() // the group-commit yield (runtime.Gosched); tests replace it

	// skip answers every job at once with its own failure (SetSkip).
	skip atomic.Bool

	// unhealthy is why the journal cannot write now (a batch in doubt,
	// a failure it cannot recover from), or nil.
	unhealthy atomic.Pointer[base.Error]
	// stopped is set, for good, by Stop: every batch fails with it.
	stopped atomic.Pointer[base.Error]
	// busySince is when the batch being committed began (unix
	// nanoseconds), or 0 (stall.go).
	busySince atomic.Int64
	// stalled is closed when the writer is seen stalled, and replaced
	// (stall.go): the callers waiting in Lock wait on it.
	stalled atomic.Pointer[chan struct{}]
}

// Start brings the trail and its index up to date after a crash (see
// recover) and starts the journal's goroutine.
func Start[R comparable](ctx context.Context, cfg Config[R]) (*Journal[R], error) {
	j := &Journal[R]{cfg: cfg, store: cfg.Store, trail: cfg.Store.Trail(), index: cfg.Index,
		jobs: make(chan *Job[R], 4*MaxBatch), pause: runtime.Gosched}
	stalled := make(chan struct{})
	j.stalled.Store(&stalled)
	if j.trail == nil {
		return nil, base.Errorf(base.KindInvalid, "the store has no activity trail")
	}
	j.shared, _ = j.trail.(base.SharedTrail)
	if b, ok := cfg.Store.(base.Bounded); ok && j.cfg.StallAfter == 0 {
		j.cfg.StallAfter = b.Bound()
	}
	recoverFn := j.recover
	if j.shared != nil {
		// Under the append lock, so that no other process appends
		// meanwhile: the trail and its index stay as recover found them.
		recoverFn = func(ctx context.Context) error {
			return j.shared.AppendIn(ctx, func(tx base.Txn) (uint64, [][]byte, error) {
				if _, err := LoadHead(tx, cfg.HeadKey); err != nil { // takes the lock
					return 0, nil, err
				}
				return 0, nil, j.recover(ctx)
			})
		}
	}
	if err := recoverFn(ctx); err != nil {
		return nil, err
	}
	j.wg.Add(1)
	go j.run()
	return j, nil
}

// Submit runs one job and waits for its commit. It returns the mutation's
// own error when the mutation failed (its record, if any, is still
// written, with the failure as its result), or the commit's error, in
// which case nothing of the job was written.
func (j *Journal[R]) Submit(jb *Job[R]) error {
	if j.skip.Load() {
		if jb.Mutate != nil { // a counter's block reservation: rare
			if err := j.store.Update(context.Background(), jb.Mutate); err != nil {
				return err
			}
		}
		return jb.Fail
	}
	if e := j.stall(); e != nil {
		return e
	}
	jb.done.Add(1)
	j.mu.RLock()
	if j.closed {
		j.mu.RUnlock()
		return base.Errorf(base.KindInternal, "service is closed")
	}
	j.jobs <- jb
	j.mu.RUnlock()
	jb.done.Wait()
	return jb.err
}

// Close stops the journal once the jobs submitted are answered.
func (j *Journal[R]) Close() {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.jobs)
	}
	j.mu.Unlock()
	j.wg.Wait()
}

// Health returns why the journal cannot write now, or nil.
func (j *Journal[R]) Health() error {
	if e := j.unhealthy.Load(); e != nil {
		return e
	}
	if e := j.stopped.Load(); e != nil {
		return e
	}
	if e := j.stall(); e != nil {
		return e
	}
	return nil
}

// Stop fails every batch from now on, for good, with e, and reports
// whether it was the first to (a journal stops once).
func (j *Journal[R]) Stop(e *base.Error) bool { return j.stopped.CompareAndSwap(nil, e) }

// Stopped reports whether Stop was called.
func (j *Journal[R]) Stopped() bool { return j.stopped.Load() != nil }

// Queued returns the number of jobs waiting for the journal.
func (j *Journal[R]) Queued() int { return len(j.jobs) }

// SetSkip, for the layer benchmark, answers every job at once with its own
// failure, recording and signing nothing and committing only mutations
// (an encrypt has none but the rare reservation of a counter block): what
// a call costs without the journal. One atomic load per job otherwise.
func (j *Journal[R]) SetSkip(on bool) { j.skip.Store(on) }

// SetPause replaces the group-commit yield, for tests that must know when
// a batch is gathered.
func (j *Journal[R]) SetPause(pause func()) { j.pause = pause }

func (j *Journal[R]) run() {
	defer j.wg.Done()
	defer j.settleAtClose()
	if j.cfg.StallAfter > 0 {
		quit := make(chan struct{})
		defer close(quit)
		go j.watchStalls(quit)
	}
	batch := make([]*Job[R], 0, MaxBatch)
	var retry <-chan time.Time
	for {
		if j.doubt != nil && retry == nil {
			retry = time.After(doubtRetry)
		}
		var first *Job[R]
		select {
		case jb, ok := <-j.jobs:
			if !ok {
				return
			}
			first = jb
		case <-retry:
			retry = nil
			j.batchMu.Lock()
			j.settle()
			j.batchMu.Unlock()
			continue
		}
		batch = append(batch[:0], first)
		waited := false
	fill:
		for len(batch) < MaxBatch {
			select {
			case jb, ok := <-j.jobs:
				if !ok {
					break fill
				}
				batch = append(batch, jb)
			default:
				if waited || !gather(len(batch), j.last) {
					break fill
				}
				waited = true
				j.pause() // ready handlers run and queue their jobs meanwhile
			}
		}
		j.last = len(batch)
		start := time.Now()
		j.appendTime, j.batchErr = 0, nil
		j.batchMu.Lock()
		j.busy()
		j.commit(batch)
		j.idle()
		j.batchMu.Unlock()
		j.observe(len(batch), start, j.batchErr)
	}
}

// Quiesce waits until no batch is being committed and returns, with the
// journal held between batches, the number of records in the trail, every
// one of them committed with its writes, and a function that lets the
// journal go on. It fails when the journal cannot write safely now.
func (j *Journal[R]) Quiesce() (seq uint64, resume func(), err error) {
	j.batchMu.Lock()
	switch {
	case j.failed != nil:
		err = &base.Error{Kind: base.KindInternal, Message: "activity trail unavailable", Err: j.failed}
	case j.doubt != nil:
		err = &base.Error{Kind: base.KindUnavailable, Err: j.doubt.err, Message: "service unavailable: the outcome of earlier writes is not settled yet; try again"}
	}
	if err != nil {
		j.batchMu.Unlock()
		return 0, nil, err
	}
	var once sync.Once
	return j.head.Seq, func() { once.Do(j.batchMu.Unlock) }, nil
}

func (j *Journal[R]) commit(batch []*Job[R]) {
	if j.failed != nil {
		j.answer(batch, &base.Error{Kind: base.KindInternal, Message: "activity trail unavailable", Err: j.failed})
		return
	}
	if e := j.stopped.Load(); e != nil {
		j.answer(batch, e)
		return
	}
	if j.doubt != nil && !j.settle() {
		j.answer(batch, &base.Error{Kind: base.KindUnavailable, Err: j.doubt.err,
			Message: "service unavailable: the outcome of earlier writes is not settled yet; try again"})
		return
	}
	ctx := context.Background()
	if err := j.store.Writable(ctx); err != nil {
		j.answer(batch, err)
		return
	}
	if j.shared != nil {
		j.commitShared(ctx, batch)
		return
	}
	mutates := slices.ContainsFunc(batch, func(jb *Job[R]) bool { return jb.Mutate != nil })
	if !mutates {
		j.commitBatch(ctx, batch, nil)
		return
	}
	// The snapshot is what an undo restores (see the package comment);
	// the store's transaction commits inside it.
	err := j.store.View(ctx, func(snap base.Txn) error {
		j.commitBatch(ctx, batch, snap)
		return nil
	})
	if err != nil {
		j.cfg.Log(err, "journal commit failed")
		j.answer(batch, &base.Error{Kind: base.KindInternal, Message: "commit", Err: err})
	}
}
