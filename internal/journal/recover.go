package journal

import (
	"context"
	"errors"
	"fmt"

	"github.com/ringkms/kms/internal/base"
)

// recover brings the trail and its index up to date after a crash: it
// appends the pending records that the trail lacks, and indexes the
// records the index does not name yet, checking that they chain on from
// the last indexed record.
func (j *Journal[R]) recover(ctx context.Context) error {
	var pending []byte
	err := j.store.View(ctx, func(tx base.Txn) error {
		var err error
		if j.indexed, err = LoadHead(tx, j.cfg.HeadKey); err != nil {
			return err
		}
		pending, err = tx.Get(j.cfg.PendingKey)
		if errors.Is(err, base.ErrNotFound) {
			err = nil
		}
		return err
	})
	if err != nil {
		return base.InternalError("load activity chain head", err)
	}
	// Checked before anything is appended, so that a trail found damaged
	// is left as it was for its owner to examine.
	if err := j.trail.Check(j.indexed.Seq); err != nil {
		return TrailDamaged(err, j.trail.Len(), j.indexed.Seq)
	}
	if len(pending) > 0 {
		first, recs, err := decodePending(pending)
		if err != nil {
			return base.InternalError("read pending activity", err)
		}
		n := j.trail.Len()
		if last := first + uint64(len(recs)) - 1; last > n {
			if first > n+1 {
				return base.Errorf(base.KindUnprocessable, "activity trail ends at record %d, before the pending records %d-%d: records were removed or damaged", n, first, last)
			}
			if err := j.trail.Append(recs[n+1-first:]); err != nil {
				return base.InternalError("append pending activity", err)
			}
		}
	}
	j.head = j.indexed
	if j.indexed.Seq > 0 {
		// The last indexed record must be the one the index names.
		err := j.trail.Scan(j.indexed.Seq, func(seq uint64, rec []byte) (bool, error) {
			_, at, err := j.cfg.Codec.Decode(rec)
			if err == nil && at.Digest == j.indexed.Digest {
				sum := Digest(j.cfg.ChainKey, at.Prev, rec[32:])
				if digestHex(sum) == at.Digest {
					return false, nil
				}
			}
			return false, base.Errorf(base.KindUnprocessable, "activity record %d is not the one the index names: the trail was altered", seq)
		})
		if err != nil {
			return err
		}
	}
	err = j.trail.Scan(j.indexed.Seq+1, func(seq uint64, rec []byte) (bool, error) {
		r, at, err := j.cfg.Codec.Decode(rec)
		if err != nil {
			return false, base.InternalError("read activity record", err)
		}
		sum := Digest(j.cfg.ChainKey, j.head.Digest, rec[32:])
		if at.Seq != seq || at.Prev != j.head.Digest || digestHex(sum) != at.Digest {
			return false, base.Errorf(base.KindUnprocessable, "activity record %d does not chain on from record %d: the trail was altered", seq, j.head.Seq)
		}
		j.index.Add(r, at, j.head.Time, j.head.Seq == 0)
		j.head = Head{Seq: seq, Digest: at.Digest, Time: at.Time}
		if j.index.Last()-j.indexed.Seq >= 8192 {
			return true, j.writeIndex(ctx)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	return j.writeIndex(ctx)
}

// TrailDamaged is the error of a trail whose Check failed: of kind
// Unprocessable, naming what the trail said, how many records precede the
// damage, and how far the store's index reaches.
func TrailDamaged(err error, whole, indexed uint64) error {
	if base.ErrorKind(err) != base.KindUnprocessable {
		return base.InternalError("check activity trail", err)
	}
	return &base.Error{Kind: base.KindUnprocessable, Err: err, Message: fmt.Sprintf(
		"activity trail is damaged: %s (%d records before it are readable; the store's index names %d)", base.ErrorMessage(err), whole, indexed)}
}
