package journal

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/ringkms/kms/internal/base"
)

// commitBatch commits batch: its mutations in one store transaction when
// snap is set (the store as it was before, for an undo), then its records
// to the trail. It answers every job, or leaves them in doubt.
func (j *Journal[R]) commitBatch(ctx context.Context, batch []*Job[R], snap base.Txn) {
	head := j.head
	wrote := false // whether the store transaction wrote anything
	var err error
	if snap != nil {
		err = j.store.Update(ctx, func(tx base.Txn) error {
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
				if err := j.appendRecord(&head, jb, cmp.Or(jb.err, jb.Fail)); err != nil {
					return err
				}
			}
			if !wrote || len(j.recs) == 0 {
				return nil
			}
			j.written = append(j.written, string(j.cfg.PendingKey))
			return tx.Set(j.cfg.PendingKey, encodePending(j.head.Seq+1, j.recs))
		})
	} else {
		j.recs = j.recs[:0]
		for _, jb := range batch {
			jb.err = nil
			if err = j.appendRecord(&head, jb, jb.Fail); err != nil {
				break
			}
		}
	}
	if err != nil && base.ErrorKind(err) == base.KindTooLarge && len(batch) > 1 {
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
			// The store has the batch's writes (and its records under
			// the pending key), the trail not its records: undo the
			// writes before the error is answered.
			priors, uerr := priorsOf(snap, j.written)
			if uerr == nil {
				uerr = j.undo(ctx, priors)
			}
			if uerr != nil {
				j.cfg.Log(uerr, "undoing the writes of a batch the trail refused failed; the batch is in doubt")
				j.doubt = &doubt[R]{batch: slices.Clone(batch), recs: cloneAll(j.recs), priors: priors, head: head, err: err}
				j.unhealthy.Store(&base.Error{Kind: base.KindUnavailable, Err: err,
					Message: "service unavailable: the activity trail refused a batch of writes that could not be undone yet"})
				return
			}
		}
	}
	if err != nil {
		j.cfg.Log(err, "journal commit failed")
		j.answer(batch, commitError(err))
		return
	}
	j.finish(batch, head)
}

// runMutation runs jb's mutation, if any, on an overlay of tx, setting
// jb.err to its outcome, and when it succeeds writes its writes to tx and
// returns their keys. The error is tx's, when it refused the writes.
func runMutation[R comparable](tx base.Txn, jb *Job[R]) (written []string, err error) {
	if jb.Mutate == nil {
		return nil, nil
	}
	o := newOverlay(tx)
	if jb.err = jb.Mutate(o); jb.err != nil || len(o.order) == 0 {
		return nil, nil
	}
	return o.order, o.flush()
}

// commitError is what the jobs of a batch that failed to commit are
// answered: a full disk or an unreachable store as such (the caller may
// retry elsewhere or later), anything else (even a Conflict after the
// store's retries) as an internal failure.
func commitError(err error) error {
	if k := base.ErrorKind(err); k == base.KindNoSpace || k == base.KindUnavailable {
		return err
	}
	return &base.Error{Kind: base.KindInternal, Message: "commit", Err: err}
}

// finish indexes the records of batch, whose records are durable and whose
// chain ends at head, and answers its jobs.
func (j *Journal[R]) finish(batch []*Job[R], head Head) {
	j.indexRecords(batch)
	j.head = head
	if err := j.writeIndex(context.Background()); err != nil {
		j.cfg.Log(err, "activity index write failed; it is retried with the next batch")
		if j.index.Last()-j.indexed.Seq > maxUnindexed {
			j.failed = err
			j.unhealthy.Store(&base.Error{Kind: base.KindUnavailable, Err: err,
				Message: "service unavailable: the activity index cannot be written"})
		}
	}
	j.succeed(batch)
}

// succeed answers the jobs of a batch that committed: each its own
// outcome, after running the After hook of those whose mutation succeeded.
func (j *Journal[R]) succeed(batch []*Job[R]) {
	j.observeRecords(batch)
	for _, jb := range batch {
		if jb.err == nil && jb.After != nil {
			jb.After()
		}
		jb.done.Done()
	}
}

// signHeaders signs, on a goroutine of its own, the headers of the jobs of
// batch whose mutation succeeded, and returns a channel that is closed when
// it is done. j.signs is the goroutine's until then. A header the signer
// failed to sign is left without its tail (headersign.Req.Proof nil) for
// its job's caller to answer; the job's record stands: the operation was
// done, and its answer lost, as one is when a connection drops after the
// commit. The error goes to the log.
func (j *Journal[R]) signHeaders(batch []*Job[R]) <-chan struct{} {
	done := make(chan struct{})
	j.signs = j.signs[:0]
	for _, jb := range batch {
		if jb.err == nil && jb.Header != nil && jb.Header.Body != nil {
			j.signs = append(j.signs, jb.Header)
		}
	}
	if len(j.signs) == 0 {
		close(done)
		return done
	}
	g := j.cfg.Signer.Load()
	go func() {
		defer close(done)
		if err := g.Sign(j.signs); err != nil {
			j.cfg.Log(err, "signing the headers of a batch failed; its encrypt calls answer an error")
		}
	}()
	return done
}

// answer fails batch, the batch being committed, with err.
func (j *Journal[R]) answer(batch []*Job[R], err error) {
	j.batchErr = err
	reply(batch, err)
}

// reply gives every job of batch its outcome, err.
func reply[R comparable](batch []*Job[R], err error) {
	for _, jb := range batch {
		jb.err = err
		jb.done.Done()
	}
}

// observe reports a batch to the Observer, if any.
func (j *Journal[R]) observe(calls int, start time.Time, err error) {
	if j.cfg.Observer != nil {
		j.cfg.Observer.ObserveBatch(calls, time.Since(start), j.appendTime, err)
	}
}

// observeRecords reports the records of batch, which committed, to the
// Observer, if any.
func (j *Journal[R]) observeRecords(batch []*Job[R]) {
	if j.cfg.Observer == nil {
		return
	}
	var none R
	j.acts = j.acts[:0]
	for _, jb := range batch {
		if jb.Rec != none {
			j.acts = append(j.acts, jb.Rec)
		}
	}
	if len(j.acts) > 0 {
		j.cfg.Observer.ObserveRecords(j.acts)
	}
	clear(j.acts)
}
