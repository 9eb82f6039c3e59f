package filetrail

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/ringkms/kms"
)

func TestOpenInvalidOptions(t *testing.T) {
	_, err := OpenWith(t.TempDir(), Options{SegmentSize: -1})
	wantKind(t, "OpenWith(SegmentSize -1)", err, kms.KindInvalid)
}

// TestScanDetectsCorruption damages record 150 of an open trail in each
// field of its frame; Scan reports it, naming the seq.
func TestScanDetectsCorruption(t *testing.T) {
	const n, bad = 200, 150
	var at int64 // offset of record bad in the only segment
	for seq := uint64(1); seq < bad; seq++ {
		at += int64(len(frame(seq, record(seq))))
	}
	for _, field := range []struct {
		name string
		off  int64
	}{{"length", 3}, {"CRC", 4}, {"seq", 15}, {"payload", 20}} {
		t.Run(field.name, func(t *testing.T) {
			dir := t.TempDir()
			tr := openTrail(t, dir, Options{})
			appendRecords(t, tr, 1, n, 50)
			flipByte(t, segments(t, dir)[0], at+field.off)
			for _, from := range []uint64{1, bad - 1, bad} {
				var seen uint64
				err := tr.Scan(from, func(seq uint64, rec []byte) (bool, error) {
					seen++
					return true, nil
				})
				wantKind(t, fmt.Sprintf("Scan(%d)", from), err, kms.KindUnprocessable)
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("record %d ", bad)) {
					t.Errorf("Scan(%d) = %v, want an error naming record %d", from, err, bad)
				}
				if seen != bad-from {
					t.Errorf("Scan(%d) called fn %d times, want %d: for the records before %d", from, seen, bad-from, bad)
				}
			}
			// A Scan whose sparse index entry lies past the damage reads
			// nothing of it.
			from, seen := uint64(1+3*indexEvery), uint64(0)
			err := tr.Scan(from, func(seq uint64, rec []byte) (bool, error) { seen++; return true, nil })
			if err != nil || seen != n+1-from {
				t.Errorf("Scan(%d) past the damage = %v after %d records, want nil after %d", from, err, seen, n+1-from)
			}
		})
	}
}

func TestAppendTooLarge(t *testing.T) {
	for name, tr := range map[string]kms.Trail{
		"file":   openTrail(t, t.TempDir(), Options{}),
		"memory": NewMemory(),
	} {
		t.Run(name, func(t *testing.T) {
			err := tr.Append([][]byte{[]byte("small"), make([]byte, MaxRecordSize+1)})
			wantKind(t, "Append(a record of MaxRecordSize+1 bytes)", err, kms.KindTooLarge)
			if got := tr.Len(); got != 0 {
				t.Errorf("Len() after a rejected Append = %d, want 0", got)
			}
			largest := bytes.Repeat([]byte{7}, MaxRecordSize)
			if err := tr.Append([][]byte{largest}); err != nil {
				t.Fatalf("Append(a record of MaxRecordSize bytes) = %v, want nil", err)
			}
			err = tr.Scan(1, func(seq uint64, rec []byte) (bool, error) {
				if !bytes.Equal(rec, largest) {
					return false, fmt.Errorf("record %d is %d bytes, want the %d written", seq, len(rec), len(largest))
				}
				return true, nil
			})
			if err != nil || tr.Len() != 1 {
				t.Errorf("Scan(1) = %v with Len() %d, want nil with 1", err, tr.Len())
			}
		})
	}
}

// failSync returns a sync function that fails on the calls whose numbers
// (from 1) are in fail, and fsyncs otherwise.
func failSync(fail ...int) func(*os.File) error {
	calls := 0
	return func(f *os.File) error {
		calls++
		for _, n := range fail {
			if calls == n {
				return errors.New("injected sync failure")
			}
		}
		return fdatasync(f)
	}
}

