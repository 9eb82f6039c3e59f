package journal

import (
	"context"

	"github.com/ringkms/kms/internal/base"
)

// indexRecords adds the index entries of the batch's records, which follow
// j.head.
func (j *Journal[R]) indexRecords(batch []*Job[R]) {
	var none R
	prev := j.head
	for _, jb := range batch {
		if jb.Rec != none {
			j.index.Add(jb.Rec, jb.at, prev.Time, prev.Seq == 0)
			prev = Head{Seq: jb.at.Seq, Time: jb.at.Time}
		}
	}
}

// writeIndex writes the gathered index entries and the new indexed head
// to the store. A store that refuses a transaction as too large gets the
// entries in smaller ones, the head in the last.
func (j *Journal[R]) writeIndex(ctx context.Context) error {
	if j.index.Last() == 0 {
		return nil
	}
	err := j.store.UpdateNoSync(ctx, func(tx base.Txn) error {
		if err := j.index.Write(tx); err != nil {
			return err
		}
		if err := j.index.WriteCounts(tx); err != nil {
			return err
		}
		return j.storeHead(tx, j.head)
	})
	if base.ErrorKind(err) == base.KindTooLarge {
		err = j.writeIndexInParts(ctx)
	}
	if err != nil {
		return err
	}
	j.indexed = j.head
	j.index.Reset()
	return nil
}

func (j *Journal[R]) writeIndexInParts(ctx context.Context) error {
	type kv struct{ k, v []byte }
	var all []kv
	collect := collectTxn{set: func(k, v []byte) { all = append(all, kv{k, v}) }}
	if err := j.index.Write(&collect); err != nil {
		return err
	}
	for n := len(all); len(all) > 0; {
		part := all[:min(n, len(all))]
		err := j.store.UpdateNoSync(ctx, func(tx base.Txn) error {
			for _, e := range part {
				if err := tx.Set(e.k, e.v); err != nil {
					return err
				}
			}
			return nil
		})
		switch {
		case base.ErrorKind(err) == base.KindTooLarge && n > 1:
			n /= 2
			continue
		case err != nil:
			return err
		}
		all = all[len(part):]
	}
	return j.store.UpdateNoSync(ctx, func(tx base.Txn) error {
		if err := j.index.WriteCounts(tx); err != nil {
			return err
		}
		return j.storeHead(tx, j.head)
	})
}

// collectTxn is a Txn that only gathers writes.
type collectTxn struct {
	base.Txn
	set func(k, v []byte)
}

func (c *collectTxn) Set(k, v []byte) error { c.set(k, v); return nil }
