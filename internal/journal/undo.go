package journal

import (
	"bytes"
	"context"
	"errors"

	"github.com/ringkms/kms/internal/base"
)

// doubt is a batch whose writes the store committed but whose records the
// trail refused, and whose writes could not be undone either.
type doubt[R comparable] struct {
	batch  []*Job[R]
	recs   [][]byte // the batch's records, to append
	priors []prior  // the keys the batch wrote, as they were before (nil: unknown)
	head   Head     // the chain's head once the records are appended
	err    error    // the trail's refusal
}

// prior is a key as it was before a batch wrote it: its value, or absent.
type prior struct {
	key, val []byte
	absent   bool
}

// priorsOf reads every key of written as snap, the store before the batch,
// has it.
func priorsOf(snap base.Txn, written []string) ([]prior, error) {
	ps := make([]prior, len(written))
	for i, k := range written {
		ps[i].key = []byte(k)
		v, err := snap.Get(ps[i].key)
		switch {
		case errors.Is(err, base.ErrNotFound):
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
func (j *Journal[R]) undo(ctx context.Context, priors []prior) error {
	err := j.store.Update(ctx, func(tx base.Txn) error {
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
	if err == nil && j.cfg.Undone != nil {
		j.cfg.Undone()
	}
	return err
}

// settle tries to decide the batch in doubt: appending its records (it
// succeeded), or else undoing its writes (it failed, and its jobs are
// answered the trail's error). It reports whether the doubt is gone.
func (j *Journal[R]) settle() bool {
	d := j.doubt
	if d == nil {
		return true
	}
	if err := j.trail.Append(d.recs); err == nil {
		j.doubt = nil
		j.unhealthy.Store(nil)
		j.cfg.Log(nil, "a batch in doubt was settled: the trail took its records")
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
	j.cfg.Log(nil, "a batch in doubt was settled: its writes were undone")
	// Not answer: the batch being committed, if any, is another.
	reply(d.batch, commitError(d.err))
	return true
}

// settleAtClose answers the jobs of a batch still in doubt when the
// journal stops: the store keeps their writes with the pending records,
// and the next start appends their records, so they will have happened;
// but the callers cannot be told so now.
func (j *Journal[R]) settleAtClose() {
	if j.doubt == nil || j.settle() {
		return
	}
	reply(j.doubt.batch, &base.Error{Kind: base.KindUnavailable, Err: j.doubt.err,
		Message: "service stopped with this call's outcome not settled: its writes are kept and complete at the next start"})
	j.doubt = nil
}

// overlay buffers one job's writes on top of the batch transaction, so a
// failed job leaves nothing behind.
type overlay struct {
	tx     base.Txn
	writes map[string][]byte // nil value: deleted
	order  []string
}

func newOverlay(tx base.Txn) *overlay { return &overlay{tx: tx} }

func (o *overlay) Get(key []byte) ([]byte, error) {
	if v, ok := o.writes[string(key)]; ok {
		if v == nil {
			return nil, base.Errorf(base.KindNotFound, "key not found")
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
		return base.Errorf(base.KindInvalid, "empty key")
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

func (o *overlay) Scan(opts base.ScanOptions, fn func(key, value []byte) (bool, error)) error {
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