func TestAppendFailureWritesNothing(t *testing.T) {
	dir := t.TempDir()
	tr := openTrail(t, dir, Options{Preallocate: -1}) // the size below is the frames'
	appendRecords(t, tr, 1, 10, 10)
	path := segments(t, dir)[0]
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	tr.datasync = failSync(1) // the sync after the write fails; the one after the truncate works
	err = tr.Append([][]byte{record(11), record(12)})
	wantKind(t, "Append(sync fails)", err, kms.KindInternal)
	if got, err := os.Stat(path); err != nil {
		t.Fatal(err)
	} else if got.Size() != before.Size() {
		t.Errorf("after a failed Append, %s is %d bytes, want the %d before it", path, got.Size(), before.Size())
	}
	wantRecords(t, tr, 10)

	appendRecords(t, tr, 11, 15, 5)
	closeTrail(t, tr)
	tr = openTrail(t, dir, Options{})
	wantRecords(t, tr, 15)
}

func TestAppendFailureUndoFails(t *testing.T) {
	tr := openTrail(t, t.TempDir(), Options{})
	appendRecords(t, tr, 1, 10, 10)
	tr.datasync = failSync(1, 2, 3) // the syncs after the truncates fail too
	err := tr.Append([][]byte{record(11)})
	wantKind(t, "Append(sync fails)", err, kms.KindInternal)
	// The next Append cuts the failed one's bytes first, and writes
	// nothing while it cannot.
	err = tr.Append([][]byte{record(11)})
	wantKind(t, "Append while the failed one cannot be cut", err, kms.KindInternal)
	if err == nil || !strings.Contains(err.Error(), "after a failed append") {
		t.Errorf("Append while the failed one cannot be cut = %v, want it to say so", err)
	}
	wantRecords(t, tr, 10)
	// Once the cut succeeds, the Trail takes appends again, without a
	// reopen.
	appendRecords(t, tr, 11, 12, 2)
	wantRecords(t, tr, 12)
}

// TestAppendNoSpace: a write that fails for a full disk is an error of
// kind NoSpace, and writes nothing.
func TestAppendNoSpace(t *testing.T) {
	tr := openTrail(t, t.TempDir(), Options{})
	appendRecords(t, tr, 1, 3, 3)
	tr.datasync = func(*os.File) error { return &os.PathError{Op: "fdatasync", Path: "x", Err: syscall.ENOSPC} }
	wantKind(t, "Append(disk full)", tr.Append([][]byte{record(4)}), kms.KindNoSpace)
	tr.datasync = fdatasync
	wantRecords(t, tr, 3)
	appendRecords(t, tr, 4, 4, 1)
	wantRecords(t, tr, 4)
}

func TestUseAfterClose(t *testing.T) {
	tr := openTrail(t, t.TempDir(), Options{})
	appendRecords(t, tr, 1, 3, 3)
	closeTrail(t, tr)
	wantKind(t, "Append after Close", tr.Append([][]byte{record(4)}), kms.KindInternal)
	wantKind(t, "Scan after Close", tr.Scan(1, func(uint64, []byte) (bool, error) { return true, nil }), kms.KindInternal)
	wantKind(t, "Close after Close", tr.Close(), kms.KindInternal)
}

// BenchmarkAppend64 appends batches of 64 records of 400 bytes, as the
// Service's journal does under load; one op is one batch, fsync included.
// "preallocated" writes over zeros the filler wrote ahead, "growing"
// extends the file with every batch.
func BenchmarkAppend64(b *testing.B) {
	for _, bc := range []struct {
		name        string
		preallocate int64
	}{{"preallocated", 0}, {"growing", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			tr := openTrail(b, b.TempDir(), Options{Preallocate: bc.preallocate})
			batch := make([][]byte, 64)
			for i := range batch {
				batch[i] = bytes.Repeat([]byte{byte(i)}, 400)
			}
			b.SetBytes(64 * 400)
			b.ReportAllocs()
			for b.Loop() {
				if err := tr.Append(batch); err != nil {
					b.Fatalf("Append(64 records) = %v, want nil", err)
				}
			}
		})
	}
}
