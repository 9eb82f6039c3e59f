// Package postings keeps the term indexes of an append-only log of
// numbered records (the activity trail): a term's entries are postings
// blocks, written once and never changed:
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
// A time index keeps one key per millisecond in which records begin:
// prefix, the time (uint64, big-endian), the first seq of that millisecond
// (uint64, big-endian).
package postings

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/ringkms/kms/internal/base"
)

// Run gathers the index entries of a run of records, in order, and writes
// them as postings blocks and time index keys.
type Run struct {
	// terms holds the seqs of each term's records in the run; a term with
	// none is kept from an earlier run (see Reset).
	terms      map[string]*[]uint64
	times      []uint64 // pairs: ms, seq
	timePrefix []byte
	keepBelow  int    // Reset keeps no slice longer than this
	buf        []byte // scratch for building terms
	last       uint64 // seq of the record being added
}

// MaxKeptTerms bounds the terms that Reset keeps.
const MaxKeptTerms = 4096

// NewRun returns an empty Run whose time index keys start with
// timePrefix, for runs of about batch records.
func NewRun(timePrefix []byte, batch int) *Run {
	return &Run{terms: map[string]*[]uint64{}, timePrefix: timePrefix, keepBelow: batch}
}

// Next starts the entries of record seq: the terms that follow are its.
func (x *Run) Next(seq uint64) { x.last = seq }

// Last returns the seq of the last record of the run, or 0 when it has
// none.
func (x *Run) Last() uint64 { return x.last }

// Len returns the number of terms the Run holds, those kept from earlier
// runs included.
func (x *Run) Len() int { return len(x.terms) }

// Reset empties the Run for the next one. The journal's runs are its
// batches, and consecutive batches name mostly the same terms (the same
// API keys, actions, rings), so reset keeps each term of the run and its
// slice for the next run to append to without allocating. It drops a term
// that the run did not name, and one whose slice grew past what a batch
// needs; past MaxKeptTerms it keeps none.
func (x *Run) Reset() {
	if len(x.terms) > MaxKeptTerms {
		clear(x.terms)
	}
	for t, seqs := range x.terms {
		if len(*seqs) == 0 || cap(*seqs) > x.keepBelow {
			delete(x.terms, t)
		} else {
			*seqs = (*seqs)[:0]
		}
	}
	x.times = x.times[:0]
	x.last = 0
}

// Term adds the entry of term t for the current record.
func (x *Run) Term(t []byte) {
	seqs := x.terms[string(t)] // a lookup: string(t) is not allocated
	if seqs == nil {
		seqs = new([]uint64)
		x.terms[string(t)] = seqs
	}
	*seqs = append(*seqs, x.last)
}

// Field adds the entry of the term prefix value 0 for the current record.
func (x *Run) Field(prefix []byte, value string) {
	x.buf = append(append(append(x.buf[:0], prefix...), value...), 0)
	x.Term(x.buf)
}

// Time adds the current record, created at ms, to the time index: call it
// for the first record of each millisecond (times never decrease along the
// log, so that is enough to find where a time range begins and ends).
func (x *Run) Time(ms uint64) { x.times = append(x.times, ms, x.last) }

// Write stores the gathered entries in tx: a postings block per term and
// the time index keys.
func (x *Run) Write(tx base.Txn) error {
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
		if err := tx.Set(binary.BigEndian.AppendUint64([]byte(t), seqs[0]), v); err != nil {
			return err
		}
	}
	for i := 0; i < len(x.times); i += 2 {
		k := binary.BigEndian.AppendUint64(slices.Clip(x.timePrefix), x.times[i])
		if err := tx.Set(binary.BigEndian.AppendUint64(k, x.times[i+1]), nil); err != nil {
			return err
		}
	}
	return nil
}

// Walk calls fn with the seqs of term's records in [from, until),
// in order, until fn returns false or an error.
func Walk(tx base.Txn, term []byte, from, until uint64, fn func(seq uint64) (bool, error)) error {
	// The block that holds from is the last one that starts at or before
	// it; without one, the term's first block.
	start := term
	err := tx.Scan(base.ScanOptions{Prefix: term, Start: binary.BigEndian.AppendUint64(slices.Clip(term), from), Reverse: true, KeysOnly: true},
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
	return tx.Scan(base.ScanOptions{Prefix: term, Start: start}, func(k, v []byte) (bool, error) {
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
				return false, base.Errorf(base.KindInternal, "activity index block %q is corrupt", k)
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
