package storetest

import (
	"bytes"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/ringkms/kms"
)

// RunTrail runs the conformance suite of kms.Trail against the trails open
// returns. Each subtest calls open once and gets a fresh, empty trail; open
// registers the trail's cleanup with t.Cleanup:
//
//	func TestTrailConformance(t *testing.T) {
//		storetest.RunTrail(t, func(t testing.TB) kms.Trail {
//			tr, err := mytrail.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { tr.Close() })
//			return tr
//		})
//	}
//
// The suite checks what kms.Trail documents: seqs from 1 without gaps;
// scans from any seq, from past the end, and from 0, which counts as 1;
// stopping early; fn's error returned unchanged; Append of no records;
// Append copying what it is given; a 1 MiB record; thousands of records in
// batches of many sizes; and scans that run while records are appended,
// which see a gapless run of records ending at or after the last one
// appended when they began. It never relies on timing.
func RunTrail(t *testing.T, open func(t testing.TB) kms.Trail) {
	runSuite(t, open, "trail", []subtest[kms.Trail]{
		{"Empty", testTrailEmpty},
		{"AppendScan", testTrailAppendScan},
		{"ScanFromMiddle", testTrailScanFromMiddle},
		{"ScanPastEnd", testTrailScanPastEnd},
		{"ScanFromZero", testTrailScanFromZero},
		{"ScanStopEarly", testTrailScanStopEarly},
		{"ScanFnError", testTrailScanFnError},
		{"AppendNone", testTrailAppendNone},
		{"AppendCopies", testTrailAppendCopies},
		{"LargeRecord", testTrailLargeRecord},
		{"ManyRecords", testTrailManyRecords},
		{"ScanStopsAtLenAtStart", testTrailScanStopsAtLenAtStart},
		{"ScanWhileAppending", testTrailScanWhileAppending},
		{"Len", testTrailLen},
	})
}

// trailRecord returns the content the suite appends as record seq: a few
// to a few hundred bytes, different for every seq, sometimes empty.
func trailRecord(seq uint64) []byte {
	if seq%101 == 0 {
		return []byte{}
	}
	prefix := fmt.Sprintf("record %d:", seq)
	return append([]byte(prefix), bytes.Repeat([]byte{byte(seq)}, int(seq*7%300))...)
}

// appendRecords appends the records from seq from up to to, in one batch.
func appendRecords(t testing.TB, tr kms.Trail, from, to uint64) {
	t.Helper()
	if err := appendTrailBatch(tr, from, to); err != nil {
		t.Fatalf("Append(records %d to %d) = %v, want nil", from, to, err)
	}
}

// scanTrail scans tr from seq from and returns the seqs it saw; it checks
// every record against trailRecord.
func scanTrail(t testing.TB, tr kms.Trail, from uint64) []uint64 {
	t.Helper()
	var seqs []uint64
	err := tr.Scan(from, func(seq uint64, rec []byte) (bool, error) {
		if want := trailRecord(seq); !bytes.Equal(rec, want) {
			return false, fmt.Errorf("record %d = %.40q (%d bytes), want %.40q (%d bytes)", seq, rec, len(rec), want, len(want))
		}
		seqs = append(seqs, seq)
		return true, nil
	})
	if err != nil {
		t.Fatalf("Scan(%d) = %v, want nil", from, err)
	}
	return seqs
}

// wantRun checks that seqs is exactly from, from+1... to; to < from means
// none.
func wantRun(t testing.TB, what string, seqs []uint64, from, to uint64) {
	t.Helper()
	want := int(max(to+1, from) - from)
	ok := len(seqs) == want
	for i := 0; ok && i < len(seqs); i++ {
		ok = seqs[i] == from+uint64(i)
	}
	if !ok {
		t.Errorf("%s saw %d records %s, want %d records from %d to %d", what, len(seqs), fmtSeqs(seqs), want, from, to)
	}
}

// fmtSeqs renders seqs briefly for failure messages.
func fmtSeqs(seqs []uint64) string {
	if len(seqs) > 10 {
		return fmt.Sprintf("%v...%v", seqs[:5], seqs[len(seqs)-5:])
	}
	return fmt.Sprint(seqs)
}

// wantLen checks tr.Len.
func wantLen(t testing.TB, tr kms.Trail, want uint64) {
	t.Helper()
	if got := tr.Len(); got != want {
		t.Errorf("Len() = %d, want %d", got, want)
	}
}

func testTrailEmpty(t *testing.T, tr kms.Trail) {
	wantLen(t, tr, 0)
	for _, from := range []uint64{0, 1, 2} {
		wantRun(t, fmt.Sprintf("Scan(%d) of an empty trail", from), scanTrail(t, tr, from), 1, 0)
	}
}

