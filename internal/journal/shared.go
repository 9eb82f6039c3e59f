package journal

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/ringkms/kms/internal/base"
)

// commitShared commits batch on a SharedTrail: its mutations, its records
// and their index entries, and the chain's new head, in one transaction
// that reads the head the last batch of any process left. So the chain
// has no gap or fork however many processes append, a batch that fails
// leaves nothing behind (no undo, no pending records), and the index
// always names every record.
func (j *Journal[R]) commitShared(ctx context.Context, batch []*Job[R]) {
	var (
		head    Head
		signed  <-chan struct{}
		verdict = map[string]error{} // checked key -> nil, or why the job fails
		reads   [][]byte             // the keys prefetched
	)
	err := j.shared.AppendIn(ctx, func(tx base.Txn) (uint64, [][]byte, error) {
		if signed != nil {
			<-signed // an earlier attempt's signatures: j.signs is free again
			signed = nil
		}
		// The head and the checks in one read: over a network, a round
		// trip per batch instead of one per key. (A store takes its
		// append lock at the first read.)
		reads = j.readKeys(append(reads[:0], j.cfg.HeadKey), batch)
		if err := base.Prefetch(tx, reads); err != nil {
			return 0, nil, err
		}
		// The jobs that came while this process waited for the append
		// lock join the batch: with several processes taking turns, a
		// turn then carries what queued during the wait, instead of
		// leaving it for the next turn.
		if n := len(batch); j.drain(&batch) {
			more := j.readKeys(nil, batch[n:])
			more = slices.DeleteFunc(more, func(k []byte) bool { return slices.ContainsFunc(reads, bytesEqual(k)) })
			if err := base.Prefetch(tx, more); err != nil {
				return 0, nil, err
			}
			reads = append(reads, more...)
		}
		last, err := LoadHead(tx, j.cfg.HeadKey)
		if err != nil {
			return 0, nil, err
		}
		head, j.recs = last, j.recs[:0]
		j.index.Reset()
		clear(verdict)
		var none R
		for _, jb := range batch {
			jb.err = nil
			for _, c := range jb.Checks {
				if jb.err, err = check(tx, c, verdict); err != nil {
					return 0, nil, err
				}
				if jb.err != nil {
					break
				}
			}
			if jb.err == nil {
				if _, err := runMutation(tx, jb); err != nil {
					return 0, nil, err
				}
			}
			prev := head
			if err := j.appendRecord(&head, jb, cmp.Or(jb.err, jb.Fail)); err != nil {
				return 0, nil, err
			}
			if jb.Rec != none {
				j.index.Add(jb.Rec, jb.at, prev.Time, prev.Seq == 0)
			}
		}
		if len(j.recs) > 0 {
			if err := j.index.Write(tx); err != nil {
				return 0, nil, err
			}
			if err := j.index.WriteCounts(tx); err != nil {
				return 0, nil, err
			}
			if err := j.storeHead(tx, head); err != nil {
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
	j.index.Reset()
	if err != nil && base.ErrorKind(err) == base.KindTooLarge && len(batch) > 1 {
		// The batch outgrew one transaction: commit it in halves, in order.
		half := len(batch) / 2
		j.commit(batch[:half])
		j.commit(batch[half:])
		return
	}
	if err != nil {
		j.cfg.Log(err, "journal commit failed")
		j.answer(batch, commitError(err))
		return
	}
	j.head, j.indexed = head, head
	j.succeed(batch)
}

// readKeys appends to keys those that a shared commit of batch reads and
// keys lacks: the keys its jobs check, and those the index reads for
// their records.
func (j *Journal[R]) readKeys(keys [][]byte, batch []*Job[R]) [][]byte {
	var none R
	for _, jb := range batch {
		for _, c := range jb.Checks {
			if !slices.ContainsFunc(keys, bytesEqual(c.Key)) {
				keys = append(keys, c.Key)
			}
		}
	}
	for _, jb := range batch {
		if jb.Rec != none {
			keys = j.index.Reads(keys, jb.Rec)
		}
	}
	return keys
}

func bytesEqual(a []byte) func([]byte) bool {
	return func(b []byte) bool { return bytes.Equal(a, b) }
}

// drain appends to *batch the jobs queued now, up to MaxBatch in all,
// without waiting, and reports whether it took any.
func (j *Journal[R]) drain(batch *[]*Job[R]) bool {
	n := len(*batch)
	for len(*batch) < MaxBatch {
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

// check returns, for one check of a job, the job's error (nil: it holds),
// or the store's error. verdict remembers the answers of a batch by key.
func check(tx base.Txn, c Check, verdict map[string]error) (jobErr, err error) {
	if jobErr, ok := verdict[string(c.Key)]; ok {
		return jobErr, nil
	}
	v, err := tx.Get(c.Key)
	found := true
	switch {
	case errors.Is(err, base.ErrNotFound):
		v, found = nil, false
	case err != nil:
		return nil, err
	}
	if jobErr, err = c.Verdict(v, found); err != nil {
		return nil, err
	}
	verdict[string(c.Key)] = jobErr
	return jobErr, nil
}
