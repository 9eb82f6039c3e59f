package kms

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/ringkms/kms/internal/journal"
)

// The indexes of the activity trail are sets of terms: one per API key
// (act/k/), action (act/x/), Account (act/a/), ring (act/r/), denied
// records (act/v/0/) and indexed prop value (act/p/). A term's entries are
// postings blocks, written once and never changed:
//
//	term firstSeq (uint64, big-endian) -> uvarint deltas
//
// The value lists the seqs of the term's records from firstSeq on: each
// uvarint is the distance from the seq before it (firstSeq for the first,
// which is therefore 0). The journal writes one block per term per batch
// of records, so an index costs a few keys per batch rather than one per
// record, and a search reads a term's records in chain order by walking
// its blocks.
//
// The time index (act/t/) keeps one key per millisecond (see
// pfxActByTime).

// termIndex gathers the index entries of a run of records, in chain order,
// and writes them as postings blocks.
type termIndex struct {
	// terms holds the seqs of each term's records in the run; a term with
	// none is kept from an earlier run (see reset).
	terms map[string]*[]uint64
	times []uint64 // pairs: ms, seq
	buf   []byte   // scratch for building terms
	last  uint64   // seq of the last record added
	// uses are the run's usage counts of the keys its records name
	// (keyusage.go), keyed by key ID.
	uses map[string]*keyUsage
}

// maxKeptTerms bounds the terms that reset keeps.
const maxKeptTerms = 4096

func newTermIndex() *termIndex { return &termIndex{terms: map[string]*[]uint64{}} }

var _ journal.Indexer[*Activity] = (*termIndex)(nil)

// Last returns the seq of the last record added since Reset, or 0.
func (x *termIndex) Last() uint64 { return x.last }

// Reset empties the index for the next run. The journal's runs are its
// batches, and consecutive batches name mostly the same terms (the same
// API keys, actions, rings), so reset keeps each term of the run and its
// slice for the next run to append to without allocating. It drops a term
// that the run did not name, and one whose slice grew past what a batch
// needs; past maxKeptTerms it keeps none.
func (x *termIndex) Reset() {
	if len(x.terms) > maxKeptTerms {
		clear(x.terms)
	}
	for t, seqs := range x.terms {
		if len(*seqs) == 0 || cap(*seqs) > journal.MaxBatch {
			delete(x.terms, t)
		} else {
			*seqs = (*seqs)[:0]
		}
	}
	x.times = x.times[:0]
	x.last = 0
	clear(x.uses)
}

// Add indexes record a, at in the chain, whose predecessor was created at
// prevMs (or which is the first record, first).
func (x *termIndex) Add(a *Activity, at journal.Link, prevMs int64, first bool) {
	x.last = at.Seq
	x.field(pfxActByKey, a.KeyID)
	x.field(pfxActByAction, a.Action)
	if a.AccountID != "" {
		x.field(pfxActByAccount, a.AccountID)
	}
	if a.Ring != "" {
		x.field(pfxActByRing, a.Ring)
	}
	if !a.Valid {
		x.term(pfxActDenied)
	}
	for name, v := range a.Props {
		x.prop(name, v)
	}
	x.countUse(a)
	if first || a.CreatedAt != prevMs {
		// Only the first record of each millisecond enters the time
		// index: createdAt never decreases along the chain, so that is
		// enough to find where a time range begins and ends.
		x.times = append(x.times, timeIndexMillis(a.CreatedAt), a.Seq)
	}
}

func (x *termIndex) term(t []byte) {
	seqs := x.terms[string(t)] // a lookup: string(t) is not allocated
	if seqs == nil {
		seqs = new([]uint64)
		x.terms[string(t)] = seqs
	}
	*seqs = append(*seqs, x.last)
}

// field adds the entry of term prefix value 0.
func (x *termIndex) field(prefix []byte, value string) {
	x.buf = append(append(append(x.buf[:0], prefix...), value...), 0)
	x.term(x.buf)
}

// prop adds the entry of term act/p/ name 0 value 0, when the prop is
// indexed.
func (x *termIndex) prop(name string, v any) {
	if name == "action" || name == "ring" {
		return // the common case, before any work
	}
	x.buf = append(append(append(x.buf[:0], pfxActByProp...), name...), 0)
	n := len(x.buf)
	var ok bool
	if x.buf, ok = appendScalarJSON(x.buf, v); !ok || !propIndexed(name, x.buf[n:]) {
		return
	}
	x.term(append(x.buf, 0))
}

// Write stores the gathered entries in tx: a postings block per term and
// the time index keys. The usage counts are written apart (WriteCounts):
// they are read as they are written.
func (x *termIndex) Write(tx Txn) error {
	for t, p := range x.terms {
		seqs := *p
		if len(seqs) == 0 {
			continue // kept from an earlier run
		}
		v := make([]byte, 0, len(seqs)+4)
		prev := seqs[0]
		for _, s := range seqs {
			v = binary.AppendUvarint(v, s-prev)
			prev = s
		}
		if err := tx.Set(join([]byte(t), seqKey(seqs[0])), v); err != nil {
			return err
		}
	}
	for i := 0; i < len(x.times); i += 2 {
		k := binary.BigEndian.AppendUint64(slices.Clip(pfxActByTime), x.times[i])
		if err := tx.Set(binary.BigEndian.AppendUint64(k, x.times[i+1]), nil); err != nil {
			return err
		}
	}
	return nil
}

// walkPostings calls fn with the seqs of term's records in [from, until),
// in order, until fn returns false or an error.
func walkPostings(tx Txn, term []byte, from, until uint64, fn func(seq uint64) (bool, error)) error {
	// The block that holds from is the last one that starts at or before
	// it; without one, the term's first block.
	start := term
	err := tx.Scan(ScanOptions{Prefix: term, Start: join(term, seqKey(from)), Reverse: true, KeysOnly: true},
		func(k, _ []byte) (bool, error) {
			if len(k) != len(term)+8 {
				return true, nil
			}
			start = bytes.Clone(k)
			return false, nil
		})
	if err != nil {
		return err
	}
	return tx.Scan(ScanOptions{Prefix: term, Start: start}, func(k, v []byte) (bool, error) {
		if len(k) != len(term)+8 {
			return true, nil // another term that begins with this one
		}
		seq := binary.BigEndian.Uint64(k[len(term):])
		if seq >= until {
			return false, nil
		}
		for len(v) > 0 {
			d, n := binary.Uvarint(v)
			if n <= 0 {
				return false, Errorf(KindInternal, "activity index block %q is corrupt", k)
			}
			v, seq = v[n:], seq+d
			if seq >= until {
				return false, nil
			}
			if seq >= from {
				if more, err := fn(seq); err != nil || !more {
					return false, err
				}
			}
		}
		return true, nil
	})
}

// loadHead returns the last indexed record, the zero Head when none is.
func loadHead(tx Txn) (journal.Head, error) { return journal.LoadHead(tx, keyActHead) }
