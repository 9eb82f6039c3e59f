package kms

import (
	"bytes"
	"slices"

	"github.com/ringkms/kms/internal/journal"
	"github.com/ringkms/kms/internal/postings"
)

// The indexes of the activity trail are sets of terms (internal/postings):
// one per API key (act/k/), action (act/x/), Account (act/a/), ring
// (act/r/), denied records (act/v/0/), indexed prop value (act/p/) and key
// handed out by an encrypt (act/h/, keyusage.go); and the time index
// (act/t/, see pfxActByTime). Beside them, the usage counts of keys
// (keyusage.go).

// activityIndex is what the records of the trail add to its indexes: the
// journal's Indexer of the activity trail.
type activityIndex struct {
	run *postings.Run
	buf []byte // scratch for building prop terms
	// uses are the run's usage counts of the keys its records name
	// (keyusage.go), keyed by key ID.
	uses map[string]*keyUsage
}

var _ journal.Indexer[*Activity] = (*activityIndex)(nil)

func newActivityIndex() *activityIndex {
	return &activityIndex{run: postings.NewRun(pfxActByTime, journal.MaxBatch)}
}

// Last returns the seq of the last record added since Reset, or 0.
func (x *activityIndex) Last() uint64 { return x.run.Last() }

// Reset empties the index for the next run.
func (x *activityIndex) Reset() {
	x.run.Reset()
	clear(x.uses)
}

// Add indexes record a, at in the chain, whose predecessor was created at
// prevMs (or which is the first record, first).
func (x *activityIndex) Add(a *Activity, at journal.Link, prevMs int64, first bool) {
	x.run.Next(at.Seq)
	x.run.Field(pfxActByKey, a.KeyID)
	x.run.Field(pfxActByAction, a.Action)
	if a.AccountID != "" {
		x.run.Field(pfxActByAccount, a.AccountID)
	}
	if a.Ring != "" {
		x.run.Field(pfxActByRing, a.Ring)
	}
	if !a.Valid {
		x.run.Term(pfxActDenied)
	}
	for name, v := range a.Props {
		x.prop(name, v)
	}
	x.countUse(a)
	if first || a.CreatedAt != prevMs {
		// Only the first record of each millisecond enters the time
		// index: createdAt never decreases along the chain.
		x.run.Time(timeIndexMillis(a.CreatedAt))
	}
}

// prop adds the entry of term act/p/ name 0 value 0, when the prop is
// indexed.
func (x *activityIndex) prop(name string, v any) {
	if name == "action" || name == "ring" {
		return // the common case, before any work
	}
	x.buf = append(append(append(x.buf[:0], pfxActByProp...), name...), 0)
	n := len(x.buf)
	var ok bool
	if x.buf, ok = appendScalarJSON(x.buf, v); !ok || !propIndexed(name, x.buf[n:]) {
		return
	}
	x.buf = append(x.buf, 0)
	x.run.Term(x.buf)
}

// Write stores the gathered entries in tx. The usage counts are written
// apart (WriteCounts): they are read as they are written.
func (x *activityIndex) Write(tx Txn) error { return x.run.Write(tx) }

// Reads appends to keys the usage keys that record a may count, unless
// keys has them: the keys a shared batch's commit reads, so that it can
// read them ahead.
func (x *activityIndex) Reads(keys [][]byte, a *Activity) [][]byte {
	if !mayUseKey(a) {
		return keys
	}
	for _, prop := range [...]string{"keyId", "fromKeyId"} {
		if id, _ := a.Props[prop].(string); id != "" {
			k := join(pfxKeyUsage, []byte(id))
			if !slices.ContainsFunc(keys, func(b []byte) bool { return bytes.Equal(b, k) }) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// countUse adds record a to the usage counts of the run, when it counts.
func (x *activityIndex) countUse(a *Activity) {
	uses, n := keyUses(a)
	for _, use := range uses[:n] {
		if use.hash {
			x.run.Field(pfxActByKeyHash, use.keyID)
		}
		if x.uses == nil {
			x.uses = map[string]*keyUsage{}
		}
		u := x.uses[use.keyID]
		if u == nil {
			u = &keyUsage{first: a.CreatedAt}
			x.uses[use.keyID] = u
		}
		if use.encrypt {
			u.enc++
		} else {
			u.dec++
		}
		u.last, u.seq = a.CreatedAt, a.Seq
	}
}

// WriteCounts adds the run's usage counts to those stored in tx. It reads
// as it writes, so the journal runs it in the transaction that stores the
// indexed head: the counts then cover exactly the records up to that
// head.
func (x *activityIndex) WriteCounts(tx Txn) error {
	for keyID, run := range x.uses {
		u, err := loadUsage(tx, keyID)
		if err != nil {
			return err
		}
		u.add(run)
		if err := tx.Set(join(pfxKeyUsage, []byte(keyID)), u.encode()); err != nil {
			return err
		}
	}
	return nil
}
