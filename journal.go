package kms

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hmackey"
)

// The journal is the Service's single writer. Every write of the domain,
// and every activity record, goes through it as a job: the journal gathers
// the jobs that are waiting and, for each batch,
//
//  1. runs their mutations in one store transaction, committed durably
//     (only when a job has a mutation), together with the batch's
//     activity records under act/pending;
//  2. appends the activity records to the Trail, durably, and meanwhile,
//     on another goroutine, signs the headers of the batch's encrypt
//     calls, a few Merkle trees with one signature each (internal/headersign);
//  3. writes their index entries to the store (UpdateNoSync: they can be
//     rebuilt from the trail);
//  4. answers each job.
//
// So an operation is answered only once its activity record is durable
// (the trail is fail-closed); the activity chain has one appender; and one
// durable write of the trail serves every job of a batch. An operation
// that changes the store and its record become durable together: a crash
// between steps 1 and 2 leaves the records in act/pending, from which
// startJournal appends them to the trail. A crash before step 3 leaves
// records that the index does not name yet; startJournal indexes them.
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
// leaves act/pending, and the next start completes the batch.
//
// A job's mutation runs against an overlay of the batch transaction: when it
// fails, its writes are dropped and the other jobs of the batch go on. Gets
// in a mutation see the writes of earlier jobs of the same batch and its own;
// Scans see earlier jobs' writes but not the job's own.

const maxBatch = 256

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

type job struct {
	act    *Activity         // nil for a write with no activity record
	mutate func(w Txn) error // nil for a record alone
	after  func()            // run on the writer goroutine after a commit in which mutate succeeded
	header *headersign.Req   // a header to sign after the commit, when its body is set (internal/headersign)
	fail   error             // the operation's failure, known before the commit: its record's result
	guard  []byte            // with a SharedTrail, a key that must exist when the job commits (its ring)
	key    *keyGuard         // with a SharedTrail, the key an encrypt hands out, which must be usable when the job commits

	// err is mutate's error while the batch runs, then the job's outcome,
	// which the journal publishes by calling done.Done. (A WaitGroup in the
	// job costs no allocation; a channel would cost two.)
	err  error
	done sync.WaitGroup
}

type chainHead struct {
	Seq    uint64 `json:"seq"`
	Digest string `json:"digest"`
	Time   int64  `json:"time"`
}

type journal struct {
	store    Store
	trail    Trail
	shared   SharedTrail  // the trail, when other processes append to it too; nil otherwise
	chainKey *hmackey.Key // keys the activity chain (chainDigest)
	now      func() time.Time
	log      func(err error, msg string)

	mu     sync.RWMutex // guards closed and sends on jobs
	closed bool

	// batchMu is held by the run goroutine while it commits a batch or
	// settles a doubt; whoever holds it sees the store and the trail
	// between batches, consistent with each other (quiesce).
	batchMu sync.Mutex
	jobs    chan *job
	wg      sync.WaitGroup

	// Owned by the run goroutine after start:
	head    chainHead         // the last record in the trail
	index   *termIndex        // entries of the records after the indexed head
	indexed chainHead         // the last record the store's index names
	failed  error             // set when the journal can no longer write safely
	doubt   *doubt            // a batch whose outcome is not settled yet
	written []string          // scratch: the keys the batch's store transaction wrote
	recs    [][]byte          // scratch: the records of a batch
	signs   []*headersign.Req // scratch: the headers of a batch
	acts    []*Activity       // scratch: the records of a batch, for the observer

	// observer, when set, is told of each batch (observe.go), with the
	// time of its trail append.
	observer   Observer
	appendTime time.Duration
	batchErr   error  // the error that failed the last batch as a whole
	last       int    // jobs in the previous batch
	pause      func() // the group-commit yield (runtime.Gosched); tests replace it

	// signer signs headers: the Service's, which New sets once the
	// signing key is loaded, before any job can carry a header, and a
	// rotation replaces (signingkeys.go). Each batch loads it once.
	signer *atomic.Pointer[headersign.Signer]

	// undone runs after the writes of a batch were undone, so that no
	// cache keeps what a reader saw of them meanwhile; New sets it.
	undone func()

	// skip, set only by the layer benchmark (BenchmarkEncryptLayers),
	// answers every job at once with its own failure, recording and
	// signing nothing and committing only mutations (an encrypt has none
	// but the rare reservation of a counter block): what a call costs
	// without the journal. One atomic load per job otherwise.
	skip atomic.Bool

	// unhealthy is why the journal cannot write now (a batch in doubt,
	// a failure it cannot recover from), or nil; Service.Ping reads it.
	unhealthy atomic.Pointer[Error]
	// rekeyed is set, for good, when the store turns out to be sealed
	// under another master key than this process's (a Rekey ran
	// while it was cut off from a shared store): every batch fails, since
	// what it sealed would open under no key the store has.
	rekeyed atomic.Pointer[Error]
}

