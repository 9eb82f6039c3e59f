package kms

import (
	"bytes"
	"fmt"
	"maps"
	"testing"

	"github.com/ringkms/kms/internal/journal"
)

// TestTermIndexReuse feeds runs of records to one termIndex, reset between
// runs as the journal does, and checks that each run writes exactly what a
// fresh index writes for it: the terms and slices that reset keeps from
// earlier runs leave nothing behind.
func TestTermIndexReuse(t *testing.T) {
	written := func(x *termIndex) map[string][]byte {
		t.Helper()
		out := map[string][]byte{}
		c := setTxn{set: func(k, v []byte) { out[string(k)] = bytes.Clone(v) }}
		if err := x.Write(&c); err != nil {
			t.Fatal(err)
		}
		return out
	}
	rec := func(seq uint64, key, ring string, valid bool) *Activity {
		return &Activity{Seq: seq, KeyID: key, AccountID: "acct", Action: "encrypt", Ring: ring, Valid: valid,
			CreatedAt: int64(seq / 3), Props: map[string]any{"ringId": ring + "-id", "n": int(seq)}}
	}
	// Each run is the key, ring and validity of its records, in order.
	runs := []struct {
		name string
		recs [][3]string
	}{
		{"first", [][3]string{{"k1", "r1", "y"}, {"k1", "r1", "y"}, {"k2", "r1", "n"}}},
		{"others", [][3]string{{"k3", "r2", "y"}}},
		{"back", [][3]string{{"k1", "r1", "y"}, {"k3", "r2", "n"}}},
		{"same", [][3]string{{"k1", "r1", "y"}, {"k3", "r2", "n"}}},
		{"empty", nil},
		{"after empty", [][3]string{{"k1", "r1", "y"}}},
	}
	x := newTermIndex()
	seq, prevMs := uint64(0), int64(0)
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			fresh := newTermIndex()
			for _, r := range run.recs {
				seq++
				a := rec(seq, r[0], r[1], r[2] == "y")
				x.Add(a, journal.Link{Seq: a.Seq, Time: a.CreatedAt}, prevMs, seq == 1)
				fresh.Add(a, journal.Link{Seq: a.Seq, Time: a.CreatedAt}, prevMs, seq == 1)
				prevMs = a.CreatedAt
			}
			if got, want := written(x), written(fresh); !maps.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("reused index wrote %q, want %q", got, want)
			}
			x.Reset()
		})
	}
}

// TestTermIndexResetBounds checks that reset keeps no term past
// maxKeptTerms, nor a slice longer than a batch needs.
func TestTermIndexResetBounds(t *testing.T) {
	tests := []struct {
		name      string
		terms     int // distinct terms, one entry each
		repeats   int // entries of one more term
		wantKept  int
		wantTerms int // before reset
	}{
		{"few", 10, 1, 11, 11},
		{"at bound", maxKeptTerms - 1, 1, maxKeptTerms, maxKeptTerms},
		{"past bound", maxKeptTerms, 1, 0, maxKeptTerms + 1},
		{"long slice", 10, journal.MaxBatch + 1, 10, 11},
		{"batch-long slice", 10, journal.MaxBatch, 11, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newTermIndex()
			for i := range tt.terms {
				x.last = uint64(i + 1)
				x.field(pfxActByKey, fmt.Sprint("key", i))
			}
			for i := range tt.repeats {
				x.last = uint64(tt.terms + i + 1)
				x.term(pfxActDenied)
			}
			if len(x.terms) != tt.wantTerms {
				t.Fatalf("%d terms before reset, want %d", len(x.terms), tt.wantTerms)
			}
			x.Reset()
			if len(x.terms) != tt.wantKept {
				t.Errorf("reset kept %d terms, want %d", len(x.terms), tt.wantKept)
			}
			for term, seqs := range x.terms {
				if len(*seqs) != 0 {
					t.Errorf("term %q kept %d seqs, want 0", term, len(*seqs))
				}
			}
		})
	}
}

// setTxn is a Txn that only gathers writes.
type setTxn struct {
	Txn
	set func(k, v []byte)
}

func (c *setTxn) Set(k, v []byte) error { c.set(k, v); return nil }
