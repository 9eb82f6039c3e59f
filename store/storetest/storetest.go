// Package storetest is the conformance suite of kms.Store: every backend
// must pass it.
//
// A backend's test calls Run with a constructor that returns a fresh, empty
// store and registers its own cleanup:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t testing.TB) kms.Store {
//			s, err := mystore.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite checks what kms.Store documents: reads, writes and deletes;
// who owns returned slices; atomicity of failed updates; errors passed
// through unchanged; read-only views; snapshot isolation; reading one's own
// writes; ordered scans by prefix and start, forward and reverse, including
// keys and prefixes of 0xFF bytes; large values and many keys; conflicts
// retried without lost updates; and context cancellation. It never relies
// on timing: concurrent steps are ordered with channels.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ringkms/kms"
)

// Run runs the conformance suite against the stores open returns. Each
// subtest calls open once and gets a fresh, empty store; open registers the
// store's cleanup with t.Cleanup.
func Run(t *testing.T, open func(t testing.TB) kms.Store) {
	runSuite(t, open, "store", []subtest[kms.Store]{
		{"GetMissing", testGetMissing},
		{"SetGetDelete", testSetGetDelete},
		{"EmptyValue", testEmptyValue},
		{"DeleteMissing", testDeleteMissing},
		{"GetReturnsCopy", testGetReturnsCopy},
		{"FailedUpdateWritesNothing", testFailedUpdateWritesNothing},
		{"FnErrorUnchanged", testFnErrorUnchanged},
		{"ViewCannotWrite", testViewCannotWrite},
		{"SnapshotIsolation", testSnapshotIsolation},
		{"ReadOwnWrites", testReadOwnWrites},
		{"ScanPrefix", testScanPrefix},
		{"ScanRanges", testScanRanges},
		{"ScanRangesOwnWrites", testScanRangesOwnWrites},
		{"ScanStartOutsidePrefix", testScanStartOutsidePrefix},
		{"ScanStopEarly", testScanStopEarly},
		{"ScanFnError", testScanFnError},
		{"ScanKeysOnly", testScanKeysOnly},
		{"LargeValue", testLargeValue},
		{"ManyKeys", testManyKeys},
		{"ConcurrentCounter", testConcurrentCounter},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ScanContextCanceled", testScanContextCanceled},
		{"ContextCanceledBeforeStart", testContextCanceledBeforeStart},
		{"UpdateRetryRerunsFn", testUpdateRetryRerunsFn},
		{"UpdateGivesUpOnConflict", testUpdateGivesUpOnConflict},
		{"Writable", testWritable},
	})
}

// subtest is one test of a suite, run on what the suite's open returns.
type subtest[T any] struct {
	name string
	fn   func(t *testing.T, v T)
}

// runSuite runs each of tests as a subtest, on a fresh value that open
// returns; what names that value (a store, a trail) should open return
// nil.
func runSuite[T comparable](t *testing.T, open func(t testing.TB) T, what string, tests []subtest[T]) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := open(t)
			var none T
			if v == none {
				t.Fatal("open returned a nil " + what)
			}
			tc.fn(t, v)
		})
	}
}

// testWritable: a new store, with room on its disk, takes writes, and
// asking writes nothing.
func testWritable(t *testing.T, s kms.Store) {
	ctx := context.Background()
	for range 3 {
		if err := s.Writable(ctx); err != nil {
			t.Fatalf("Writable = %v, want nil", err)
		}
	}
	if got := scan(t, s, kms.ScanOptions{}); len(got) != 0 {
		t.Fatalf("after Writable, the store holds %s, want nothing", fmtKVs(got))
	}
	if n := s.Trail().Len(); n != 0 {
		t.Fatalf("after Writable, Trail().Len() = %d, want 0", n)
	}
}

// errBoom is the custom error the suite's functions return; the store must
// hand it back unchanged.
var errBoom = errors.New("storetest: boom")

// kv is one key and value seen by a scan.
type kv struct {
	key   string
	value []byte
}

// set writes key=value pairs in one Update.
func set(t testing.TB, s kms.Store, pairs ...string) {
	t.Helper()
	if len(pairs)%2 != 0 {
		panic("storetest: set needs key, value pairs")
	}
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		for i := 0; i < len(pairs); i += 2 {
			if err := tx.Set([]byte(pairs[i]), []byte(pairs[i+1])); err != nil {
				return fmt.Errorf("Set(%q): %w", pairs[i], err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update(set %d keys) = %v, want nil", len(pairs)/2, err)
	}
}

// get reads key in its own View.
func get(t testing.TB, s kms.Store, key string) ([]byte, error) {
	t.Helper()
	var v []byte
	var getErr error
	err := s.View(t.Context(), func(tx kms.Txn) error {
		v, getErr = tx.Get([]byte(key))
		return nil
	})
	if err != nil {
		t.Fatalf("View(Get(%q)) = %v, want nil", key, err)
	}
	return v, getErr
}

// wantValue checks that key holds want.
func wantValue(t testing.TB, s kms.Store, key, want string) {
	t.Helper()
	got, err := get(t, s, key)
	if err != nil || string(got) != want {
		t.Errorf("Get(%q) = %q, %v; want %q, nil", key, got, err, want)
	}
}

// wantMissing checks that key is absent.
func wantMissing(t testing.TB, s kms.Store, key string) {
	t.Helper()
	got, err := get(t, s, key)
	if !errors.Is(err, kms.ErrNotFound) {
		t.Errorf("Get(%q) = %q, %v; want error of kind not_found", key, got, err)
	}
}

// scanTx scans inside tx and returns copies of what it saw.
func scanTx(tx kms.Txn, opts kms.ScanOptions) ([]kv, error) {
	var got []kv
	err := tx.Scan(opts, func(key, value []byte) (bool, error) {
		e := kv{key: string(key)}
		if value != nil {
			e.value = bytes.Clone(value)
		}
		got = append(got, e)
		return true, nil
	})
	return got, err
}

// scan scans in its own View.
func scan(t testing.TB, s kms.Store, opts kms.ScanOptions) []kv {
	t.Helper()
	var got []kv
	err := s.View(t.Context(), func(tx kms.Txn) error {
		var err error
		got, err = scanTx(tx, opts)
		return err
	})
	if err != nil {
		t.Fatalf("Scan(%s) = %v, want nil", fmtOpts(opts), err)
	}
	return got
}

// keysOf returns the keys of a scan.
func keysOf(kvs []kv) []string {
	keys := make([]string, len(kvs))
	for i, e := range kvs {
		keys[i] = e.key
	}
	return keys
}

// fmtOpts renders scan options for failure messages.
func fmtOpts(o kms.ScanOptions) string {
	return fmt.Sprintf("{Prefix: %q, Start: %q, Reverse: %v, KeysOnly: %v}", o.Prefix, o.Start, o.Reverse, o.KeysOnly)
}

// wantKind checks that err is a kms error of the given kind.
func wantKind(t testing.TB, what string, err error, kind kms.Kind) {
	t.Helper()
	var e *kms.Error
	if !errors.As(err, &e) || e.Kind != kind {
		t.Errorf("%s = %v, want a kms error of kind %v", what, err, kind)
	}
}

// equalKVs reports whether two scans saw the same keys and values.
func equalKVs(a, b []kv) bool {
	return slices.EqualFunc(a, b, func(x, y kv) bool {
		return x.key == y.key && bytes.Equal(x.value, y.value)
	})
}

// fmtKVs renders a scan for failure messages.
func fmtKVs(kvs []kv) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, e := range kvs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %q", e.key, e.value)
	}
	b.WriteByte(']')
	return b.String()
}