func testTrailAppendScan(t *testing.T, tr kms.Trail) {
	appendRecords(t, tr, 1, 3)
	wantLen(t, tr, 3)
	wantRun(t, "Scan(1)", scanTrail(t, tr, 1), 1, 3)
	appendRecords(t, tr, 4, 4)
	wantLen(t, tr, 4)
	wantRun(t, "Scan(1) after a second Append", scanTrail(t, tr, 1), 1, 4)
}

func testTrailScanFromMiddle(t *testing.T, tr kms.Trail) {
	appendRecords(t, tr, 1, 5)
	appendRecords(t, tr, 6, 200)
	for _, from := range []uint64{2, 5, 6, 64, 65, 66, 128, 129, 199, 200} {
		wantRun(t, fmt.Sprintf("Scan(%d)", from), scanTrail(t, tr, from), from, 200)
	}
}

func testTrailScanPastEnd(t *testing.T, tr kms.Trail) {
	appendRecords(t, tr, 1, 10)
	for _, from := range []uint64{11, 12, 1000, math.MaxUint64} {
		wantRun(t, fmt.Sprintf("Scan(%d) of 10 records", from), scanTrail(t, tr, from), from, 0)
	}
}

// The interface asks for from to be at least 1; the suite holds every
// trail to one answer for 0 rather than leave it undefined: it counts as 1.
func testTrailScanFromZero(t *testing.T, tr kms.Trail) {
	appendRecords(t, tr, 1, 3)
	wantRun(t, "Scan(0)", scanTrail(t, tr, 0), 1, 3)
}

func testTrailScanStopEarly(t *testing.T, tr kms.Trail) {
	appendRecords(t, tr, 1, 10)
	var seqs []uint64
	err := tr.Scan(2, func(seq uint64, rec []byte) (bool, error) {
		seqs = append(seqs, seq)
		return len(seqs) < 3, nil
	})
	if err != nil {
		t.Errorf("Scan(2) stopping after 3 = %v, want nil", err)
	}
	wantRun(t, "Scan(2) stopping after 3", seqs, 2, 4)
}

func testTrailScanFnError(t *testing.T, tr kms.Trail) {
	appendRecords(t, tr, 1, 10)
	var seqs []uint64
	err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
		seqs = append(seqs, seq)
		if len(seqs) == 3 {
			return true, errBoom
		}
		return true, nil
	})
	if err != errBoom {
		t.Errorf("Scan(1) with fn failing at record 3 = %v, want %v unchanged", err, errBoom)
	}
	wantRun(t, "Scan(1) with fn failing at record 3", seqs, 1, 3)
}

func testTrailAppendNone(t *testing.T, tr kms.Trail) {
	for _, recs := range [][][]byte{nil, {}} {
		if err := tr.Append(recs); err != nil {
			t.Errorf("Append(%#v) to an empty trail = %v, want nil", recs, err)
		}
	}
	wantLen(t, tr, 0)
	appendRecords(t, tr, 1, 2)
	if err := tr.Append(nil); err != nil {
		t.Errorf("Append(nil) = %v, want nil", err)
	}
	wantLen(t, tr, 2)
	appendRecords(t, tr, 3, 3)
	wantRun(t, "Scan(1)", scanTrail(t, tr, 1), 1, 3)
}

func testTrailAppendCopies(t *testing.T, tr kms.Trail) {
	recs := [][]byte{trailRecord(1), trailRecord(2)}
	if err := tr.Append(recs); err != nil {
		t.Fatalf("Append(2 records) = %v, want nil", err)
	}
	for _, rec := range recs {
		clear(rec)
	}
	wantRun(t, "Scan(1) after the caller cleared its records", scanTrail(t, tr, 1), 1, 2)
}

func testTrailLargeRecord(t *testing.T, tr kms.Trail) {
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>11)
	}
	if err := tr.Append([][]byte{[]byte("before"), big, []byte("after")}); err != nil {
		t.Fatalf("Append(a 1 MiB record between two small ones) = %v, want nil", err)
	}
	want := [][]byte{[]byte("before"), big, []byte("after")}
	var got [][]byte
	err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
		got = append(got, bytes.Clone(rec))
		return true, nil
	})
	if err != nil || len(got) != len(want) {
		t.Fatalf("Scan(1) = %d records, %v; want %d records, nil", len(got), err, len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("Scan(1) record %d = %d bytes, want the %d bytes appended", i+1, len(got[i]), len(want[i]))
		}
	}
}

