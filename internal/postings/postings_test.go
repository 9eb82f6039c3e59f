package postings

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/base/basetest"
)

type memTxn = basetest.MemTxn

// TestWalk writes runs of records and walks every term over ranges that
// start and end inside, between and around blocks: each walk sees exactly
// the seqs of the term in the range, in order.
func TestWalk(t *testing.T) {
	tx := memTxn{}
	x := NewRun([]byte("t/"), 256)
	want := map[string][]uint64{}
	seq := uint64(0)
	for run := range 5 {
		for range 7 {
			seq++
			x.Next(seq)
			for _, term := range []string{"all", fmt.Sprint("mod", seq%3), fmt.Sprint("run", run)} {
				x.Field([]byte("p/"), term)
				want[term] = append(want[term], seq)
			}
		}
		if err := x.Write(tx); err != nil {
			t.Fatal(err)
		}
		x.Reset()
	}
	for term, seqs := range want {
		for from := uint64(0); from <= seq+1; from += 3 {
			for until := from; until <= seq+2; until += 4 {
				var got []uint64
				err := Walk(tx, append([]byte("p/"+term), 0), from, until, func(s uint64) (bool, error) {
					got = append(got, s)
					return true, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				var exp []uint64
				for _, s := range seqs {
					if s >= from && s < until {
						exp = append(exp, s)
					}
				}
				if !slices.Equal(got, exp) {
					t.Fatalf("Walk(%s, %d, %d) = %v, want %v", term, from, until, got, exp)
				}
			}
		}
	}
	stop := errors.New("stop")
	if err := Walk(tx, []byte("p/all\x00"), 1, 100, func(uint64) (bool, error) { return false, stop }); err != stop {
		t.Errorf("Walk returned %v, want fn's error", err)
	}
	tx["p/all\x00\x00\x00\x00\x00\x00\x00\x00\x01"] = []byte{0x80} // a truncated uvarint
	if err := Walk(tx, []byte("p/all\x00"), 1, 100, func(uint64) (bool, error) { return true, nil }); !errors.Is(err, base.ErrInternal) {
		t.Errorf("Walk over a corrupt block = %v, want an internal error", err)
	}
}

// TestRunReuse feeds runs of records to one Run, reset between runs as
// the journal does, and checks that each run writes exactly what a fresh
// Run writes for it: the terms and slices that Reset keeps from earlier
// runs leave nothing behind.
func TestRunReuse(t *testing.T) {
	written := func(x *Run) map[string][]byte {
		t.Helper()
		out := memTxn{}
		if err := x.Write(out); err != nil {
			t.Fatal(err)
		}
		return out
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
	x := NewRun([]byte("t/"), 256)
	seq := uint64(0)
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			fresh := NewRun([]byte("t/"), 256)
			for _, r := range run.recs {
				seq++
				for _, y := range []*Run{x, fresh} {
					y.Next(seq)
					y.Field([]byte("k/"), r[0])
					y.Field([]byte("r/"), r[1])
					if r[2] == "n" {
						y.Term([]byte("v/0/"))
					}
					if seq%3 == 0 {
						y.Time(seq / 3)
					}
				}
			}
			if got, want := written(x), written(fresh); !maps.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("reused Run wrote %q, want %q", got, want)
			}
			x.Reset()
			if x.Last() != 0 {
				t.Errorf("Last() after Reset = %d, want 0", x.Last())
			}
		})
	}
}

// TestResetBounds checks that Reset keeps no term past MaxKeptTerms, nor
// a slice longer than a batch needs.
func TestResetBounds(t *testing.T) {
	const batch = 256
	tests := []struct {
		name      string
		terms     int // distinct terms, one entry each
		repeats   int // entries of one more term
		wantKept  int
		wantTerms int // before reset
	}{
		{"few", 10, 1, 11, 11},
		{"at bound", MaxKeptTerms - 1, 1, MaxKeptTerms, MaxKeptTerms},
		{"past bound", MaxKeptTerms, 1, 0, MaxKeptTerms + 1},
		{"long slice", 10, batch + 1, 10, 11},
		{"batch-long slice", 10, batch, 11, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := NewRun([]byte("t/"), batch)
			for i := range tt.terms {
				x.Next(uint64(i + 1))
				x.Field([]byte("k/"), fmt.Sprint("key", i))
			}
			for i := range tt.repeats {
				x.Next(uint64(tt.terms + i + 1))
				x.Term([]byte("v/0/"))
			}
			if x.Len() != tt.wantTerms {
				t.Fatalf("%d terms before Reset, want %d", x.Len(), tt.wantTerms)
			}
			x.Reset()
			if x.Len() != tt.wantKept {
				t.Errorf("Reset kept %d terms, want %d", x.Len(), tt.wantKept)
			}
			for term, seqs := range x.terms {
				if len(*seqs) != 0 {
					t.Errorf("term %q kept %d seqs, want 0", term, len(*seqs))
				}
			}
		})
	}
}