// doubt is a batch whose writes the store committed but whose records the
// trail refused, and whose writes could not be undone either.
type doubt struct {
	batch  []*job
	recs   [][]byte  // the batch's records, to append
	priors []prior   // the keys the batch wrote, as they were before (nil: unknown)
	head   chainHead // the chain's head once the records are appended
	err    error     // the trail's refusal
}

func startJournal(ctx context.Context, st Store, chainKey *hmackey.Key, now func() time.Time, log func(error, string), obs Observer) (*journal, error) {
	j := &journal{store: st, trail: st.Trail(), chainKey: chainKey, now: now, log: log, observer: obs,
		jobs: make(chan *job, 4*maxBatch), index: newTermIndex(),
		pause: runtime.Gosched}
	if j.trail == nil {
		return nil, Errorf(KindInvalid, "the store has no activity trail")
	}
	j.shared, _ = j.trail.(SharedTrail)
	recoverFn := j.recover
	if j.shared != nil {
		// Under the append lock, so that no other process appends
		// meanwhile: the trail and its index stay as recover found them.
		recoverFn = func(ctx context.Context) error {
			return j.shared.AppendIn(ctx, func(tx Txn) (uint64, [][]byte, error) {
				if _, err := loadHead(tx); err != nil { // takes the lock
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

// recover brings the trail and its index up to date after a crash: it
// appends the records of act/pending that the trail lacks, and indexes the
// records the index does not name yet, checking that they chain on from
// the last indexed record.
func (j *journal) recover(ctx context.Context) error {
	var pending []byte
	err := j.store.View(ctx, func(tx Txn) error {
		var err error
		if j.indexed, err = loadHead(tx); err != nil {
			return err
		}
		pending, err = tx.Get(keyActPending)
		if isNotFound(err) {
			err = nil
		}
		return err
	})
	if err != nil {
		return internalError("load activity chain head", err)
	}
	// Checked before anything is appended, so that a trail found damaged
	// is left as it was for its owner to examine.
	if err := j.trail.Check(j.indexed.Seq); err != nil {
		return trailDamaged(err, j.trail.Len(), j.indexed.Seq)
	}
	if len(pending) > 0 {
		first, recs, err := decodePending(pending)
		if err != nil {
			return internalError("read pending activity", err)
		}
		n := j.trail.Len()
		if last := first + uint64(len(recs)) - 1; last > n {
			if first > n+1 {
				return Errorf(KindUnprocessable, "activity trail ends at record %d, before the pending records %d-%d: records were removed or damaged", n, first, last)
			}
			if err := j.trail.Append(recs[n+1-first:]); err != nil {
				return internalError("append pending activity", err)
			}
		}
	}
	j.head = j.indexed
	if j.indexed.Seq > 0 {
		// The last indexed record must be the one the index names.
		err := j.trail.Scan(j.indexed.Seq, func(seq uint64, rec []byte) (bool, error) {
			a, err := decodeActivity(rec)
			if err == nil && a.Digest == j.indexed.Digest {
				sum := chainDigest(j.chainKey, a.Prev, rec[32:])
				if digestHex(sum) == a.Digest {
					return false, nil
				}
			}
			return false, Errorf(KindUnprocessable, "activity record %d is not the one the index names: the trail was altered", seq)
		})
		if err != nil {
			return err
		}
	}
	err = j.trail.Scan(j.indexed.Seq+1, func(seq uint64, rec []byte) (bool, error) {
		a, err := decodeActivity(rec)
		if err != nil {
			return false, internalError("read activity record", err)
		}
		sum := chainDigest(j.chainKey, j.head.Digest, rec[32:])
		if a.Seq != seq || a.Prev != j.head.Digest || digestHex(sum) != a.Digest {
			return false, Errorf(KindUnprocessable, "activity record %d does not chain on from record %d: the trail was altered", seq, j.head.Seq)
		}
		j.index.add(a, j.head.Time, j.head.Seq == 0)
		j.head = chainHead{Seq: seq, Digest: a.Digest, Time: a.CreatedAt}
		if j.index.last-j.indexed.Seq >= 8192 {
			return true, j.writeIndex(ctx)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	return j.writeIndex(ctx)
}

// trailDamaged is the error of a trail whose Check failed: of kind
// Unprocessable, naming what the trail said, how many records precede the
// damage, and how far the store's index reaches.
func trailDamaged(err error, whole, indexed uint64) error {
	if ErrorKind(err) != KindUnprocessable {
		return internalError("check activity trail", err)
	}
	return &Error{Kind: KindUnprocessable, Err: err, Message: fmt.Sprintf(
		"activity trail is damaged: %s (%d records before it are readable; the store's index names %d)", ErrorMessage(err), whole, indexed)}
}

// submit runs one job and waits for its commit. It returns the mutation's
// own error when the mutation failed (its activity record, if any, is still
// written, with the failure as its result), or an internal error when the
// commit failed, in which case nothing of the job was written.
func (j *journal) submit(act *Activity, mutate func(Txn) error, after func()) error {
	return j.submitJob(&job{act: act, mutate: mutate, after: after})
}

// submitJob runs jb and waits for its commit, as submit.
func (j *journal) submitJob(jb *job) error {
	if j.skip.Load() {
		if jb.mutate != nil { // a counter's block reservation: rare
			if err := j.store.Update(context.Background(), jb.mutate); err != nil {
				return err
			}
		}
		return jb.fail
	}
	jb.done.Add(1)
	j.mu.RLock()
	if j.closed {
		j.mu.RUnlock()
		return Errorf(KindInternal, "service is closed")
	}
	j.jobs <- jb
	j.mu.RUnlock()
	jb.done.Wait()
	return jb.err
}

func (j *journal) close() {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.jobs)
	}
	j.mu.Unlock()
	j.wg.Wait()
}

func (j *journal) run() {
	defer j.wg.Done()
	defer j.settleAtClose()
	batch := make([]*job, 0, maxBatch)
	var retry <-chan time.Time
	for {
		if j.doubt != nil && retry == nil {
			retry = time.After(doubtRetry)
		}
		var first *job
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
		for len(batch) < maxBatch {
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
		j.commit(batch)
		j.batchMu.Unlock()
		j.observe(len(batch), start, j.batchErr)
	}
}

// quiesce waits until no batch is being committed and returns, with the
// journal held between batches, the number of records in the trail, every
// one of them committed with its writes, and a function that lets the
// journal go on. It fails when the journal cannot write safely now.
func (j *journal) quiesce() (seq uint64, resume func(), err error) {
	j.batchMu.Lock()
	switch {
	case j.failed != nil:
		err = &Error{Kind: KindInternal, Message: "activity trail unavailable", Err: j.failed}
	case j.doubt != nil:
		err = &Error{Kind: KindUnavailable, Err: j.doubt.err, Message: "service unavailable: the outcome of earlier writes is not settled yet; try again"}
	}
	if err != nil {
		j.batchMu.Unlock()
		return 0, nil, err
	}
	var once sync.Once
	return j.head.Seq, func() { once.Do(j.batchMu.Unlock) }, nil
}

func (j *journal) commit(batch []*job) {
	if j.failed != nil {
		j.answer(batch, &Error{Kind: KindInternal, Message: "activity trail unavailable", Err: j.failed})
		return
	}
	if e := j.rekeyed.Load(); e != nil {
		j.answer(batch, e)
		return
	}
	if j.doubt != nil && !j.settle() {
		j.answer(batch, &Error{Kind: KindUnavailable, Err: j.doubt.err,
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
	mutates := slices.ContainsFunc(batch, func(jb *job) bool { return jb.mutate != nil })
	if !mutates {
		j.commitBatch(ctx, batch, nil)
		return
	}
	// The snapshot is what an undo restores (see the package comment);
	// the store's transaction commits inside it.
	err := j.store.View(ctx, func(snap Txn) error {
		j.commitBatch(ctx, batch, snap)
		return nil
	})
	if err != nil {
		j.log(err, "journal commit failed")
		j.answer(batch, &Error{Kind: KindInternal, Message: "commit", Err: err})
	}
}

// commitBatch commits batch: its mutations in one store transaction when
// snap is set (the store as it was before, for an undo), then its records
// to the trail. It answers every job, or leaves them in doubt.
func (j *journal) commitBatch(ctx context.Context, batch []*job, snap Txn) {
	head := j.head
	wrote := false // whether the store transaction wrote anything
	var err error
	if snap != nil {
		err = j.store.Update(ctx, func(tx Txn) error {
			head, wrote, j.recs, j.written = j.head, false, j.recs[:0], j.written[:0]
			for _, jb := range batch {
				jb.err = nil
				keys, err := runMutation(tx, jb)
				if err != nil {
					return err
				}
				if len(keys) > 0 {
					wrote = true
					j.written = append(j.written, keys...)
				}
				if err := j.appendRecord(&head, jb.act, cmp.Or(jb.err, jb.fail)); err != nil {
					return err
				}
			}
			if !wrote || len(j.recs) == 0 {
				return nil
			}
			j.written = append(j.written, string(keyActPending))
			return tx.Set(keyActPending, encodePending(j.head.Seq+1, j.recs))
		})
	} else {
		j.recs = j.recs[:0]
		for _, jb := range batch {
			jb.err = nil
			if err = j.appendRecord(&head, jb.act, jb.fail); err != nil {
				break
			}
		}
	}
	if err != nil && ErrorKind(err) == KindTooLarge && len(batch) > 1 {
		// The batch outgrew one transaction: commit it in halves, in order.
		// (Each half takes its own snapshot for an undo.)
		half := len(batch) / 2
		j.commit(batch[:half])
		j.commit(batch[half:])
		return
	}
	if err == nil {
		// The headers are signed on another core while the trail syncs;
		// they are handed out only once it has.
		signed := j.signHeaders(batch)
		if len(j.recs) > 0 {
			began := time.Now()
			err = j.trail.Append(j.recs)
			j.appendTime += time.Since(began)
		}
		<-signed
		if err != nil && wrote {
			// The store has the batch's writes (and its records in
			// act/pending), the trail not its records: undo the writes
			// before the error is answered.
			priors, uerr := priorsOf(snap, j.written)
			if uerr == nil {
				uerr = j.undo(ctx, priors)
			}
			if uerr != nil {
				j.log(uerr, "undoing the writes of a batch the trail refused failed; the batch is in doubt")
				j.doubt = &doubt{batch: slices.Clone(batch), recs: cloneAll(j.recs), priors: priors, head: head, err: err}
				j.unhealthy.Store(&Error{Kind: KindUnavailable, Err: err,
					Message: "service unavailable: the activity trail refused a batch of writes that could not be undone yet"})
				return
			}
		}
	}
	if err != nil {
		j.log(err, "journal commit failed")
		j.answer(batch, commitError(err))
		return
	}
	j.finish(batch, head)
}

// commitShared commits batch on a SharedTrail: its mutations, its records
// and their index entries, and the chain's new head, in one transaction
// that reads the head the last batch of any process left. So the chain
// has no gap or fork however many processes append, a batch that fails
// leaves nothing behind (no undo, no act/pending), and the index always
// names every record.
func (j *journal) commitShared(ctx context.Context, batch []*job) {
	var (
		head   chainHead
		signed <-chan struct{}
		exists = map[string]error{} // guard key (ring or key) -> nil, or why the job fails
		reads  [][]byte             // the keys prefetched
	)
	err := j.shared.AppendIn(ctx, func(tx Txn) (uint64, [][]byte, error) {
		if signed != nil {
			<-signed // an earlier attempt's signatures: j.signs is free again
			signed = nil
		}
		// The head and the guards in one read: over a network, a round
		// trip per batch instead of one per key. (A store takes its
		// append lock at the first read.)
		reads = usageKeys(guardKeys(append(reads[:0], keyActHead), batch), batch)
		if err := prefetch(tx, reads); err != nil {
			return 0, nil, err
		}
		// The jobs that came while this process waited for the append
		// lock join the batch: with several processes taking turns, a
		// turn then carries what queued during the wait, instead of
		// leaving it for the next turn.
		if n := len(batch); j.drain(&batch) {
			more := usageKeys(guardKeys(nil, batch[n:]), batch[n:])
			more = slices.DeleteFunc(more, func(k []byte) bool { return slices.ContainsFunc(reads, bytesEqual(k)) })
			if err := prefetch(tx, more); err != nil {
				return 0, nil, err
			}
			reads = append(reads, more...)
		}
		last, err := loadHead(tx)
		if err != nil {
			return 0, nil, err
		}
		head, j.recs = last, j.recs[:0]
		j.index.reset()
		clear(exists)
		for _, jb := range batch {
			jb.err = nil
			if jb.guard != nil {
				if jb.err, err = guardExists(tx, jb.guard, exists); err != nil {
					return 0, nil, err
				}
			}
			if jb.err == nil && jb.key != nil {
				if jb.err, err = keyUsable(tx, jb.key, exists); err != nil {
					return 0, nil, err
				}
			}
			if jb.err == nil {
				if _, err := runMutation(tx, jb); err != nil {
					return 0, nil, err
				}
			}
			prev := head
			if err := j.appendRecord(&head, jb.act, cmp.Or(jb.err, jb.fail)); err != nil {
				return 0, nil, err
			}
			if jb.act != nil {
				j.index.add(jb.act, prev.Time, prev.Seq == 0)
			}
		}
		if len(j.recs) > 0 {
			if err := j.index.write(tx); err != nil {
				return 0, nil, err
			}
			if err := j.index.writeUsage(tx); err != nil {
				return 0, nil, err
			}
			if err := storeHead(tx, head); err != nil {
				return 0, nil, err
			}
		}
		// The headers are signed on another core while the commit is
		// under way; they are handed out only once it is done.
		signed = j.signHeaders(batch)
		return last.Seq + 1, j.recs, nil
	})
	if signed != nil {
		<-signed
	}
	j.index.reset()
	if err != nil && ErrorKind(err) == KindTooLarge && len(batch) > 1 {
		// The batch outgrew one transaction: commit it in halves, in order.
		half := len(batch) / 2
		j.commit(batch[:half])
		j.commit(batch[half:])
		return
	}
	if err != nil {
		j.log(err, "journal commit failed")
		j.answer(batch, commitError(err))
		return
	}
	j.head, j.indexed = head, head
	j.succeed(batch)
}

// guardKeys appends to keys the guard keys of batch that it lacks: the
// rings and the keys its jobs check.
func guardKeys(keys [][]byte, batch []*job) [][]byte {
	for _, jb := range batch {
		keys = appendKey(keys, jb.guard)
		if jb.key != nil {
			keys = appendKey(keys, jb.key.key)
		}
	}
	return keys
}

// appendKey appends k to keys unless it is nil or keys has it.
func appendKey(keys [][]byte, k []byte) [][]byte {
	if k != nil && !slices.ContainsFunc(keys, bytesEqual(k)) {
		keys = append(keys, k)
	}
	return keys
}

func bytesEqual(a []byte) func([]byte) bool {
	return func(b []byte) bool { return bytes.Equal(a, b) }
}

// drain appends to *batch the jobs queued now, up to maxBatch in all,
// without waiting, and reports whether it took any.
func (j *journal) drain(batch *[]*job) bool {
	n := len(*batch)
	for len(*batch) < maxBatch {
		select {
		case jb, ok := <-j.jobs:
			if !ok {
				return len(*batch) > n
			}
			*batch = append(*batch, jb)
		default:
			return len(*batch) > n
		}
	}
	return len(*batch) > n
}

// runMutation runs jb's mutation, if any, on an overlay of tx, setting
// jb.err to its outcome, and when it succeeds writes its writes to tx and
// returns their keys. The error is tx's, when it refused the writes.
func runMutation(tx Txn, jb *job) (written []string, err error) {
	if jb.mutate == nil {
		return nil, nil
	}
	o := newOverlay(tx)
	if jb.err = jb.mutate(o); jb.err != nil || len(o.order) == 0 {
		return nil, nil
	}
	return o.order, o.flush()
}

// guardExists returns, for a job's guard key, the job's error: nil if the
// key exists in tx, NotFound if not; or the store's error. seen remembers
// the answers of a batch.
func guardExists(tx Txn, key []byte, seen map[string]error) (jobErr, err error) {
	if jobErr, ok := seen[string(key)]; ok {
		return jobErr, nil
	}
	_, err = tx.Get(key)
	switch {
	case isNotFound(err):
		jobErr = Errorf(KindNotFound, "key ring not found: it was deleted")
	case err != nil:
		return nil, err
	}
	seen[string(key)] = jobErr
	return jobErr, nil
}

// commitError is what the jobs of a batch that failed to commit are
// answered: a full disk or an unreachable store as such (the caller may
// retry elsewhere or later), anything else (even a Conflict after the
// store's retries) as an internal failure.
func commitError(err error) error {
	if k := ErrorKind(err); k == KindNoSpace || k == KindUnavailable {
		return err
	}
	return &Error{Kind: KindInternal, Message: "commit", Err: err}
}

// finish indexes the records of batch, whose records are durable and whose
// chain ends at head, and answers its jobs.
func (j *journal) finish(batch []*job, head chainHead) {
	j.indexRecords(batch)
	j.head = head
	if err := j.writeIndex(context.Background()); err != nil {
		j.log(err, "activity index write failed; it is retried with the next batch")
		if j.index.last-j.indexed.Seq > maxUnindexed {
			j.failed = err
			j.unhealthy.Store(&Error{Kind: KindUnavailable, Err: err,
				Message: "service unavailable: the activity index cannot be written"})
		}
	}
	j.succeed(batch)
}

// succeed answers the jobs of a batch that committed: each its own
// outcome, after running the after hook of those whose mutation succeeded.
func (j *journal) succeed(batch []*job) {
	j.observeRecords(batch)
	for _, jb := range batch {
		if jb.err == nil && jb.after != nil {
			jb.after()
		}
		jb.done.Done()
	}
}

// prior is a key as it was before a batch wrote it: its value, or absent.
type prior struct {
	key, val []byte
	absent   bool
}

// priorsOf reads every key of written as snap, the store before the batch,
// has it.
func priorsOf(snap Txn, written []string) ([]prior, error) {
	ps := make([]prior, len(written))
	for i, k := range written {
		ps[i].key = []byte(k)
		v, err := snap.Get(ps[i].key)
		switch {
		case isNotFound(err):
			ps[i].absent = true
		case err != nil:
			return nil, err
		}
		ps[i].val = v
	}
	return ps, nil
}

// undo restores every key of priors, in one durable transaction, and
// then lets the caches forget what readers saw of the undone writes.
func (j *journal) undo(ctx context.Context, priors []prior) error {
	err := j.store.Update(ctx, func(tx Txn) error {
		for _, p := range priors {
			var err error
			if p.absent {
				err = tx.Delete(p.key)
			} else {
				err = tx.Set(p.key, p.val)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && j.undone != nil {
		j.undone()
	}
	return err
}

// settle tries to decide the batch in doubt: appending its records (it
// succeeded), or else undoing its writes (it failed, and its jobs are
// answered the trail's error). It reports whether the doubt is gone.
func (j *journal) settle() bool {
	d := j.doubt
	if d == nil {
		return true
	}
	if err := j.trail.Append(d.recs); err == nil {
		j.doubt = nil
		j.unhealthy.Store(nil)
		j.log(nil, "a batch in doubt was settled: the trail took its records")
		j.finish(d.batch, d.head)
		return true
	}
	if d.priors == nil {
		return false
	}
	if err := j.undo(context.Background(), d.priors); err != nil {
		return false
	}
	j.doubt = nil
	j.unhealthy.Store(nil)
	j.log(nil, "a batch in doubt was settled: its writes were undone")
	// Not answer: the batch being committed, if any, is another.
	reply(d.batch, commitError(d.err))
	return true
}

// settleAtClose answers the jobs of a batch still in doubt when the
// journal stops: the store keeps their writes in act/pending, and the next
// start appends their records, so they will have happened; but the
// callers cannot be told so now.
func (j *journal) settleAtClose() {
	if j.doubt == nil || j.settle() {
		return
	}
	reply(j.doubt.batch, &Error{Kind: KindUnavailable, Err: j.doubt.err,
		Message: "service stopped with this call's outcome not settled: its writes are kept and complete at the next start"})
	j.doubt = nil
}

// cloneAll returns a deep copy of recs.
func cloneAll(recs [][]byte) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		out[i] = bytes.Clone(r)
	}
	return out
}

// signHeaders signs, on a goroutine of its own, the headers of the jobs of
// batch whose mutation succeeded, and returns a channel that is closed when
// it is done. j.signs is the goroutine's until then.
func (j *journal) signHeaders(batch []*job) <-chan struct{} {
	done := make(chan struct{})
	j.signs = j.signs[:0]
	for _, jb := range batch {
		if jb.err == nil && jb.header != nil && jb.header.Body != nil {
			j.signs = append(j.signs, jb.header)
		}
	}
	if len(j.signs) == 0 {
		close(done)
		return done
	}
	g := j.signer.Load()
	go func() {
		defer close(done)
		g.Sign(j.signs)
	}()
	return done
}

// answer fails batch, the batch being committed, with err.
func (j *journal) answer(batch []*job, err error) {
	j.batchErr = err
	reply(batch, err)
}

// reply gives every job of batch its outcome, err.
func reply(batch []*job, err error) {
	for _, jb := range batch {
		jb.err = err
		jb.done.Done()
	}
}

// indexRecords adds the index entries of the batch's records, which follow
// j.head.
func (j *journal) indexRecords(batch []*job) {
	prev := j.head
	for _, jb := range batch {
		if a := jb.act; a != nil {
			j.index.add(a, prev.Time, prev.Seq == 0)
			prev = chainHead{Seq: a.Seq, Time: a.CreatedAt}
		}
	}
}

// writeIndex writes the gathered index entries and the new indexed head
// to the store. A store that refuses a transaction as too large gets the
// entries in smaller ones, the head in the last.
func (j *journal) writeIndex(ctx context.Context) error {
	if j.index.empty() {
		return nil
	}
	err := j.store.UpdateNoSync(ctx, func(tx Txn) error {
		if err := j.index.write(tx); err != nil {
			return err
		}
		if err := j.index.writeUsage(tx); err != nil {
			return err
		}
		return storeHead(tx, j.head)
	})
	if ErrorKind(err) == KindTooLarge {
		err = j.writeIndexInParts(ctx)
	}
	if err != nil {
		return err
	}
	j.indexed = j.head
	j.index.reset()
	return nil
}

func (j *journal) writeIndexInParts(ctx context.Context) error {
	type kv struct{ k, v []byte }
	var all []kv
	collect := collectTxn{set: func(k, v []byte) { all = append(all, kv{k, v}) }}
	if err := j.index.write(&collect); err != nil {
		return err
	}
	for n := len(all); len(all) > 0; {
		part := all[:min(n, len(all))]
		err := j.store.UpdateNoSync(ctx, func(tx Txn) error {
			for _, e := range part {
				if err := tx.Set(e.k, e.v); err != nil {
					return err
				}
			}
			return nil
		})
		switch {
		case ErrorKind(err) == KindTooLarge && n > 1:
			n /= 2
			continue
		case err != nil:
			return err
		}
		all = all[len(part):]
	}
	return j.store.UpdateNoSync(ctx, func(tx Txn) error {
		if err := j.index.writeUsage(tx); err != nil {
			return err
		}
		return storeHead(tx, j.head)
	})
}

// collectTxn is a Txn that only gathers writes.
type collectTxn struct {
	Txn
	set func(k, v []byte)
}

func (c *collectTxn) Set(k, v []byte) error { c.set(k, v); return nil }

// appendRecord stamps act with its place in the chain after head and the
// outcome of its operation, opErr (nil for success), encodes it into
// j.recs and moves head on. A nil act is no record.
func (j *journal) appendRecord(head *chainHead, act *Activity, opErr error) error {
	if act == nil {
		return nil
	}
	now := j.now().UnixMilli()
	if now < head.Time {
		now = head.Time // the chain's clock never runs backwards
	}
	act.CreatedAt = now
	act.Seq = head.Seq + 1
	act.ID = activityID(now, act.Seq)
	act.Prev = head.Digest
	if act.Props == nil {
		act.Props = map[string]any{}
	}
	// props action and ring repeat the fields, always: a search by those
	// props is served by the action and ring indexes.
	act.Props["action"] = act.Action
	if act.Ring != "" {
		act.Props["ring"] = act.Ring
	} else {
		delete(act.Props, "ring")
	}
	act.Props["result"] = resultOf(opErr)
	if refused(opErr) {
		act.Valid = false
	}
	act.Digest = ""
	rec, err := act.appendJSON(make([]byte, 32, 768)) // stored: digest (32 bytes) | record JSON
	if err != nil {
		return err
	}
	sum := chainDigest(j.chainKey, act.Prev, rec[32:])
	copy(rec, sum[:])
	j.recs = append(j.recs, rec)
	act.Digest = digestHex(sum)
	*head = chainHead{Seq: act.Seq, Digest: act.Digest, Time: now}
	return nil
}

// activityID is the ID of the record seq, created at ms: 16 bytes, the
// first 6 the time in milliseconds (as every ID of newID), then 2 zero
// bytes and the seq, so that a record is found from its ID alone.
func activityID(ms int64, seq uint64) string {
	var b [16]byte
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(max(ms, 0)))
	copy(b[:6], ts[2:])
	binary.BigEndian.PutUint64(b[8:], seq)
	return hex.EncodeToString(b[:])
}

// encodePending encodes the records first, first+1...: first (uint64),
// then each record as its length (uvarint) and bytes.
func encodePending(first uint64, recs [][]byte) []byte {
	n := 8
	for _, r := range recs {
		n += binary.MaxVarintLen64 + len(r)
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, n), first)
	for _, r := range recs {
		b = append(binary.AppendUvarint(b, uint64(len(r))), r...)
	}
	return b
}

func decodePending(b []byte) (first uint64, recs [][]byte, err error) {
	if len(b) < 8 {
		return 0, nil, Errorf(KindInternal, "pending activity is truncated")
	}
	first, b = binary.BigEndian.Uint64(b), b[8:]
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return 0, nil, Errorf(KindInternal, "pending activity is truncated")
		}
		recs, b = append(recs, b[n:n+int(l)]), b[n+int(l):]
	}
	if first == 0 || len(recs) == 0 {
		return 0, nil, Errorf(KindInternal, "pending activity is empty")
	}
	return first, recs, nil
}

// chainDigest is the digest of a record: HMAC-SHA256, under a key derived
// from the master key, of the previous record's digest (hex) followed by
// the record's JSON, which itself names prev. Keyed, so that whoever can
// write the store but holds no master key cannot forge a consistent chain.
func chainDigest(key *hmackey.Key, prev string, body []byte) [32]byte {
	var out [32]byte
	key.Sum(out[:0], []byte(prev), body)
	return out
}

// resultOf is the activity "result" of an operation's outcome: "ok", or the
// code of the error's kind. It returns the prop's value boxed, since a
// constant is boxed without allocating: "ok" costs nothing.
func resultOf(err error) any {
	if err == nil {
		return "ok"
	}
	return ErrorKind(err).String()
}

func seqKey(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// overlay buffers one job's writes on top of the batch transaction, so a
// failed job leaves nothing behind.
type overlay struct {
	tx     Txn
	writes map[string][]byte // nil value: deleted
	order  []string
}

func newOverlay(tx Txn) *overlay { return &overlay{tx: tx} }

func (o *overlay) Get(key []byte) ([]byte, error) {
	if v, ok := o.writes[string(key)]; ok {
		if v == nil {
			return nil, Errorf(KindNotFound, "key not found")
		}
		return bytes.Clone(v), nil
	}
	return o.tx.Get(key)
}

func (o *overlay) put(key, value []byte) {
	if o.writes == nil {
		o.writes = make(map[string][]byte)
	}
	k := string(key)
	if _, ok := o.writes[k]; !ok {
		o.order = append(o.order, k)
	}
	o.writes[k] = value
}

func (o *overlay) Set(key, value []byte) error {
	if len(key) == 0 {
		return Errorf(KindInvalid, "empty key")
	}
	if value == nil {
		value = []byte{}
	}
	o.put(key, value)
	return nil
}

func (o *overlay) Delete(key []byte) error {
	o.put(key, nil)
	return nil
}

func (o *overlay) Scan(opts ScanOptions, fn func(key, value []byte) (bool, error)) error {
	return o.tx.Scan(opts, fn)
}

func (o *overlay) flush() error {
	for _, k := range o.order {
		v := o.writes[k]
		var err error
		if v == nil {
			err = o.tx.Delete([]byte(k))
		} else {
			err = o.tx.Set([]byte(k), v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
