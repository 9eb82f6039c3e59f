package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/storetest"
)

// openInMemory returns a fresh in-memory Store, closed at the end of t.
func openInMemory(t testing.TB) *Store {
	t.Helper()
	s, err := OpenInMemory()
	if err != nil {
		t.Fatalf("OpenInMemory() = %v, want nil", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
	})
	return s
}

// openDir returns a fresh on-disk Store in a temporary directory, closed at
// the end of t.
func openDir(t testing.TB) *Store {
	t.Helper()
	dir := t.TempDir()
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatalf("OpenDir(%q) = %v, want nil", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v, want nil", err)
		}
	})
	return s
}

// reopen closes the on-disk Store s and opens its directory again: the
// Store it returns is closed at the end of t.
func reopen(t testing.TB, s *Store) *Store {
	t.Helper()
	dir := s.db.Opts().Dir
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatalf("OpenDir(%q) again = %v, want nil", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformanceInMemory(t *testing.T) {
	storetest.Run(t, func(t testing.TB) kms.Store { return openInMemory(t) })
}

func TestConformanceDisk(t *testing.T) {
	storetest.Run(t, func(t testing.TB) kms.Store { return openDir(t) })
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatalf("OpenDir(%q) = %v, want nil", dir, err)
	}
	err = s.Update(t.Context(), func(tx kms.Txn) error {
		if err := tx.Set([]byte("k"), []byte("durable")); err != nil {
			return err
		}
		return tx.Set([]byte("gone"), []byte("x"))
	})
	if err != nil {
		t.Fatalf("Update = %v, want nil", err)
	}
	err = s.Update(t.Context(), func(tx kms.Txn) error { return tx.Delete([]byte("gone")) })
	if err != nil {
		t.Fatalf("Update(Delete) = %v, want nil", err)
	}

	s = reopen(t, s)
	err = s.View(t.Context(), func(tx kms.Txn) error {
		v, err := tx.Get([]byte("k"))
		if err != nil || string(v) != "durable" {
			t.Errorf("Get(%q) after reopen = %q, %v; want %q, nil", "k", v, err, "durable")
		}
		if v, err := tx.Get([]byte("gone")); !errors.Is(err, kms.ErrNotFound) {
			t.Errorf("Get(%q) after reopen = %q, %v; want not_found", "gone", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View = %v, want nil", err)
	}
}

// TestLargeValuesOnDisk writes values on both sides of Badger's value
// threshold (the larger ones go to the value log) and reads them back
// after a reopen.
func TestLargeValuesOnDisk(t *testing.T) {
	sizes := map[string]int{"inline": 1<<20 - 1, "threshold": 1 << 20, "8MiB": 8 << 20}
	value := func(size int) []byte {
		v := make([]byte, size)
		for i := range v {
			v[i] = byte(i ^ i>>9 ^ size)
		}
		return v
	}
	dir := t.TempDir()
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatalf("OpenDir(%q) = %v, want nil", dir, err)
	}
	for name, size := range sizes {
		err := s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte(name), value(size)) })
		if err != nil {
			t.Fatalf("Update(Set(%q, %d bytes)) = %v, want nil", name, size, err)
		}
	}
	s = reopen(t, s)
	err = s.View(t.Context(), func(tx kms.Txn) error {
		for name, size := range sizes {
			got, err := tx.Get([]byte(name))
			if err != nil || !bytes.Equal(got, value(size)) {
				t.Errorf("Get(%q) after reopen = %d bytes, %v; want the %d bytes written, nil", name, len(got), err, size)
			}
		}
		n := 0
		err := tx.Scan(kms.ScanOptions{Reverse: true}, func(key, v []byte) (bool, error) {
			n++
			if want := value(sizes[string(key)]); !bytes.Equal(v, want) {
				t.Errorf("Scan value of %q = %d bytes, want the %d bytes written", key, len(v), len(want))
			}
			return true, nil
		})
		if err != nil || n != len(sizes) {
			t.Errorf("Scan(reverse) = %v after %d items, want nil after %d", err, n, len(sizes))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View = %v, want nil", err)
	}
}

func TestOpenForcesConflictsAndOwnSync(t *testing.T) {
	// Badger's own sync is off: the Store syncs after each Update and
	// not after UpdateNoSync.
	opts := badger.DefaultOptions(t.TempDir()).WithLogger(nil).
		WithSyncWrites(true).WithDetectConflicts(false)
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open() = %v, want nil", err)
	}
	defer s.Close()
	got := s.db.Opts()
	if got.SyncWrites || !got.DetectConflicts {
		t.Errorf("Open(SyncWrites: true, DetectConflicts: false) opened with SyncWrites %v, DetectConflicts %v; want false, true",
			got.SyncWrites, got.DetectConflicts)
	}
}

// TestReopenKeepsWritesAndTrail checks that what Update, UpdateNoSync and
// the trail's Append wrote is there after the Store is closed and opened
// again, and that the trail lives in the subdirectory "trail".
func TestReopenKeepsWritesAndTrail(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Update(ctx, func(tx kms.Txn) error { return tx.Set([]byte("synced"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateNoSync(ctx, func(tx kms.Txn) error { return tx.Set([]byte("unsynced"), []byte("2")) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Trail().Append([][]byte{[]byte("one"), []byte("two")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "trail")); err != nil || !fi.IsDir() {
		t.Fatalf("trail directory: %v", err)
	}
	if s, err = OpenDir(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k, want := range map[string]string{"synced": "1", "unsynced": "2"} {
		var got []byte
		err := s.View(ctx, func(tx kms.Txn) error {
			var err error
			got, err = tx.Get([]byte(k))
			return err
		})
		if err != nil || string(got) != want {
			t.Errorf("Get(%s) after reopen = %q, %v; want %q", k, got, err, want)
		}
	}
	var recs []string
	err = s.Trail().Scan(1, func(_ uint64, rec []byte) (bool, error) {
		recs = append(recs, string(rec))
		return true, nil
	})
	if err != nil || s.Trail().Len() != 2 || strings.Join(recs, ",") != "one,two" {
		t.Errorf("trail after reopen: Len %d, records %q, %v; want one,two", s.Trail().Len(), recs, err)
	}
}

// TestOpenInUse: a directory that another Store has open (Badger's lock
// on the directory) is an error of kind Conflict that says so in its
// Message, Badger's words only in its Err, for the log.
func TestOpenInUse(t *testing.T) {
	s := openDir(t)
	// The directory is locked by s.
	_, err := OpenDir(s.db.Opts().Dir)
	var e *kms.Error
	if !errors.As(err, &e) || e.Kind != kms.KindConflict {
		t.Fatalf("OpenDir(locked dir) = %v, want a kms error of kind conflict", err)
	}
	if !strings.Contains(e.Message, "in use by another process") || strings.Contains(e.Message, "Badger") {
		t.Errorf("OpenDir(locked dir) message = %q, want it to say the directory is in use, in no words of Badger's", e.Message)
	}
}

// TestErrorTranslation checks the kinds of Badger's errors, and that no
// Badger sentinel can be matched outside an internal error's cause.
func TestErrorTranslation(t *testing.T) {
	s := openInMemory(t)
	big := bytes.Repeat([]byte{1}, 900<<10) // inline, under the value threshold

	tests := []struct {
		name string
		fn   func(kms.Txn) error
		kind kms.Kind
	}{
		{"Get missing", func(tx kms.Txn) error { _, err := tx.Get([]byte("missing")); return err }, kms.KindNotFound},
		{"Get empty key", func(tx kms.Txn) error { _, err := tx.Get(nil); return err }, kms.KindInvalid},
		{"Set empty key", func(tx kms.Txn) error { return tx.Set(nil, []byte("v")) }, kms.KindInvalid},
		{"Delete empty key", func(tx kms.Txn) error { return tx.Delete([]byte{}) }, kms.KindInvalid},
		{"Set reserved key", func(tx kms.Txn) error { return tx.Set([]byte("!badger!x"), []byte("v")) }, kms.KindInvalid},
		{"Set key too large", func(tx kms.Txn) error { return tx.Set(make([]byte, maxKeySize+1), []byte("v")) }, kms.KindTooLarge},
		{"Set value too large", func(tx kms.Txn) error { return tx.Set([]byte("k"), make([]byte, 1<<20)) }, kms.KindTooLarge},
		{"transaction too large", func(tx kms.Txn) error {
			for _, k := range []string{"a", "b", "c", "d"} {
				if err := tx.Set([]byte(k), big); err != nil {
					return err
				}
			}
			return nil
		}, kms.KindTooLarge},
	}
	badgerErrs := []error{
		badger.ErrKeyNotFound, badger.ErrEmptyKey, badger.ErrInvalidKey, badger.ErrTxnTooBig,
		badger.ErrReadOnlyTxn, badger.ErrConflict, badger.ErrDiscardedTxn,
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Update(t.Context(), tc.fn)
			var e *kms.Error
			if !errors.As(err, &e) || e.Kind != tc.kind {
				t.Fatalf("Update(%s) = %v, want a kms error of kind %v", tc.name, err, tc.kind)
			}
			for _, be := range badgerErrs {
				if errors.Is(err, be) {
					t.Errorf("Update(%s) = %v, which matches badger's %q", tc.name, err, be)
				}
			}
		})
	}
}

func TestTxnAfterFnReturns(t *testing.T) {
	s := openInMemory(t)
	var kept kms.Txn
	if err := s.Update(t.Context(), func(tx kms.Txn) error { kept = tx; return nil }); err != nil {
		t.Fatalf("Update = %v, want nil", err)
	}
	checks := map[string]error{
		"Get":    func() error { _, err := kept.Get([]byte("k")); return err }(),
		"Set":    kept.Set([]byte("k"), []byte("v")),
		"Delete": kept.Delete([]byte("k")),
		"Scan": kept.Scan(kms.ScanOptions{}, func(key, value []byte) (bool, error) {
			return true, nil
		}),
	}
	for name, err := range checks {
		if !errors.Is(err, kms.ErrInvalid) {
			t.Errorf("%s on an ended Txn = %v, want kind invalid", name, err)
		}
	}
}

func TestClosed(t *testing.T) {
	s, err := OpenInMemory()
	if err != nil {
		t.Fatalf("OpenInMemory() = %v, want nil", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	ran := false
	fn := func(kms.Txn) error { ran = true; return nil }
	for name, err := range map[string]error{
		"View":   s.View(t.Context(), fn),
		"Update": s.Update(t.Context(), fn),
	} {
		if !errors.Is(err, kms.ErrInternal) {
			t.Errorf("%s on a closed Store = %v, want kind internal", name, err)
		}
	}
	if ran {
		t.Error("fn ran on a closed Store")
	}
}

// TestReserveFileOnlyWhenAsked: a Store opened as a library user opens
// it (OpenDir, or OpenWith without HoldReserve) writes no reserve file;
// with HoldReserve it holds a quarter of the reserve in BallastFile.
func TestReserveFileOnlyWhenAsked(t *testing.T) {
	const reserve = 4 << 20
	for _, c := range []struct {
		name string
		open func(dir string) (*Store, error)
		want int64 // the file's size; 0 for none
	}{
		{"OpenDir", OpenDir, 0},
		{"OpenWith", func(dir string) (*Store, error) {
			return OpenWith(DefaultOptions(dir), Options{DiskReserve: reserve})
		}, 0},
		{"OpenWith HoldReserve", func(dir string) (*Store, error) {
			return OpenWith(DefaultOptions(dir), Options{DiskReserve: reserve, HoldReserve: true})
		}, reserve / 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := c.open(dir)
			if err != nil {
				t.Fatalf("open = %v", err)
			}
			defer s.Close()
			if err := s.Writable(t.Context()); err != nil {
				t.Skipf("the test's file system is too full: %v", err)
			}
			fi, err := os.Stat(filepath.Join(dir, BallastFile))
			switch {
			case c.want == 0 && !os.IsNotExist(err):
				t.Errorf("%s wrote %s (%v), want no such file", c.name, BallastFile, err)
			case c.want != 0 && (err != nil || fi.Size() != c.want):
				t.Errorf("%s: %s is %v, %v; want a file of %d bytes", c.name, BallastFile, fi, err, c.want)
			}
		})
	}
}