func testTrailManyRecords(t *testing.T, tr kms.Trail) {
	const n = 5000
	seq := uint64(1)
	for i := 0; seq <= n; i++ {
		size := uint64(i*37%150 + 1) // batches of 1 to 150 records
		last := min(seq+size-1, n)
		appendRecords(t, tr, seq, last)
		seq = last + 1
	}
	wantLen(t, tr, n)
	for _, from := range []uint64{1, 63, 64, 65, 2500, 4097, n} {
		wantRun(t, fmt.Sprintf("Scan(%d)", from), scanTrail(t, tr, from), from, n)
	}
}

// A Scan reads up to the last record appended when it began, even when
// more are appended while it runs. The Append runs in another goroutine
// while fn waits for it: a Scan that blocked Append until it ended would
// deadlock here, and so fail the suite.
func testTrailScanStopsAtLenAtStart(t *testing.T, tr kms.Trail) {
	appendRecords(t, tr, 1, 10)
	var seqs []uint64
	err := tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
		if seq == 5 {
			done := make(chan struct{})
			var appendErr error
			go func() {
				defer close(done)
				appendErr = appendTrailBatch(tr, 11, 20)
			}()
			<-done
			if appendErr != nil {
				return false, fmt.Errorf("Append(records 11 to 20) = %w", appendErr)
			}
		}
		if want := trailRecord(seq); !bytes.Equal(rec, want) {
			return false, fmt.Errorf("record %d = %.40q, want %.40q", seq, rec, want)
		}
		seqs = append(seqs, seq)
		return true, nil
	})
	if err != nil {
		t.Fatalf("Scan(1) with records appended during it = %v, want nil", err)
	}
	wantRun(t, "Scan(1) begun at Len 10, with 10 more appended during it", seqs, 1, 10)
	wantLen(t, tr, 20)
	wantRun(t, "Scan(1) after", scanTrail(t, tr, 1), 1, 20)
}

// Scans that run while one goroutine appends see, each, a gapless run of
// records from their from up to at least the Len before they began and at
// most the Len after they ended.
func testTrailScanWhileAppending(t *testing.T, tr kms.Trail) {
	const batches, perBatch = 100, 10
	var wg sync.WaitGroup
	start, done := make(chan struct{}), make(chan struct{})
	wg.Go(func() {
		defer close(done)
		<-start
		for b := range uint64(batches) {
			if err := appendTrailBatch(tr, b*perBatch+1, (b+1)*perBatch); err != nil {
				t.Errorf("Append(batch %d) = %v, want nil", b, err)
				return
			}
		}
	})
	for r := range 2 {
		wg.Go(func() {
			<-start
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				before := tr.Len()
				from := uint64(1) // every 8th scan reads from the start
				if i%8 != 0 && before > 50 {
					from = before - 50
				}
				var seqs []uint64
				err := tr.Scan(from, func(seq uint64, rec []byte) (bool, error) {
					if want := trailRecord(seq); !bytes.Equal(rec, want) {
						return false, fmt.Errorf("record %d = %.40q, want %.40q", seq, rec, want)
					}
					seqs = append(seqs, seq)
					return true, nil
				})
				after := tr.Len()
				if err != nil {
					t.Errorf("reader %d: Scan(%d) = %v, want nil", r, from, err)
					return
				}
				last := from + uint64(len(seqs)) - 1
				for j, seq := range seqs {
					if seq != from+uint64(j) {
						t.Errorf("reader %d: Scan(%d) saw %s, want a gapless run from %d", r, from, fmtSeqs(seqs), from)
						return
					}
				}
				if last < max(before, from-1) || last > after {
					t.Errorf("reader %d: Scan(%d) ended at record %d, want between Len() before (%d) and after (%d)", r, from, last, before, after)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	wantLen(t, tr, batches*perBatch)
	wantRun(t, "Scan(1) after", scanTrail(t, tr, 1), 1, batches*perBatch)
}

// appendTrailBatch appends the records from seq from up to to, in one
// batch, and returns Append's error: goroutines other than the test's, which
// must not call t.Fatal, call it rather than appendRecords.
func appendTrailBatch(tr kms.Trail, from, to uint64) error {
	var recs [][]byte
	for seq := from; seq <= to; seq++ {
		recs = append(recs, trailRecord(seq))
	}
	return tr.Append(recs)
}

func testTrailLen(t *testing.T, tr kms.Trail) {
	wantLen(t, tr, 0)
	var n uint64
	for _, size := range []uint64{1, 2, 63, 64, 65, 1} {
		appendRecords(t, tr, n+1, n+size)
		n += size
		wantLen(t, tr, n)
	}
	wantRun(t, "Scan(1)", scanTrail(t, tr, 1), 1, n)
}
